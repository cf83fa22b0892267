"""What makes a run stop and continue exactly: checkpoints that are complete or absent, written at an interval,
at epoch ends and on preemption; the data order and random state they carry; and `--ckpt_path last`, which finds
the newest good checkpoint of an experiment. See docs/resume.md.
"""
