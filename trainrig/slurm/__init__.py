"""SLURM: a batch script per training job (`python -m trainrig.slurm.sbatch`) that continues its run when SLURM
requeues it. See docs/slurm.md."""
