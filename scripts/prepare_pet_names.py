"""Derive `data/pet_names.txt` from the City of Seattle pet-license table.

The project ships only the name column, raw and in licence order (one name a line, blank
where the licence has none), so the cleaning rules stay in `datamodules/pet_names.py` and
anyone can re-derive the file from a newer export:

    python scripts/prepare_pet_names.py path/to/seattle_pet_licenses.csv
"""

import argparse
import csv
from pathlib import Path

from trainrig.errors import UserInputError
from trainrig.errors.exit_status import entry_point

NAME_COLUMN = "Animal's Name"
DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "data" / "pet_names.txt"


def extract_names(csv_path: Path) -> list[str]:
    if not csv_path.is_file():
        raise UserInputError(f"{csv_path} does not exist; give the path of the Seattle Pet Licenses CSV export")
    with csv_path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if NAME_COLUMN not in (reader.fieldnames or []):
            raise UserInputError(f"{csv_path} has no column {NAME_COLUMN!r}")
        return [row[NAME_COLUMN] for row in reader]


@entry_point
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", type=Path, help="Seattle Pet Licenses export (dataset jguv-t9rb)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args()
    names = extract_names(args.csv)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(names) + "\n", encoding="utf-8")
    print(f"wrote {len(names)} names ({sum(1 for n in names if not n.strip())} blank) to {args.output}")


if __name__ == "__main__":
    main()
