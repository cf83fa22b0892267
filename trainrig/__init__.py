"""The machinery of the project: everything that makes the same `cli.py` job run on one device, on several
processes and machines, stop and resume exactly, and be monitored. The user's code (cli.py, models/,
lightning_modules/, datamodules/, callbacks/, configs/) never has to change for any of it.

One sub-package or module per concern, each below the ones that use it (tests/architecture/test_layers.py pins the
order):

- `registry`: how optional parts plug in: each optional part is one folder here, and its `plugin.py` adds the part's
  options, runs the job elsewhere or extends a logger;
- `errors`: the user's mistakes as one line and exit status 2;
- `network`: which network interface the ranks of a job meet on;
- `strategies`: the strategies registered by name for `--trainer.strategy`, and how that flag is read;
- `resume`: checkpoints on an interval, at epoch ends and on SIGTERM, and `--ckpt_path last`;
- `loggers`: what a run writes and shows besides checkpoints (its config, media, the model summary);
- `cli`: the LightningCLI every run goes through, the checks before a run, and how a process runs the job and ends
  with its exit status; `cli.py` passes the user's choices in;
- `testing`: emulated hosts on one machine, for the tests and benchmarks of jobs across machines;
- one folder per launcher or scheduler, which only starts processes that run the same job, and per service a run
  reports to.
"""
