"""What each rank of a run trained on and ended with, written per rank, to check a data order across stops and
process counts, and that data-parallel ranks stayed replicas of one another."""

import hashlib
from pathlib import Path

from lightning.pytorch import Callback
from torch.distributed.tensor import DTensor


class RecordSamples(Callback):
    """Appends `<epoch> <sha1 of the input>` for every training sample, once its step has finished, to
    `rank<N>.txt`; at the end of training writes the sha1 of the rank's parameters (whole, also when sharded) to
    `rank<N>.weights`."""

    def __init__(self, directory: str):
        self.directory = Path(directory)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        lines = [
            f"{trainer.current_epoch} {hashlib.sha1(sample.cpu().numpy().tobytes()).hexdigest()}\n"
            for sample in batch[0]
        ]
        with (self.directory / f"rank{trainer.global_rank}.txt").open("a") as handle:
            handle.writelines(lines)

    def on_train_end(self, trainer, pl_module) -> None:
        digest = hashlib.sha1()
        for name, parameter in sorted(pl_module.state_dict().items()):
            if isinstance(parameter, DTensor):  # a sharded run's (fsdp2): every rank gathers the whole, in one order
                parameter = parameter.full_tensor()
            digest.update(name.encode())
            digest.update(parameter.detach().cpu().numpy().tobytes())
        (self.directory / f"rank{trainer.global_rank}.weights").write_text(digest.hexdigest())


def samples_by_rank(directory: Path) -> dict[int, list[str]]:
    """Each rank's recorded samples, `<epoch> <sha1>` lines in the order it trained on them."""
    return {int(path.stem[4:]): path.read_text().splitlines() for path in sorted(directory.glob("rank*.txt"))}


def weights_by_rank(directory: Path) -> dict[int, str]:
    return {int(path.stem[4:]): path.read_text() for path in sorted(directory.glob("rank*.weights"))}
