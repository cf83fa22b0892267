"""The options that put a run on one CUDA device in bf16, for the tests marked `gpu` (`run_if(min_cuda_devices=1)`).

bf16-mixed is what a user on a current GPU trains in: the tests prove the template runs as users run it there.
"""

__all__ = ["BF16", "ONE_GPU"]

ONE_GPU = ("--trainer.accelerator", "gpu", "--trainer.devices", "1")
BF16 = ("--trainer.precision", "bf16-mixed")
