"""A hostile checkpoint runs no code: every entry point that reads a checkpoint, crossed with every way it finds one
(a path, `--ckpt_path last`, a sharded directory's `meta.pt`, index and shard files, a URL), refuses it in one line,
exit 2, writing nothing. `--weights_only false` is the one way to load a checkpoint that names code, and it reaches
both the project's checks and Lightning's load.

The hostile files are real checkpoints of one short run with one value more (tests/helpers/hostile.py)."""

import functools
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import cli as project_cli
from tests.helpers.hostile import assert_refused, hostile_checkpoint, hostile_pickle, hostile_shards
from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT, run_cli, small_run_args
from trainrig.cli.template_cli import TemplateCLI
from trainrig.errors import UserInputError

CONFIG = EXAMPLE_CONFIGS[0]
SHARDED = ("--trainer.strategy", "fsdp2", "--trainer.devices", "1", "--trainer.accelerator", "cpu")
TRUST = "--weights_only false"


def hostile_directory(directory: Path, hostile_file: str, marker: Path) -> Path:
    """The sharded checkpoint `directory` with one of the files torch unpickles made hostile: `meta.pt` (Lightning's
    load), the index `.metadata` (torch.distributed.checkpoint's, with plain pickle), or a `.distcp` shard file's
    pickled values (its planner's, in full)."""
    if hostile_file == "meta.pt":
        hostile_checkpoint(directory / hostile_file, marker)
    elif hostile_file == ".metadata":
        hostile_pickle(directory / hostile_file, marker)
    else:
        hostile_shards(directory, marker)
    return directory


@pytest.fixture(scope="module")
def trained(tmp_path_factory, shapes_root) -> dict[str, Path]:
    """One short run's `last.ckpt` as a file and as a sharded directory (fsdp2), each in its run folder."""
    root = tmp_path_factory.mktemp("trained")
    run_cli("fit", small_run_args(CONFIG, root / "file", shapes_root))
    run_cli("fit", small_run_args(CONFIG, root / "sharded", shapes_root, *SHARDED))
    return {kind: next((root / kind).rglob("last.ckpt")) for kind in ("file", "sharded")}


def copied(source: Path, target: Path) -> Path:
    (shutil.copytree if source.is_dir() else shutil.copy)(source, target)
    return target


def cli(subcommand: str, logs: Path, shapes_root: Path, *extra: str) -> list[str]:
    return [str(ROOT / "cli.py"), subcommand, *small_run_args(CONFIG, logs, shapes_root, *extra)]


# CI budget: every subcommand reads --ckpt_path in the same check as fit (TemplateCLI.parse_arguments), before it
# runs; the slow ones prove that it stays so.
@pytest.mark.parametrize(
    "subcommand", ["fit", *(pytest.param(name, marks=pytest.mark.slow) for name in ("validate", "test", "predict"))]
)
def test_a_hostile_checkpoint_file_is_refused_by_every_subcommand(subcommand, trained, tmp_path, shapes_root):
    marker = tmp_path / "marker"
    evil = hostile_checkpoint(copied(trained["file"], tmp_path / "evil.ckpt"), marker)
    logs = tmp_path / "logs"
    line = assert_refused(
        cli(subcommand, logs, shapes_root, "--ckpt_path", str(evil)), marker, [logs, tmp_path], mentions=TRUST
    )
    assert str(evil) in line


def test_a_hostile_last_checkpoint_is_refused_not_skipped(trained, tmp_path, shapes_root):
    """`--ckpt_path last` finds it in the experiment's newest run; an older checkpoint beside it is not resumed
    instead: the user learns of the file."""
    marker = tmp_path / "marker"
    logs = tmp_path / "logs"
    run = copied(trained["file"].parent.parent, logs / trained["file"].parent.parent.parent.name / "version_0")
    shutil.copy(run / "checkpoints" / "last.ckpt", run / "checkpoints" / "previous.ckpt")
    hostile_checkpoint(run / "checkpoints" / "last.ckpt", marker)
    line = assert_refused(cli("fit", logs, shapes_root, "--ckpt_path", "last"), marker, [logs], mentions=TRUST)
    assert "last.ckpt" in line


@pytest.mark.parametrize(
    ("subcommand", "hostile_file"),
    [("fit", "meta.pt"), ("predict", ".metadata"), ("fit", ".distcp")],
)
def test_a_sharded_checkpoint_with_a_hostile_file_is_refused(subcommand, hostile_file, trained, tmp_path, shapes_root):
    """The directory's `meta.pt` is loaded weights-only; its index, which torch reads with plain pickle, is checked
    first with an unpickler that knows only what an index holds; the values its shard files keep pickled (an
    optimizer's learning rate), which torch unpickles in full, are each unpickled weights-only first."""
    marker = tmp_path / "marker"
    evil = hostile_directory(copied(trained["sharded"], tmp_path / "evil.ckpt"), hostile_file, marker)
    logs = tmp_path / "logs"
    assert_refused(
        cli(subcommand, logs, shapes_root, *SHARDED, "--ckpt_path", str(evil)), marker, [logs, tmp_path], mentions=TRUST
    )


# CI budget: consolidate's index is checked by the same read as the shard files' values (`read_metadata`), and the
# index check itself by the sharded `predict` case above.
@pytest.mark.parametrize("hostile_file", [pytest.param(".metadata", marks=pytest.mark.slow), ".distcp"])
def test_consolidate_refuses_a_hostile_sharded_checkpoint(hostile_file, trained, tmp_path):
    marker = tmp_path / "marker"
    evil = hostile_directory(copied(trained["sharded"], tmp_path / "evil.ckpt"), hostile_file, marker)
    command = ["-m", "trainrig.resume.consolidate", str(evil), str(tmp_path / "out.ckpt")]
    assert_refused(command, marker, [tmp_path], mentions=TRUST)


def test_the_fsdp2_strategy_checks_the_shards_itself(trained, tmp_path, shapes_root):
    """A Trainer that cli.py's checks never saw (built without a subcommand, fit from a notebook): the strategy's own
    load refuses the hostile shard file before torch.distributed.checkpoint unpickles it."""
    marker = tmp_path / "marker"
    evil = hostile_shards(copied(trained["sharded"], tmp_path / "evil.ckpt"), marker)
    built = TemplateCLI(
        args=small_run_args(CONFIG, tmp_path / "logs", shapes_root, *SHARDED),
        run=False,
        job=project_cli.run,
        data_to_model_links=project_cli.DATA_TO_MODEL_LINKS,
        trainer_defaults=project_cli.TRAINER_DEFAULTS,
    )
    with pytest.raises(UserInputError, match=f"shard value optimizer_0.param_groups.0.lr.*{TRUST}"):
        built.trainer.fit(built.model, built.datamodule, ckpt_path=str(evil))
    assert not marker.exists(), "the payload ran"


def test_a_hostile_checkpoint_url_is_refused(trained, tmp_path, shapes_root, monkeypatch):
    """Lightning would unpickle a URL's checkpoint in full unless told `weights_only=True`: served from a real local
    server, downloaded into torch's hub cache (the download is all that is written)."""
    marker = tmp_path / "served" / "marker"
    marker.parent.mkdir()
    hostile_checkpoint(copied(trained["file"], marker.parent / "evil.ckpt"), marker)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(marker.parent))
    handler.log_message = lambda *args: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    url = f"http://127.0.0.1:{server.server_address[1]}/evil.ckpt"
    logs = tmp_path / "logs"
    try:
        line = assert_refused(cli("fit", logs, shapes_root, "--ckpt_path", url), marker, [logs], mentions=TRUST)
    finally:
        server.shutdown()
    assert url in line


def test_weights_only_false_trusts_the_checkpoint_in_the_checks_and_in_lightnings_load(trained, tmp_path, shapes_root):
    """The opt-in named in every refusal: the run goes on, and the file's extra value is unpickled (the marker)."""
    marker = tmp_path / "marker"
    evil = hostile_checkpoint(copied(trained["file"], tmp_path / "evil.ckpt"), marker)
    run_cli(
        "validate", [*small_run_args(CONFIG, tmp_path / "logs", shapes_root), "--ckpt_path", str(evil), *TRUST.split()]
    )
    assert marker.exists()
