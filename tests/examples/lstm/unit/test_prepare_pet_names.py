"""scripts/prepare_pet_names.py, which extracts the shipped names file from the city's licence table: the column in
order, a table without it refused, the shipped file whole."""

import subprocess
import sys

from tests.helpers.runs import ROOT

HEADER = "License Issue Date,License Number,Animal's Name,Species,Primary Breed,Secondary Breed,ZIP Code\n"


def test_script_extracts_the_raw_name_column_in_order(tmp_path):
    table = tmp_path / "licenses.csv"
    table.write_text(
        HEADER
        + 'March 29 2005,1,Ozzy,Dog,"Dachshund, Standard",,98104\n'
        + "May 1 2010,2,,Cat,Manx,,98103\n"
        + "June 2 2011,3, Mr. Bo ,Dog,Pug,,98107\n"
    )
    output = tmp_path / "names.txt"
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "prepare_pet_names.py"), str(table), "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert output.read_text() == "Ozzy\n\n Mr. Bo \n"
    assert "wrote 3 names (1 blank)" in result.stdout


def test_script_rejects_a_table_without_the_name_column(tmp_path):
    table = tmp_path / "other.csv"
    table.write_text("a,b\n1,2\n")
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "prepare_pet_names.py"),
            str(table),
            "--output",
            str(tmp_path / "x.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr == f'error: {table} has no column "Animal\'s Name"\n'
    assert not (tmp_path / "x.txt").exists()


def test_script_rejects_a_missing_table_in_one_line(tmp_path):
    missing = tmp_path / "missing.csv"
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "prepare_pet_names.py"), str(missing), "--output", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stderr) == (
        2,
        f"error: {missing} does not exist; give the path of the Seattle Pet Licenses CSV export\n",
    )
    assert not (tmp_path / "x").exists()


def test_shipped_names_file_is_the_full_licence_table():
    lines = (ROOT / "data" / "pet_names.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 66042
    assert lines[:3] == ["Ozzy", "Jack", "Ginger"]
