"""Where the W&B part's modules moved, for the one-line "moved" error (trainrig/errors/moved.py reads this
table without importing it); a project without the part has neither the part nor its moves."""

MOVED_MODULES = {
    "cli_extensions.wandb": "trainrig.wandb.plugin",
    "logger_extensions.wandblogger": "trainrig.wandb.plugin",
}
