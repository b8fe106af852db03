"""The recipes' wings: one package per recipe (recipes/<name>.py's own code in recipes/stages/<name>/), as
torchtune keeps a recipe's code with the recipe. What two or more recipes use is recipes.common's; a wing
imports recipes.common and the layers below, never another wing (tests/test_layering.py checks both).
May import: recipes, data_filters, eval, tasks and rewards."""
