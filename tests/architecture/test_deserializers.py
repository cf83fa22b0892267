"""Every call in the package and the examples that can run code from what it reads is on one list (docs/security.md
points here): `DESERIALIZERS`, each with who can write its input and the test that tries a hostile one by effect.

The walk (`ast`, no import) finds, in trainrig/, datamodules/, lightning_modules/, callbacks/, sweep.py and cli.py:
pickle, cloudpickle, dill and marshal loads and unpicklers; `torch.load`, torch's URL and distributed-checkpoint loads;
`yaml.load` other than safe; LitData's deserializers and tree-spec reader; imports by name (`importlib`,
`import_object`, `__import__`); `eval`, `exec`; the results of submitit jobs and Dask futures (unpickled messages).
A use that is not listed fails the test, naming it; so does an entry nothing uses any more. An entry without a test
is one whose input is trusted (the project's own code, the user's config or command line, which are code too), and
says so.
"""

import ast

from tests.helpers import ROOT

WALKED = ("trainrig", "datamodules", "lightning_modules", "callbacks", "sweep.py", "cli.py")
UNPICKLING_MODULES = {"pickle", "cloudpickle", "dill", "marshal"}
# Names whose use, called or handed on (`partial(torch.hub.load_state_dict_from_url, ...)`), can run code from data.
RUNS_CODE = {
    "torch.load",
    "load_state_dict_from_url",
    "_load_state_dict",  # torch.distributed.checkpoint's load: unpickles values kept in shard files
    "yaml.load",
    "yaml.load_all",
    "yaml.full_load",
    "yaml.unsafe_load",
    "_get_serializers",  # LitData's serializers: pickle, int:pickle, graph, ...
    "treespec_loads",  # LitData's tree-spec reader: imports the class a spec names
    "PyTreeLoader",
    "import_module",
    "import_object",
    "__import__",
    "eval",
    "exec",
    "result",  # submitit's job.result() and Dask's future.result(): unpickled
    "results",
    "gather",
}
TRUSTED = "trusted: "  # who-can-write for an input nobody else writes, so no hostile-input test

# "path::enclosing function::name used" -> (who can write that input, the test that tries a hostile one by effect).
DESERIALIZERS = {
    "trainrig/resume/loading.py::load_checkpoint::torch.load": (
        "whoever made or can change a checkpoint file or URL (weights_only=True)",
        "tests/resume/test_hostile_checkpoints.py",
    ),
    "trainrig/resume/readable.py::check_checkpoint_readable::torch.hub.load_state_dict_from_url": (
        "whoever serves the --ckpt_path URL (weights_only=True)",
        "tests/resume/test_hostile_checkpoints.py",
    ),
    "trainrig/resume/sharded.py::shards_index::pickle.load": (
        "whoever can write a sharded checkpoint directory; reached only with --weights_only false",
        "tests/resume/test_hostile_checkpoints.py",
    ),
    "trainrig/resume/sharded.py::shards_index::_IndexUnpickler": (
        "whoever can write a sharded checkpoint directory (an allow-list unpickler)",
        "tests/resume/test_hostile_checkpoints.py",
    ),
    "trainrig/resume/sharded.py::check_shards::_load_state_dict": (
        "whoever can write a sharded checkpoint directory (each pickled value weights_only=True)",
        "tests/resume/test_hostile_checkpoints.py",
    ),
    "trainrig/resume/sharded.py::consolidated::_load_state_dict": (
        "whoever can write a sharded checkpoint directory (checked by read_metadata first)",
        "tests/resume/test_hostile_checkpoints.py",
    ),
    "trainrig/resume/random_state.py::gathered_from_every_rank::torch.load": (
        TRUSTED + "the job's own ranks, over its process group (weights_only=True)",
        None,
    ),
    "trainrig/resume/readable.py::trusted_classes::import_object": (
        TRUSTED + "the names a checkpoint the user trusts with --weights_only false holds",
        None,
    ),
    "trainrig/sweeps/slurm_trials.py::SlurmTrial._exit_status::task.result": (
        "whoever can write the trial folder (refused unless only the user can)",
        "tests/sweeps/slurm/test_results.py",
    ),
    "trainrig/dask/launch.py::run_attempt::future.result": (
        "the Dask cluster's members (TLS credentials; docs/security.md, Dask)",
        "tests/dask/test_embedded_cluster_credentials.py",
    ),
    "trainrig/dask/launch.py::run_attempt::.result": (
        "the Dask cluster's members (TLS credentials; docs/security.md, Dask)",
        "tests/dask/test_embedded_cluster_credentials.py",
    ),
    "trainrig/dask/worker.py::run_rank::import_object": (
        "the Dask client's job description (TLS credentials; docs/security.md, Dask)",
        "tests/dask/test_embedded_cluster_credentials.py",
    ),
    "trainrig/data/location.py::litdata_module::importlib.import_module": (
        TRUSTED + "the project's own LitData module names",
        None,
    ),
    "trainrig/registry.py::import_object::importlib.import_module": (
        TRUSTED + "class paths of the config and command line (a config is code)",
        None,
    ),
    "trainrig/registry.py::plugins::importlib.import_module": (TRUSTED + "the project's own plugin folders", None),
    "trainrig/strategies/__init__.py::<module>::importlib.import_module": (
        TRUSTED + "the project's own strategy modules",
        None,
    ),
    "trainrig/strategies/strategy_option.py::strategy_class::import_object": (
        TRUSTED + "the config's --trainer.strategy (a config is code)",
        None,
    ),
    "trainrig/launch/arguments.py::check_job_fits::import_object": (
        TRUSTED + "the `job_check` import path a strategy class names in its code",
        None,
    ),
    "trainrig/sweeps/placements/__init__.py::_modules::importlib.import_module": (
        TRUSTED + "the project's own placement modules",
        None,
    ),
    "trainrig/sweeps/pruning.py::ReportToDriver._report_and_wait::import_module": (
        TRUSTED + "the transport module the sweep driver names on the trial's command line",
        None,
    ),
    "trainrig/resume/torchrun_restarts.py::separate_restart_attempts::importlib.import_module": (
        TRUSTED + "a torch module name in the code",
        None,
    ),
    "trainrig/network.py::_store_bound::importlib.import_module": (TRUSTED + "a torch module name in the code", None),
    "trainrig/launch/fit_arguments.py::check_fit_arguments::importlib.import_module": (
        TRUSTED + "the launcher's own command line (a config is code)",
        None,
    ),
    "trainrig/errors/user_code.py::import_problem::importlib.import_module": (
        TRUSTED + "class paths of the config and command line (a config is code)",
        None,
    ),
    "trainrig/errors/options.py::arguments_of::import_object": (
        TRUSTED + "class paths of the config and command line (a config is code)",
        None,
    ),
    "trainrig/cli/checks.py::check_model_arguments_are_linked::import_object": (
        TRUSTED + "class paths of the config and command line (a config is code)",
        None,
    ),
    "trainrig/cli/checks.py::check_model_can_predict::import_object": (
        TRUSTED + "class paths of the config and command line (a config is code)",
        None,
    ),
    "trainrig/dask/description.py::with_checkpoints_in::import_object": (
        TRUSTED + "class paths of the config (a config is code)",
        None,
    ),
    "trainrig/dask/description.py::rank_strategy::import_object": (
        TRUSTED + "class paths of the config (a config is code)",
        None,
    ),
    "trainrig/dask/description.py::writes_sharded_checkpoints::import_object": (
        TRUSTED + "class paths of the config (a config is code)",
        None,
    ),
    "datamodules/__init__.py::model_arguments::importlib.import_module": (
        TRUSTED + "the project's own datamodule modules",
        None,
    ),
    "datamodules/streaming_images.py::StreamingImagesDataModule.shard_source::import_object": (
        TRUSTED + "the config's `source` class path (a config is code; a shard folder never names it)",
        None,
    ),
    "datamodules/streaming_pet_names.py::StreamingPetNamesDataModule.shard_source::import_object": (
        TRUSTED + "the config's `source` class path (a config is code; a shard folder never names it)",
        None,
    ),
}


def _name(node: ast.expr) -> str:
    """`a.b.c` of a name or attribute chain, `.c` when the chain starts with a call or subscript."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value) if isinstance(node.value, ast.Name | ast.Attribute) else ''}.{node.attr}"
    return ""


def _runs_code(name: str) -> bool:
    """Whether `name` (as `_name` spells it) is one of the uses the module's docstring lists."""
    parts = name.split(".")
    if len(parts) >= 2 and parts[-2] in UNPICKLING_MODULES and parts[-1] in ("load", "loads", "Unpickler"):
        return True
    return name.endswith("Unpickler") or ".".join(parts[-2:]) in RUNS_CODE or parts[-1] in RUNS_CODE


class _Uses(ast.NodeVisitor):
    """The code-running names a file uses (called, or handed on as a value), each with its enclosing function."""

    def __init__(self, path: str):
        self.path = path
        self.scope: list[str] = []
        self.found: set[str] = set()

    def _scoped(self, node) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def _used(self, node: ast.expr) -> None:
        name = _name(node)
        if name and _runs_code(name):
            self.found.add(f"{self.path}::{'.'.join(self.scope) or '<module>'}::{name}")

    def visit_Call(self, node: ast.Call) -> None:
        self._used(node.func)
        for argument in node.args:  # handed on: partial(torch.hub.load_state_dict_from_url, ...)
            if isinstance(argument, ast.Attribute | ast.Name):
                self._used(argument)
        self.generic_visit(node)


def found_deserializers() -> set[str]:
    found = set()
    for walked in WALKED:
        for path in [ROOT / walked] if walked.endswith(".py") else sorted((ROOT / walked).rglob("*.py")):
            uses = _Uses(str(path.relative_to(ROOT)))
            uses.visit(ast.parse(path.read_text(), str(path)))
            found |= uses.found
    return found


def test_every_call_that_can_run_code_from_data_is_listed_with_who_writes_it_and_its_hostile_test():
    found = found_deserializers()
    unlisted = sorted(found - DESERIALIZERS.keys())
    assert not unlisted, (
        f"calls that can run code from what they read, not in DESERIALIZERS (tests/architecture/"
        f"test_deserializers.py; docs/security.md): {unlisted}; list each with who can write its input and the test "
        "that tries a hostile one"
    )
    # An entry of a part a generated project leaves out (Dask, sweeps) is gone with its file.
    gone = sorted(use for use in DESERIALIZERS.keys() - found if (ROOT / use.partition("::")[0]).is_file())
    assert not gone, f"DESERIALIZERS lists calls the code no longer makes: {gone}"


def test_every_listed_input_is_trusted_or_tried_hostile_by_an_existing_test():
    for use, (writer, test) in DESERIALIZERS.items():
        assert (test is None) == writer.startswith(TRUSTED), use
        if not (ROOT / use.partition("::")[0]).is_file():
            continue  # a part a generated project leaves out
        assert test is None or (ROOT / test).is_file(), f"{use}: no test {test}"


def test_reading_shards_hands_litdata_no_deserializer():
    """Shards are read as data (docs/security.md, "Data"): nothing under trainrig/data/ or the streaming datamodules
    uses LitData's reader, whose serializers unpickle and whose tree-spec reader imports."""
    readers = {"_get_serializers", "treespec_loads", "PyTreeLoader", "deserialize"}
    for path in [
        *sorted((ROOT / "trainrig" / "data").rglob("*.py")),
        *sorted((ROOT / "datamodules").glob("*streaming*")),
    ]:
        used = {
            _name(node).rpartition(".")[2]
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute | ast.Name)
        }
        assert not used & readers, f"{path.relative_to(ROOT)} uses {sorted(used & readers)}"
