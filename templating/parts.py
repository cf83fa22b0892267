"""Which files and lines belong to which example or optional part, and how a generated project drops the rest.

The repository root is the one source of truth: a runnable project holding every example and part.
Lines that only some choices need sit between markers in the comment syntax of their file,

    # cookiecutter: only with dask          <!-- cookiecutter: only with cnn or mlp -->
    ...                                     ...
    # cookiecutter: end                     <!-- cookiecutter: end -->

or carry one at the end of the line (`"dask[distributed]",  # cookiecutter: only with dask`).
A condition combines the names in CHOICES and `template` (true only in this repository, for what
exists to build the template) with `and`, `or`, `not` and parentheses. Whole files and folders belong to the
condition that lists them in PATHS; the tests of an example or part sit in folders named after it, listed once by a
pattern (`tests/**/dask`). A generated project keeps what its answers satisfy and loses
the markers themselves. Three rules need no markers: a Markdown list item or table row that links to a removed
file goes with it, so does a command in a Python module's docstring that runs a removed module (`python -m
trainrig.slurm.sbatch ...` in cli.py's), and in Markdown the first example a project has stands in for the CNN
(MAIN_EXAMPLE_PATHS; `my_task`, the user's own, in a project with none).
"""

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

EXAMPLES = ("cnn", "lstm", "mlp")
OPTIONAL_PARTS = ("dask", "wandb", "kubernetes", "slurm", "sweep")
CHOICES = (*EXAMPLES, *OPTIONAL_PARTS)

# Files and folders that exist only when their condition holds; a path with `**` names every folder it matches. The
# tests of an example or part sit in folders named after it, wherever they are (`tests/**/mlp`): tests/dask/mlp/ holds
# the Dask tests that run the MLP example, so it goes with either.
PATHS = {
    "cnn": [
        "benchmarks/sharding.py",
        "docs/performance/sharding.md",
        "models/image_backbones.py",
        "models/staged_resnet.py",
        "lightning_modules/image_classifier.py",
        "configs/cnn.yaml",
        "configs/cnn_dogs.yaml",
        "configs/cnn_streaming.yaml",
        "callbacks/example_images.py",
        "callbacks/prediction_table.py",
        "benchmarks/resume.py",
        "docs/performance/resume.md",
        "docs/examples/cnn.md",
        "tests/**/cnn",
    ],
    "cnn or mlp": [
        "models/staged.py",
        "configs/strategies",
        "trainrig/strategies/layer_split.py",
        "trainrig/launch/pipeline_fit.py",
        "trainrig/strategies/pipeline.py",
        "trainrig/strategies/pipeline_checks.py",
        "trainrig/strategies/pipeline_optimizer_state.py",
        "trainrig/strategies/pipeline_schedules.py",
        "trainrig/strategies/pipeline_steps.py",
        "trainrig/strategies/stages.py",
        "tests/helpers/pipeline_runs.py",
        "docs/model_parallel.md",
        "lightning_modules/classification.py",
        "datamodules/image_folder.py",
        "datamodules/synthetic_shapes.py",
        "datamodules/streaming_images.py",
        "callbacks/predicted_classes_writer.py",
        "benchmarks/streaming.py",
        "docs/performance/streaming.md",
    ],
    "lstm": [
        "models/char_lstm.py",
        "lightning_modules/name_generator.py",
        "datamodules/pet_names.py",
        "datamodules/streaming_pet_names.py",
        "configs/lstm.yaml",
        "configs/lstm_reference.yaml",
        "configs/lstm_streaming.yaml",
        "data/pet_names.txt",
        "scripts",
        "callbacks/generated_names_table.py",
        "callbacks/generated_names_writer.py",
        "benchmarks/pet_names.py",
        "benchmarks/reference_pet_names.py",
        "benchmarks/pet_name_quality.py",
        "benchmarks/pet_name_samples.py",
        "docs/performance/pet_names.md",
        "docs/examples/lstm.md",
        "tests/**/lstm",
    ],
    "mlp": [
        "models/staged_mlp.py",
        "lightning_modules/mlp_classifier.py",
        "datamodules/fashion_mnist.py",
        "configs/mlp.yaml",
        "configs/mlp_fashion_mnist.yaml",
        "configs/mlp_streaming.yaml",
        "callbacks/confusion_matrix.py",
        "docs/examples/mlp.md",
        "tests/**/mlp",
        "tests/helpers/plain_data.py",
        "tests/resume/test_plain_data.py",
    ],
    "cnn or lstm": ["benchmarks", "docs/performance"],
    # The tests' own task, on which the tests that hold for every example run where there is none (its config is
    # found from configs/, which then holds only what to write there).
    "not (cnn or lstm or mlp)": ["tests/builtin_task", "configs/README.md"],
    # Tests of what the examples ship: a streaming twin of each config, a search space of each.
    "cnn or lstm or mlp": ["tests/examples/test_streaming_configs.py"],
    "sweep and (cnn or lstm or mlp)": ["tests/sweeps/test_spaces.py"],
    # Each measures every example, by name.
    "cnn and lstm and mlp": [
        "benchmarks/gpu",
        "benchmarks/overhead.py",
        "benchmarks/gpu_defaults.py",
        "docs/performance/overhead.md",
        "docs/performance/gpu.md",
        "benchmarks/time_to_quality.py",
        "docs/performance/time_to_quality.md",
        "tests/benchmarks",
    ],
    "dask": [
        "docs/dask.md",
        "trainrig/dask",
        "tests/**/dask",
    ],
    "wandb": [
        "docs/monitoring.md",
        "configs/logger",
        "trainrig/wandb",
        "tests/**/wandb",
    ],
    # Each benchmark compares what its examples and parts do.
    "cnn and mlp": [
        "benchmarks/strategies.py",
        "docs/performance/strategies.md",
    ],
    "mlp and (cnn or lstm)": ["benchmarks/hosts.py", "docs/performance/hosts.md", "benchmarks/host_time.py"],
    "dask and lstm and cnn": [
        "benchmarks/dask_launcher.py",
        "docs/performance/dask_launcher.md",
    ],
    "dask and mlp and cnn": ["benchmarks/recovery.py", "docs/performance/recovery.md"],
    "wandb and cnn": ["benchmarks/media_cost.py", "docs/performance/media_cost.md"],
    "lstm or (wandb and cnn)": ["benchmarks/epoch_timer.py"],
    "kubernetes": [
        "docs/clusters.md",
        "trainrig/kubernetes",
        "Dockerfile",
        ".dockerignore",
        "tests/**/kubernetes",
    ],
    "slurm": ["docs/slurm.md", "trainrig/slurm", "trainrig/testing/slurm.py", "tests/**/slurm"],
    "slurm and mlp and (cnn or lstm)": ["benchmarks/slurm_requeue.py", "docs/performance/slurm_requeue.md"],
    "sweep": [
        "sweep.py",
        "trainrig/sweeps",
        "docs/sweeps.md",
        "tests/**/sweeps",
    ],
    "sweep and lstm": ["configs/sweeps/lstm.yaml"],
    "sweep and lstm and dask": ["benchmarks/sweep.py", "docs/performance/sweep.md"],
    "sweep and mlp": ["configs/sweeps/mlp.yaml"],
    "sweep and cnn": ["configs/sweeps/cnn.yaml"],
    "sweep and dask": ["trainrig/sweeps/dask_trials.py", "trainrig/sweeps/placements/dask.py"],
    "sweep and slurm": ["trainrig/sweeps/slurm_trials.py", "trainrig/sweeps/placements/slurm.py"],
    # The table names every part's calls; a project without one of them keeps its own checks, not this list.
    "lstm and dask and slurm and sweep": ["tests/architecture/test_deserializers.py"],
    # Counts the reads of every example; its docs page goes with W&B.
    "cnn and lstm and mlp and wandb": ["tests/monitoring"],
    "template": [
        "docs/template.md",
        "templating",
        "tests/**/template",
    ],
}

# Root values replaced by the answers; each must occur in its file, so changing one at the root without
# updating it here fails every generation (and the tests that generate projects).
SUBSTITUTIONS = {
    "pyproject.toml": [
        ('name = "lightning-distributed-template"', 'name = "{project_slug}"'),
        ('authors = [{name = "Lightning distributed template contributors"}]', 'authors = [{{name = "{author}"}}]'),
    ],
    "README.md": [("# Lightning distributed training template\n", "# {project_name}\n")],
    "configs/logger/wandb.yaml": [("project: lightning-distributed-template", "project: {project_slug}")],
    "tests/wandb/test_monitoring.py": [
        ('("lightning-distributed-template", "tests"', '("{project_slug}", "tests"'),
        ('parts[0] == "lightning-distributed-template"', 'parts[0] == "{project_slug}"'),
    ],
}

# In the Markdown files a generated project keeps, the first example it has stands in for the CNN in commands and
# paths shared by every example: text about the CNN itself sits between cnn markers, so it is gone when that differs.
MAIN_EXAMPLE_PATHS = ("configs/{}.yaml", "configs/sweeps/{}.yaml", "logs/{}/")
# What those commands and paths name in a project with no example: the config of the user's own task, which the
# README's "Your own data" and "Your own model" tell them to write.
NO_EXAMPLE = "my_task"
# A Markdown list item or table row, and the relative targets of its links.
ENTRY = re.compile(r"^\s*([-*] |\|)")
LINK_TARGET = re.compile(r"\]\((?!\w+://|#|mailto:)([^)\s]+)\)")
# A command that runs a module of the project, in a Python module's docstring.
RUNS_MODULE = re.compile(r"python -m ([\w.]+)")

# Files whose "#" starts a comment only at the beginning of a line: no end-of-line markers there.
WHOLE_LINE_COMMENTS_ONLY = ("Dockerfile", ".dockerignore", ".gitignore")
HASH_COMMENTS = {".py", ".yaml", ".yml", ".toml", ".sh", ".cfg", ""}
PROJECT_SLUG = re.compile(r"[a-z][a-z0-9_]*")
FORBIDDEN_IN_TEXT = re.compile(r'["\\\x00-\x1f]')


class TemplateError(ValueError):
    """A marker, a condition or an answer the template cannot use; the message names it."""


class BadAnswer(TemplateError):
    """An answer the user gave that would make a broken project: bad input, not a fault of the template."""


def validate_answers(answers: dict) -> None:
    """Reject answers that would produce a broken project, before the copy is changed (cookiecutter then deletes it).
    Any choice of examples and parts makes a project: with no example, the tests run on their own small task."""
    name, slug, author = answers["project_name"], answers["project_slug"], answers["author"]
    if not name.strip():
        raise BadAnswer("project_name is empty")
    for key, value in (("project_name", name), ("author", author)):
        if FORBIDDEN_IN_TEXT.search(value):
            raise BadAnswer(f"{key} {value!r} contains a quote, a backslash or a control character")
    if not PROJECT_SLUG.fullmatch(slug):
        raise BadAnswer(
            f"project_slug {slug!r} (from project_name {name!r}) is not valid: use lower-case letters, digits and"
            " underscores, starting with a letter, e.g. project_slug=my_project"
        )


def chosen(answers: dict, name: str) -> bool:
    value = answers[name]
    if isinstance(value, str):
        return value.strip().lower() in ("y", "yes", "true", "1", "on")
    return bool(value)


def evaluate(condition: str, truth: dict[str, bool], where: str) -> bool:
    tokens = re.findall(r"\(|\)|[A-Za-z_]+|\S", condition)
    for token in tokens:
        if token not in ("(", ")", "and", "or", "not") and token not in truth:
            raise TemplateError(
                f"{where}: unknown name {token!r} in condition {condition!r}; known: {', '.join(truth)}"
            )
    try:
        return bool(eval(" ".join(tokens), {"__builtins__": {}}, dict(truth)))
    except SyntaxError:
        raise TemplateError(f"{where}: cannot read condition {condition!r}") from None


def marker_patterns(path: Path) -> tuple[re.Pattern, re.Pattern, re.Pattern | None] | None:
    """(block start, block end, end-of-line or None) marker patterns in the file's comment syntax, or None for other
    files."""
    if path.suffix == ".md":
        opening, closing = r"<!--", r"\s*-->"
    elif path.suffix in HASH_COMMENTS or path.name in WHOLE_LINE_COMMENTS_ONLY:
        opening, closing = r"#", ""
    else:
        return None
    start = re.compile(rf"^\s*{opening} cookiecutter: only with (?P<condition>.+?){closing}\s*$")
    end = re.compile(rf"^\s*{opening} cookiecutter: end{closing}\s*$")
    inline = None
    if path.name not in WHOLE_LINE_COMMENTS_ONLY:
        inline = re.compile(rf"^(?P<line>.*?\S)\s*{opening} cookiecutter: only with (?P<condition>.+?){closing}\s*$")
    return start, end, inline


def keep_chosen_lines(text: str, path: Path, truth: dict[str, bool], where: str) -> str:
    """The lines of `text` whose conditions hold, without markers; raises TemplateError on unbalanced markers."""
    patterns = marker_patterns(path)
    if patterns is None or "cookiecutter:" not in text:
        return text
    start, end, inline = patterns
    kept, open_blocks = [], []
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        here = f"{where}:{number}"
        if match := start.match(line):
            open_blocks.append((evaluate(match["condition"], truth, here), here))
        elif end.match(line):
            if not open_blocks:
                raise TemplateError(f"{here}: 'cookiecutter: end' without a matching 'only with'")
            open_blocks.pop()
        elif all(keep for keep, _ in open_blocks):
            if inline and (match := inline.match(line.rstrip("\n"))):
                if evaluate(match["condition"], truth, here):
                    kept.append(match["line"] + "\n")
            else:
                kept.append(line)
    if open_blocks:
        raise TemplateError(f"{open_blocks[-1][1]}: 'only with' block never ends")
    # A dropped block leaves the blank lines around it: keep at most two in a row (PEP 8's maximum).
    return re.sub(r"\n{4,}", "\n\n\n", "".join(kept))


def truth_table(answers: dict | None) -> dict[str, bool]:
    """Every condition name's value: all true in the repository itself (`answers` None)."""
    if answers is None:
        return dict.fromkeys((*CHOICES, "template"), True)
    return {**{name: chosen(answers, name) for name in CHOICES}, "template": False}


def apply_answers(project_dir: Path, answers: dict) -> None:
    """Turn a full copy of the repository in `project_dir` into the project the answers describe."""
    validate_answers(answers)
    main_example = next((example for example in EXAMPLES if chosen(answers, example)), NO_EXAMPLE)
    for relative, replacements in SUBSTITUTIONS.items():  # first, while every file is complete
        path = project_dir / relative
        text = path.read_text()
        for old, new in replacements:
            if old not in text:
                raise TemplateError(
                    f"{relative} no longer contains {old!r}: update SUBSTITUTIONS in templating/parts.py"
                )
            text = text.replace(old, new.format(**answers))
        path.write_text(text)
    truth = truth_table(answers)
    removed = set()
    for condition, paths in PATHS.items():
        if not evaluate(condition, truth, "PATHS"):
            for relative in paths:
                for path in matching(project_dir, relative):
                    remove(path)
                    removed.add(path.resolve())
    for path in sorted(project_dir.rglob("*")):
        if path.is_file():
            rewrite(path, project_dir, truth)
    for path in project_dir.rglob("*.md"):
        drop_entries_linking(path, removed)
        name_main_example(path, main_example)
    for path in project_dir.rglob("*.py"):
        drop_commands_running(path, project_dir, removed)
    tidy_python(project_dir)


def matching(project_dir: Path, relative: str) -> list[Path]:
    """What a PATHS entry names in `project_dir`: the path itself, or every match of a pattern with `**`."""
    return sorted(project_dir.glob(relative)) if "*" in relative else [project_dir / relative]


def drop_entries_linking(path: Path, removed: set[Path]) -> None:
    """Drop the list items (with their indented continuation lines and sub-items) and table rows of a Markdown page
    that link to a removed file: an entry about a part goes with the part, without markers."""
    lines = path.read_text().splitlines(keepends=True)
    kept, at = [], 0
    while at < len(lines):
        entry = ENTRY.match(lines[at])
        end = at + 1
        if entry and not entry[1].startswith("|"):
            indent = len(lines[at]) - len(lines[at].lstrip())
            while end < len(lines) and lines[end].strip() and len(lines[end]) - len(lines[end].lstrip()) > indent:
                end += 1
        own_end = at + 1  # the entry's own lines, before any sub-item, which is judged on its own
        while own_end < end and not ENTRY.match(lines[own_end]):
            own_end += 1
        targets = [
            (path.parent / target.split("#")[0]).resolve()
            for line in lines[at:own_end]
            for target in LINK_TARGET.findall(line)
        ]
        if entry and any(target in removed or removed_folder(target, removed) for target in targets):
            at = end
        else:
            kept += lines[at:own_end]
            at = own_end
    path.write_text("".join(kept))


def drop_commands_running(path: Path, project_dir: Path, removed: set[Path]) -> None:
    """Drop the lines of a Python module's docstring that run a removed module (`python -m trainrig.slurm.sbatch`),
    with their continuation lines: a part's command goes with the part, without markers."""
    text = path.read_text()
    if "python -m" not in text:
        return
    body = ast.parse(text).body
    docstring = body[0] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else None
    if docstring is None or not isinstance(docstring.value.value, str):
        return
    kept, continued = [], False
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        runs = RUNS_MODULE.findall(line) if docstring.lineno <= number <= docstring.end_lineno else []
        dropped = continued or any(removed_module(module, project_dir, removed) for module in runs)
        continued = dropped and line.rstrip().endswith("\\")
        kept += [] if dropped else [line]
    path.write_text("".join(kept))


def removed_module(module: str, project_dir: Path, removed: set[Path]) -> bool:
    target = project_dir.resolve().joinpath(*module.split("."))
    return target in removed or target.with_suffix(".py") in removed or removed_folder(target, removed)


def removed_folder(target: Path, removed: set[Path]) -> bool:
    return any(folder in target.parents for folder in removed)


def name_main_example(path: Path, main_example: str) -> None:
    text = path.read_text()
    for pattern in MAIN_EXAMPLE_PATHS:
        text = text.replace(pattern.format("cnn"), pattern.format(main_example))
    path.write_text(text)


def tidy_python(project_dir: Path) -> None:
    """Drop the imports only removed parts used and the blank lines they leave, so the project's lint passes.

    Uses the ruff of the environment generating the project (the dev extra has it); without one, says so.
    """
    if importlib.util.find_spec("ruff") is None:
        print(
            "note: ruff is not installed here, so imports only the dropped parts used remain; in the project run "
            "`ruff check --fix . && ruff format .`",
            file=sys.stderr,
        )
        return
    for command in (["check", "--fix", "--select", "F401,I001"], ["format"]):
        subprocess.run([sys.executable, "-m", "ruff", *command, "--quiet", "."], cwd=project_dir, check=True)


def rewrite(path: Path, project_dir: Path, truth: dict[str, bool]) -> None:
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        return
    trimmed = keep_chosen_lines(text, path, truth, str(path.relative_to(project_dir)))
    if trimmed != text:
        path.write_text(trimmed)


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
