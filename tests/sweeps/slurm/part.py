"""What the project-wide tests need to know of sweeps with SLURM (tests/helpers/parts.py reads it)."""

LAYERS = {"sweeps": {"slurm"}}  # a trial on SLURM runs the srun command `trainrig.slurm.sbatch` writes
