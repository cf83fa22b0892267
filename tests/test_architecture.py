"""The layering the template promises: cli.py on top, launchers and everything else below, no private CLI API."""

import ast

from tests.helpers.runs import ROOT

ENTRY_POINT = ROOT / "cli.py"
NOT_LIBRARY = ("tests", "benchmarks", ".venv", "build")


def library_modules():
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if path != ENTRY_POINT and relative.parts[0] not in NOT_LIBRARY and not relative.parts[0].startswith("{{"):
            yield relative, ast.parse(path.read_text())


def imported_modules(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_module_imports_the_entry_point_back():
    importing = [str(relative) for relative, tree in library_modules() if "cli" in imported_modules(tree)]
    assert not importing, f"{importing} import cli.py: pass what they need in instead (launchers get the job)"


def test_the_entry_point_uses_no_private_lightning_cli_attribute():
    """A `self._name` in cli.py that TemplateCLI does not define itself reaches into LightningCLI's internals."""
    tree = ast.parse(ENTRY_POINT.read_text())
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
    assert not private, f"cli.py uses LightningCLI's private {sorted(private)}"
