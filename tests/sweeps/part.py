"""What the project-wide tests need to know of the sweep part (tests/helpers/parts.py reads it)."""

LAYERS = {"sweeps": {"errors", "launch", "resume", "strategies"}}
ENTRY_POINTS = ["sweep"]
# sweep.py's own options (the rest are cli.py fit's): each typed one with a wrong type, each bounded one out of range.
BAD_OPTIONS = {
    "sweep": [
        *(("--sweep.trials", "abc"), ("--sweep.trials", "0"), ("--sweep.parallel", "abc"), ("--sweep.parallel", "0")),
        *(("--sweep.seed", "abc"), ("--sweep.direction", "sideways"), ("--sweep.sampler", "nope")),
        *(("--sweep.pruner", "nope"), ("--sweep.pruner_startup_trials", "abc")),
        *(("--sweep.pruner_startup_trials", "-1"), ("--sweep.pruner_warmup_epochs", "abc")),
        *(("--sweep.pruner_warmup_epochs", "-1"), ("--sweep.max_restarts", "abc")),
        *(("--sweep.max_restarts", "-1"), ("--sweep.space", "abc")),
        *(("--sweep", "/nonexistent.yaml"), ("--sweep.metric", "[")),
    ]
}
REFUSED_BY_A_PROCESS = [("sweep.py", ["--sweep", "/nonexistent.yaml"], "/nonexistent.yaml")]
