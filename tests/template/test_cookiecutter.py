"""The repository as a cookiecutter: the template directory built at generation time, generated projects
keeping only what was chosen, their docs rendering whole, and template updates. The rules of templating/parts.py on
their own (markers, Markdown entries, test folders) are in tests/template/unit/test_parts.py.

`.ci/run` also installs two generated variants in fresh environments and runs their smoke tests (`.ci/run --smoke`),
then a new user's own task on the everything one (templating/new_user_check.py).
"""

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter

from templating.build import OLD_COOKIECUTTER_DIR_NAME, TEMPLATE_DIR_NAME, export, project_files
from templating.parts import CHOICES, PATHS, evaluate, matching
from tests.helpers.run_if import missing
from tests.helpers.runs import ROOT

# Words that would betray a part left half-removed, as regular expressions.
TRACES = {
    "cnn": ["cnn", "image_classifier", "resnet", "dogs"],
    "lstm": ["lstm", "pet_name", "pet name", "name_generator", "generated_names"],
    # The strategies and staged models come with the CNN too; Kubeflow's `mlPolicy` is no MLP.
    "mlp": ["mlp(?!olicy)", "fashion.mnist"],
    "dask": ["dask"],
    "wandb": ["wandb", "w&b", "weights & biases"],
    "kubernetes": ["kubernetes", "kubeflow", "pytorchjob", "trainjob", "run:ai", "runai", "docker"],
    "slurm": ["slurm", "sbatch", "srun"],
    # Generated projects name cookiecutter only to update from the template (.template/, the dev extra).
    "template": ["cookiecutter.json", "cookiecutter: ", "templating", "post_gen_project"],
}
NO_PARTS = {"dask": "no", "wandb": "no", "kubernetes": "no", "slurm": "no", "sweep": "no"}
VARIANTS = {
    "everything": {},
    "cnn_alone": {"lstm": "no", "mlp": "no", **NO_PARTS},
    "lstm_alone": {"cnn": "no", "mlp": "no", **NO_PARTS},
    "mlp_alone": {"cnn": "no", "lstm": "no", **NO_PARTS},
    "mlp_with_every_part": {"cnn": "no", "lstm": "no"},
    "cnn_and_lstm_with_dask": {"mlp": "no", "wandb": "no", "kubernetes": "no"},
    "no_example": {"cnn": "no", "lstm": "no", "mlp": "no", **NO_PARTS},
    "no_example_with_every_part": {"cnn": "no", "lstm": "no", "mlp": "no"},
}
# Checked whole in the default run; the rest with -m slow (CI budget: about 35 s each, the import of every module and
# the collection of every test), the narrower part of each choice.
IN_THE_DEFAULT_RUN = ("everything", "lstm_alone", "mlp_with_every_part", "no_example")
# Variants the committed template directories below refused: no example was an error then.
NEWER_THAN_COMMITTED_COPIES = ("no_example", "no_example_with_every_part")
# Every module of the project imports, and pytest collects every test: one interpreter for both, as each start
# imports torch and Lightning again.
IMPORT_EVERY_MODULE_AND_COLLECT = """
import importlib, pathlib, sys
import pytest
sys.path.insert(0, ".")
for path in sorted(pathlib.Path(".").rglob("*.py")):
    if path.parts[0] != "tests" and not path.parts[0].startswith("."):
        importlib.import_module(".".join(path.with_suffix("").parts).removesuffix(".__init__"))
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider"]))
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """The repository's files alone: cookiecutter copies the folder it is given, an in-tree .venv/ included."""
    return export(tmp_path_factory.mktemp("source"), ROOT)


@pytest.fixture(autouse=True)
def _cookiecutter_copies_in_pytest_tmp(tmp_path_factory, monkeypatch):
    """Cookiecutter leaves its temporary copy behind when a hook fails: keep those under pytest's tmp folders."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("cookiecutter_copies")))


def generate(source: Path, output_dir: Path, **answers: str) -> Path:
    return Path(cookiecutter(str(source), no_input=True, extra_context=answers, output_dir=str(output_dir)))


@pytest.fixture(scope="module")
def generated(source, tmp_path_factory):
    """One generation per variant, shared by the tests that only read the project."""
    projects = {}

    def project(variant: str) -> Path:
        if variant not in projects:
            answers = {"project_name": "Pet Vision", "author": "Ada Lovelace", **VARIANTS[variant]}
            with pytest.MonkeyPatch.context() as patch:  # an identity for its first commit, whatever the machine's
                for role in ("AUTHOR", "COMMITTER"):
                    patch.setenv(f"GIT_{role}_NAME", "Ada Lovelace")
                    patch.setenv(f"GIT_{role}_EMAIL", "ada@example.org")
                projects[variant] = generate(source, tmp_path_factory.mktemp(variant), **answers)
        return projects[variant]

    return project


def text_files(folder: Path):
    """Code, configs and docs: not the shipped data (its pet names include a Docker), Kubeflow's schemas as published
    (their prose is Kubeflow's), the record of the answers, nor git's files."""
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if (
            path.is_file()
            and "__pycache__" not in path.parts
            and relative.parts[0] not in ("data", ".git")
            and relative.parent != Path("tests/kubernetes/schemas")
            and path.name != "source.json"
        ):
            try:
                yield path, path.read_text()
            except UnicodeDecodeError:
                continue


@pytest.mark.parametrize(
    "variant",
    [name if name in IN_THE_DEFAULT_RUN else pytest.param(name, marks=pytest.mark.slow) for name in VARIANTS],
)
def test_generated_project_keeps_only_what_was_chosen(variant, generated):
    answers = VARIANTS[variant]
    project = generated(variant)
    assert project.name == "pet_vision"
    truth = {**{name: answers.get(name, "yes") == "yes" for name in CHOICES}, "template": False}

    entries = []
    for condition, paths in PATHS.items():
        for entry in paths:
            assert (found := matching(ROOT, entry)), f"PATHS names {entry}, which matches nothing"
            entries += [(condition, path.relative_to(ROOT)) for path in found]
    removed = [relative for condition, relative in entries if not evaluate(condition, truth, "PATHS")]
    for condition, relative in entries:  # kept unless it or a folder holding it (tests/dask of tests/dask/mlp) went
        gone = any(relative == dropped or dropped in relative.parents for dropped in removed)
        assert (project / relative).exists() != gone, f"{relative} (only with {condition})"
    assert not (project / "templating").exists() and not (project / "cookiecutter.json").exists()

    # A removed module by its dotted name (trainrig.dask.runs); one at the root by its file's (`sweep.py`, as the
    # word "sweep" is English).
    names = [
        ".".join(relative.with_suffix("").parts) if len(relative.parts) > 1 else relative.name
        for relative in removed
        if relative.suffix == ".py"
    ]
    names += [  # the modules of a removed folder of tests (tests.dask.runs)
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for relative in removed
        if relative.parts[0] == "tests"
        for path in (ROOT / relative).rglob("*.py")
    ]
    names += [relative.as_posix() for relative in removed if relative.suffix != ".py" and "." in relative.name]
    traces = [re.compile(word, re.IGNORECASE) for part, words in TRACES.items() if not truth[part] for word in words]
    names = [name.lower() for name in names]  # found as substrings: a regular expression each took seconds
    for path, text in text_files(project):
        found = [trace.pattern for trace in traces if trace.search(text)]
        lowered = text.lower()
        found += [name for name in names if name in lowered]
        assert not found, f"{path.relative_to(project)} still mentions {found}"

    pyproject = (project / "pyproject.toml").read_text()
    assert 'name = "pet_vision"' in pyproject and 'authors = [{name = "Ada Lovelace"}]' in pyproject
    assert (project / "README.md").read_text().startswith("# Pet Vision\n")
    assert (project / ".ci" / "run").stat().st_mode & 0o111, "the CI script stays executable"
    assert git("log", "--format=%s", cwd=project) == "Generated from the template\n", "one first commit"
    assert git("status", "--porcelain", cwd=project) == "", "the commit holds every file"

    command = [sys.executable, "-c", IMPORT_EVERY_MODULE_AND_COLLECT]
    result = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"project_name": "Pet Vision!"}, "project_slug 'pet_vision!' (from project_name 'Pet Vision!') is not valid"),
        ({"project_slug": "1st_project"}, "project_slug '1st_project'"),
        (
            {"project_name": 'The "Best" Project', "project_slug": "best"},
            "project_name 'The \"Best\" Project' contains a quote",
        ),
    ],
)
def test_bad_answers_stop_with_a_clear_error_and_leave_nothing_behind(answers, message, source, tmp_path, capfd):
    """One line on stderr, and the hook's exit status 2 for bad input (cookiecutter's own report goes to stdout)."""
    with pytest.raises(FailedHookException, match=r"exit status: 2\)"):
        generate(source, tmp_path, **answers)
    (line,) = capfd.readouterr().err.splitlines()
    assert line.startswith(f"error: {message}")
    assert list(tmp_path.iterdir()) == []


def test_a_project_with_no_example_runs_the_tests_for_every_example_on_the_builtin_task(generated):
    """Its machinery's tests still train: the built-in task of the tests stands in for the examples (the whole smoke
    set, about a minute, is in the slow test below and in `.ci/run`)."""
    project = generated("no_example")
    assert sorted(path.name for path in (project / "tests" / "builtin_task").iterdir()) == [
        "builtin_task.yaml",
        "example.py",
        "task.py",
        "test_builtin_task.py",
    ]
    # configs/ is committed, so that a clone has the folder the tests find the built-in task's config from.
    assert git("ls-files", "configs", cwd=project) == "configs/README.md\n"
    assert not list((project / "tests" / "examples").glob("*/example.py"))
    for name in ("lightning_modules", "datamodules", "models"):  # the shared code only: no example's
        assert {path.name for path in (project / name).glob("*.py")} <= {"__init__.py", "optimization.py", "splits.py"}
    result = smoke_tests(project, "tests/examples/test_fit.py")
    assert "test_fit_writes_checkpoints_and_namespaced_metrics[../tests/builtin_task/builtin_task.yaml] PASSED" in (
        result.stdout
    ), result.stdout[-3000:] + result.stderr[-3000:]


@pytest.mark.slow
def test_a_project_with_no_example_passes_its_smoke_tests(generated):
    result = smoke_tests(generated("no_example"))
    assert "../tests/builtin_task/builtin_task.yaml" in result.stdout, result.stdout[-3000:]


def smoke_tests(project: Path, *paths: str) -> subprocess.CompletedProcess:
    """The project's tests marked `smoke`, run with this environment, which has what a generated project installs."""
    command = [sys.executable, "-m", "pytest", "-m", "smoke", "-v", "-p", "no:cacheprovider", *paths]
    result = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


# Commits that held the template directory in git. Main's copy fell behind its root (the reason it
# is no longer committed): dcc0f6c is the last whose copy matched; 387ab9e, the last with a copy, is
# compared after its own documented refresh, `python -m templating.build`.
COMMITTED_COPIES = {"dcc0f6c": False, "387ab9e": True}
# What builds the template directory at generation time instead.
GENERATION_MACHINERY = [
    "hooks/pre_prompt.py",
    "hooks/pre_gen_project.py",
    "templating/build.py",
    OLD_COOKIECUTTER_DIR_NAME,
]


def tree(folder: Path) -> dict[str, tuple[bytes, bool]]:
    """Every file's content and executable bit, by path, but the record of the template version (new)."""
    return {
        path.relative_to(folder).as_posix(): (path.read_bytes(), bool(path.stat().st_mode & 0o111))
        for path in sorted(folder.rglob("*"))
        if path.is_file()
        and "__pycache__" not in path.parts
        and path.relative_to(folder).as_posix() != ".template/source.json"
    }


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=120).stdout


@pytest.mark.parametrize(("commit", "refresh"), COMMITTED_COPIES.items())
def test_generated_projects_equal_those_of_a_committed_template_directory(commit, refresh, tmp_path):
    """From the same files, a directory copy and a git URL generate what the committed copy generated."""
    try:
        archive = subprocess.run(
            ["git", "archive", commit], cwd=ROOT, capture_output=True, check=True, timeout=120
        ).stdout
    except subprocess.CalledProcessError:
        missing(f"needs the git history down to {commit} (CI checks out with fetch-depth: 0)")
    committed = tmp_path / "committed"
    committed.mkdir()
    subprocess.run(["tar", "-x", "-C", str(committed)], input=archive, check=True)
    assert (committed / TEMPLATE_DIR_NAME / "cli.py").is_file()
    if refresh:
        git("init", "-q", cwd=committed)
        git("add", "-A", cwd=committed)
        subprocess.run(
            [sys.executable, "-m", "templating.build"], cwd=committed, check=True, capture_output=True, timeout=120
        )
        shutil.rmtree(committed / ".git")

    # Same files, without the committed copy and with today's machinery: no .git, so no git listing either.
    built = tmp_path / "built"
    shutil.copytree(committed, built, ignore=shutil.ignore_patterns(TEMPLATE_DIR_NAME))
    for relative in GENERATION_MACHINERY:
        (shutil.copytree if (ROOT / relative).is_dir() else shutil.copy2)(ROOT / relative, built / relative)
    assert not (built / TEMPLATE_DIR_NAME).exists()
    # The same again as a git repository, generated from a git URL of a clone; untracked files there would not count.
    git("init", "-q", "-b", "main", cwd=built)
    git("add", "-A", cwd=built)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "built", cwd=built)
    git("clone", "-q", str(built), str(tmp_path / "clone"), cwd=tmp_path)
    shutil.rmtree(built / ".git")

    for variant, answers in VARIANTS.items():
        if variant in NEWER_THAN_COMMITTED_COPIES:
            continue
        expected = tree(
            Path(
                cookiecutter(
                    str(committed), no_input=True, extra_context=answers, output_dir=str(tmp_path / "old" / variant)
                )
            )
        )
        for source in (str(built), f"git+file://{tmp_path / 'clone'}"):
            output = tmp_path / "new" / variant / str(len(source))
            generated = tree(Path(cookiecutter(source, no_input=True, extra_context=answers, output_dir=str(output))))
            assert sorted(generated.keys() ^ expected.keys()) == [], f"{variant} from {source}"
            different = [path for path in expected if generated[path] != expected[path]]
            assert not different, f"{variant} from {source}: {different}"
        assert not (built / TEMPLATE_DIR_NAME).exists(), "the build happens in cookiecutter's temporary copy"


def test_an_old_cookiecutter_stops_with_one_clear_line(tmp_path):
    """Cookiecutter before 2.4 skips the pre_prompt hook, finds the stand-in directory and runs this check."""
    (tmp_path / "cookiecutter").mkdir()
    (tmp_path / "cookiecutter" / "__init__.py").write_text('__version__ = "2.3.1"\n')
    check = [sys.executable, "-B", str(ROOT / "hooks" / "pre_gen_project.py")]
    result = subprocess.run(
        check, cwd=tmp_path, capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(tmp_path)}
    )
    assert result.returncode == 1
    assert (
        result.stderr
        == "error: this template needs cookiecutter 2.4 or newer (found 2.3.1): pip install 'cookiecutter>=2.4'\n"
    )
    (tmp_path / "cookiecutter" / "__init__.py").write_text('__version__ = "2.4.0"\n')
    assert (
        subprocess.run(
            check, cwd=tmp_path, capture_output=True, timeout=60, env={"PYTHONPATH": str(tmp_path)}
        ).returncode
        == 0
    )


LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`]*`")
# A line that starts a sentence: a capitalised word, then a space (not "CyclicLR)" or "`cli.py`").
NEW_SENTENCE = re.compile(r"[A-Z][a-z]+ ")


def markdown_problems(path: Path, project: Path) -> list[str]:
    """Rendering faults: table rows with another cell count than their header, sentences cut off
    by a comma, leftover markers, links to missing files."""
    problems, table_cells, in_code = [], None, False
    lines = path.read_text().splitlines()
    where = path.relative_to(project)
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if "cookiecutter: only with" in line or "cookiecutter: end" in line:
            problems.append(f"{where}:{number}: leftover marker")
        if in_code:
            continue
        if line.startswith("|"):
            cells = CODE_SPAN.sub("", line).replace("\\|", "").count("|") - 1
            if table_cells is None:
                table_cells = cells
            elif cells != table_cells:
                problems.append(f"{where}:{number}: {cells} cells under a header of {table_cells}")
        else:
            table_cells = None
        following = lines[number] if number < len(lines) else ""
        if line.rstrip().endswith(",") and (
            not following.strip() or following.startswith("#") or NEW_SENTENCE.match(following)
        ):
            problems.append(f"{where}:{number}: the sentence breaks off after a comma")
        for target in LINK.findall(CODE_SPAN.sub("", line)):
            if "://" not in target and not target.startswith(("#", "mailto:")):
                if not (path.parent / target.split("#")[0]).exists():
                    problems.append(f"{where}:{number}: link to missing {target}")
    return problems


@pytest.mark.parametrize("variant", VARIANTS)
def test_generated_readme_and_docs_render_whole(variant, generated):
    project = generated(variant)
    pages = [project / "README.md", *sorted((project / "docs").rglob("*.md"))]
    assert project / "docs" / "index.md" in pages and (project / "docs" / "strategies.md").is_file()
    problems = [problem for page in pages for problem in markdown_problems(page, project)]
    assert not problems, "\n".join(problems)
    index = (project / "docs" / "index.md").read_text()
    unlinked = [
        page.name
        for page in pages[1:]
        if page.parent.name == "docs" and page.name != "index.md" and f"]({page.name})" not in index
    ]
    assert not unlinked, f"docs/index.md does not link {unlinked}"


def test_markdown_check_finds_the_faults_it_names(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "| a | b |\n|---|---|\n| 1 | 2 | 3 |\n\nUse `.[dask]` for the launcher,\n\n[x](missing.md)\n"
        "`.[dask]` for Dask,\nThe second command\n"
    )
    assert markdown_problems(page, tmp_path) == [
        "page.md:3: 3 cells under a header of 2",
        "page.md:5: the sentence breaks off after a comma",
        "page.md:7: link to missing missing.md",
        "page.md:8: the sentence breaks off after a comma",
    ]


def commit_all(repo: Path, message: str) -> str:
    git("add", "-A", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo).strip()


def test_template_updates_merge_into_a_project_and_report_conflicts(tmp_path, capfd):
    """Generate at commit A, edit the project, change the template (B), update: both edits stay; then a clash (C)."""
    template = tmp_path / "template"
    for relative in [
        *project_files(),
        "cookiecutter.json",
        "hooks/pre_prompt.py",
        "hooks/pre_gen_project.py",
        "hooks/post_gen_project.py",
        f"{OLD_COOKIECUTTER_DIR_NAME}/README.md",
    ]:
        (template / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, template / relative)
    git("init", "-q", "-b", "main", cwd=template)
    first = commit_all(template, "A")
    # Generated where git has no identity to commit with: a plain folder, and the update says how to make one.
    no_identity = tmp_path / "no-identity.gitconfig"
    no_identity.write_text("[user]\n\tuseConfigOnly = true\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GIT_CONFIG_GLOBAL", str(no_identity))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        for variable in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
            patch.delenv(variable, raising=False)
        project = Path(
            cookiecutter(
                f"git+file://{template}", no_input=True, extra_context=VARIANTS["lstm_alone"], output_dir=str(tmp_path)
            )
        )
    note = capfd.readouterr().out
    assert "note: the project is no git repository (" in note and "python .template/update.py` says how" in note
    assert not (project / ".git").exists()
    record = json.loads((project / ".template" / "source.json").read_text())
    assert record["commit"] == first and record["answers"]["dask"] is False
    update = [sys.executable, ".template/update.py"]
    result = subprocess.run(update, cwd=project, capture_output=True, text=True, timeout=300)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: {project} is no git repository with a commit, which the update merges into: run `git init && git add"
        ' -A && git commit -m "Generated from the template"` there, then this again\n'
    )
    git("init", "-q", "-b", "main", cwd=project)  # as the line says
    commit_all(project, "Generated from the template")

    config = project / "configs" / "lstm.yaml"
    config.write_text(config.read_text() + "# my own setting\n")
    commit_all(project, "my edit")
    readme = template / "README.md"
    readme.write_text(readme.read_text() + "\nA later template improvement.\n")
    second = commit_all(template, "B")
    result = subprocess.run(update, cwd=project, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "merged template changes" in result.stdout
    assert config.read_text().endswith("# my own setting\n")
    assert (project / "README.md").read_text().endswith("A later template improvement.\n")
    assert json.loads((project / ".template" / "source.json").read_text())["commit"] == second
    commit_all(project, "template update")
    assert (
        "already at template commit"
        in subprocess.run(update, cwd=project, capture_output=True, text=True, timeout=300).stdout
    )

    # The template and the project change the same line.
    (template / "configs" / "lstm.yaml").write_text(
        config.read_text().replace("# my own setting\n", "") + "# the template's setting\n"
    )
    commit_all(template, "C")
    config.write_text(config.read_text().replace("# my own setting", "# my changed setting"))
    commit_all(project, "my second edit")
    result = subprocess.run(update, cwd=project, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert "conflict with this project's edits in configs/lstm.yaml" in result.stderr
    merged = config.read_text()
    assert "<<<<<<<" in merged and "# my changed setting" in merged and "# the template's setting" in merged


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_bytes()) <= 10_000, "move detail to a docs/ page"
