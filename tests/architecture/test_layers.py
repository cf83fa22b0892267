"""The layering the template promises: the user's wing (cli.py, models, LightningModules, datamodules, callbacks) on
top; the machinery in one package, trainrig/, below it; inside trainrig, each concern below the ones that use it,
the plugin registry at the bottom; no cycles; no private LightningCLI API in the CLI (trainrig/cli/).

The machinery reaches the user's code only through the config (class paths jsonargparse imports) and the registry
(plugins found by their files), never by an import statement: these tests read every import, also those inside
functions.
"""

import ast
from pathlib import Path

from tests.helpers.parts import declared, declared_items
from tests.helpers.runs import ROOT

ENTRY_POINT = ROOT / "cli.py"
MACHINERY = ROOT / "trainrig"
TEMPLATE_CLI = MACHINERY / "cli" / "template_cli.py"
USERS_WING = {"cli", *declared("ENTRY_POINTS"), "models", "lightning_modules", "datamodules", "callbacks"}

# What each concern of trainrig may import of the others, the lowest first: a concern imports only concerns listed
# before it (a new concern fails test_every_concern_has_its_place until it is placed here). The optional parts' concerns
# come after these, in the order of their test folders, each declared in its folder's part.py (tests/helpers/parts.py).
LAYERS = {
    "registry": set(),
    "errors": {"registry"},
    "testing": set(),
    "network": {"errors"},
    "resume": {"errors", "registry"},
    "data": {"errors", "resume"},  # shards written and streamed; resume/ keeps their position
    "strategies": {"errors", "registry", "resume"},  # the fsdp2 strategy writes the sharded checkpoints resume/ reads
    "loggers": {"registry", "resume"},
    "monitoring": set(),  # the progress bar, and when a step may read the device
    "cli": {"errors", "registry", "network", "resume", "strategies", "loggers", "monitoring"},  # what cli.py runs
    "launch": {"errors", "registry", "strategies"},  # what a launched job runs, for every launcher below
}
for part_concern, allowed in declared_items("LAYERS"):
    LAYERS[part_concern] = LAYERS.get(part_concern, set()) | allowed


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def machinery_modules() -> dict[str, ast.AST]:
    return {module_name(path): ast.parse(path.read_text()) for path in sorted(MACHINERY.rglob("*.py"))}


def imports(tree: ast.AST, known: set[str]) -> set[str]:
    """The modules an import statement anywhere in `tree` names: `from a.b import c` is a.b.c where that is a module."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {
                f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module
                for alias in node.names
            }
    return names


def concern(module: str) -> str | None:
    """`resume` for trainrig.resume.latest; None for trainrig itself."""
    parts = module.split(".")
    return parts[1] if parts[0] == "trainrig" and len(parts) > 1 else None


def test_the_machinery_never_imports_the_users_wing():
    modules = machinery_modules()
    importing = {
        module: sorted(name for name in imports(tree, set(modules)) if name.split(".")[0] in USERS_WING)
        for module, tree in modules.items()
    }
    importing = {module: names for module, names in importing.items() if names}
    assert not importing, f"the machinery imports the user's code (reach it through the config instead): {importing}"


def test_every_concern_has_its_place():
    concerns = {concern(module) for module in machinery_modules()} - {None}
    assert concerns == set(LAYERS), f"place each concern of trainrig in LAYERS: {sorted(concerns ^ set(LAYERS))}"


def test_each_concern_imports_only_the_concerns_below_it():
    modules = machinery_modules()
    order = list(LAYERS)
    for lower, allowed in LAYERS.items():  # the table itself goes only downwards, so it holds no cycle
        assert all(order.index(name) < order.index(lower) for name in allowed), f"{lower} may import {allowed}"
    upward = {}
    for module, tree in modules.items():
        imported = {concern(name) for name in imports(tree, set(modules))} - {None, concern(module)}
        if concern(module) is not None and (beyond := imported - LAYERS[concern(module)]):
            upward[module] = sorted(beyond)
    assert not upward, f"imports above their layer (move the code down, or pass it in): {upward}"


def test_the_registry_imports_nothing_of_the_project():
    tree = ast.parse((MACHINERY / "registry.py").read_text())
    project = {"trainrig", *USERS_WING}
    assert not {name for name in imports(tree, set()) if name.split(".")[0] in project}


def test_no_module_of_the_machinery_takes_part_in_an_import_cycle():
    modules = machinery_modules()
    graph = {
        module: {name for name in imports(tree, set(modules)) if name in modules} for module, tree in modules.items()
    }
    cycles = []

    def visit(module: str, path: list[str], done: set[str]) -> None:
        for name in sorted(graph[module]):
            if name in path:
                cycles.append(path[path.index(name) :] + [name])
            elif name not in done:
                visit(name, [*path, name], done)
        done.add(module)

    done: set[str] = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module], done)
    assert not cycles, f"import cycles: {cycles}"


def test_no_module_imports_the_entry_point_back():
    importing = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if path == ENTRY_POINT or relative.parts[0] in ("tests", "benchmarks", ".venv", "build"):
            continue
        if relative.parts[0].startswith("{{"):
            continue
        if "cli" in {name.split(".")[0] for name in imports(ast.parse(path.read_text()), set())}:
            importing.append(str(relative))
    assert not importing, f"{importing} import cli.py: pass what they need in instead (launchers get the job)"


def test_the_entry_point_uses_no_private_lightning_cli_attribute():
    """A `self._name` in TemplateCLI that it does not define itself reaches into LightningCLI's internals."""
    tree = ast.parse(TEMPLATE_CLI.read_text())
    (template_cli,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "TemplateCLI"]
    own = {node.name for node in template_cli.body if isinstance(node, ast.FunctionDef)}
    private = {
        node.attr
        for node in ast.walk(template_cli)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and node.attr not in own
    }
    assert not private, f"TemplateCLI uses LightningCLI's private {sorted(private)}"
