"""The bottom layer: helpers every package uses and no domain owns, each module named for its job.

did_you_mean.py (the nearest known name to a misspelled one), option_values.py (yes/no values as rows write
them, numbers as YAML 1.1 leaves them, a mapping option given as JSON), atomic_files.py (every results file
written whole or not at all), venv_check.py (is this the Python the project was installed into), versions.py
(the installed versions a run card and an evaluation record). It imports nothing of ours, and every other package
may import it (tests/test_layering.py). Why a package of its own: the layer rule had put these where their first
user sat (the did-you-mean in rewards/, because the reward registry needed it; atomic writes in tasks/), so the
recipes' run card reached into eval's command line for package versions.

May import: basics only, and the standard library (tests/test_layering.py checks).
"""
