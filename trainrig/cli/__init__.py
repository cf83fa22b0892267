"""The machinery behind `cli.py`: the LightningCLI every run goes through (`template_cli`), the checks that refuse a
run before it writes anything (`checks`), and how a process runs a job and ends with its exit status (`entry`).

`cli.py` holds the user's choices (which values the data hands the model, the trainer's defaults) and passes them in:
nothing here imports it.
"""
