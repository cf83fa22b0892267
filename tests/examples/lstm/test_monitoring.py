"""What the LSTM example logs with the default CSV logger: files in the log directory."""

from tests.helpers.media import media_tables
from tests.helpers.runs import run_cli, small_run_args


def test_lstm_writes_generated_names_marked_against_training_data(tmp_path):
    run_cli("fit", small_run_args("lstm.yaml", tmp_path))
    (table,) = media_tables(tmp_path, "generated_names")
    assert table[0] == ["name", "in_training_data"] and len(table) == 21
    assert {row[1] for row in table[1:]} <= {"True", "False"}
    assert all(row[0] == row[0].title() for row in table[1:])
