"""`python -m trainrig.resume.consolidate DIRECTORY FILE`: a sharded checkpoint as one file a user can share.

The file loads like any single-file checkpoint: into any strategy, `cli.py predict --ckpt_path FILE`, or
`torch.load` without torch.distributed.
"""

import argparse
from pathlib import Path

from trainrig.errors import UserInputError
from trainrig.errors.exit_status import entry_point
from trainrig.resume.atomic_io import write_checkpoint_atomically
from trainrig.resume.sharded import METADATA_NAME, consolidated, is_sharded_checkpoint


@entry_point
def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m trainrig.resume.consolidate",
        description="Write a sharded checkpoint directory as one .ckpt file that loads without torch.distributed.",
    )
    parser.add_argument(
        "directory", type=Path, help="a sharded checkpoint, e.g. logs/EXPERIMENT/version_0/checkpoints/last.ckpt"
    )
    parser.add_argument("file", type=Path, help="the single-file checkpoint to write, e.g. model.ckpt")
    parser.add_argument(
        "--weights_only",
        choices=("true", "false"),
        default="true",
        help="false unpickles a checkpoint you trust in full, also what could run code (as cli.py's option)",
    )
    options = parser.parse_args(args)
    if not is_sharded_checkpoint(options.directory):
        raise UserInputError(f"{options.directory} is not a sharded checkpoint directory (no {METADATA_NAME})")
    if options.file.exists():
        raise UserInputError(f"{options.file} exists; name a new file")
    write_checkpoint_atomically(options.file, consolidated(options.directory, options.weights_only == "true"))
    print(f"wrote {options.file}")


if __name__ == "__main__":
    main()
