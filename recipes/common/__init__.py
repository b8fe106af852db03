"""What two or more recipes use: config parsing and checks, model loading and saving, data conversion, run cards,
checkpoints and the resume rule, the SFT step, the monitor, the sample -> verify -> keep rule (traces/), the tiny
model. What one recipe alone runs is that recipe's wing (recipes.stages); tests/test_architecture.py counts the
recipes that use each module here."""
