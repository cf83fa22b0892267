"""The table of moved code paths (trainrig/errors/moved.py): a path that moved twice ends at its last place, and the
one line a config naming it gets says where that is."""

from trainrig.errors.moved import moved_path_error, new_path


def test_a_path_that_moved_twice_ends_at_its_last_place():
    # strategy_flag.py went into trainrig/ as strategies/flag.py, which is strategies/strategy_option.py now.
    assert new_path("strategy_flag.with_class_paths") == "trainrig.strategies.strategy_option.with_class_paths"
    assert new_path("trainrig.strategies.flag") == "trainrig.strategies.strategy_option"


def test_a_path_that_never_moved_is_left_alone():
    assert new_path("trainrig.strategies.strategy_option.with_class_paths") is None
    assert new_path("lightning.pytorch.strategies.DDPStrategy") is None
    assert moved_path_error("torch.optim.Adam") is None


def test_the_line_names_the_new_place():
    assert moved_path_error("resume.checkpoint.ResumableCheckpoint") == (
        "resume.checkpoint.ResumableCheckpoint has moved to trainrig.resume.checkpoint.ResumableCheckpoint: change it "
        "in your config"
    )
