"""A recipe's command line, in one place: its config read from YAML and flags (config.py: `RecipeParser`,
`run_recipe_cli`), what a config of the user's own gets for the options it leaves unset (config_defaults.py),
what `--help` shows and docs/options.md is written from (help.py), the launch and the whole config checked before
anything loads (checks.py: a mistake is one line and exit code 2), `--try_on_this_machine` (try_here.py) and how
a finished process of a multi-process launch ends (process_end.py)."""
