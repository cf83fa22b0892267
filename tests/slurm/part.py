"""What the project-wide tests need to know of the SLURM part (tests/helpers/parts.py reads it)."""

LAYERS = {"slurm": {"errors", "launch", "strategies"}}
TOOLS = [("trainrig.slurm.sbatch", "trainrig.slurm.sbatch")]
