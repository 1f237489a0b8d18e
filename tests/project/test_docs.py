"""The documentation runs as written: README.md and every page of docs/.

Every shell command in a fenced code block (```bash, ```sh, ```shell, ```console or a block without a
language; ```text, ```python, ```toml blocks are not shell) is read with shell quoting, continuation lines
joined and ``&&`` / ``;`` / ``|`` chains split, and checked by what it runs:

- ``offline-eval ...`` (or ``.venv/bin/offline-eval ...``): parsed by the real command-line parser
  (:func:`offline_eval.cli.build_parser`), so a flag that does not exist, a choice that is not one, a
  value of the wrong type or a missing required argument fails. Files the command names may be absent.
- ``python SCRIPT`` / ``bash SCRIPT``: the script is in the repository and names every flag given.
- ``pip install``: every extra it names (``'offline-eval[ray]'``) is declared in pyproject.toml.
- Any other program: a failure, so that a block mixing commands with their output is marked ```text.

Then every command is run as written, page by page in the order of the page, as a reader would type
them: in a copy of a fresh clone (the tracked files only, no ``../shared`` beside it) with an empty home,
where the README's main job has run (the README's own commands: in a clone where nothing has), and each
must exit 0. ``offline-eval`` runs in process, the tests' tiny random models (``tiny_profile`` in
conftest.py) standing in for the starter profile, whose models come from PyPI.

Checked only, not run: the set-up commands that need PyPI (``python3 -m venv``, ``pip install``,
``models setup-starter``; the test runs in the environment they make), the test suite itself
(``scripts/test.sh``), and every block the page marks on the line before it with
``<!-- needs: WHAT -->``: what the tests cannot have (a GPU, the real models, the reader's own data or
labelled sets, a server, hours), which the page then says in words, with where to get it.

Besides commands: every relative link leads to a file and every ``#heading`` it names is on that page,
and every repository path written in code (``benchmarks/results/engine_scale.md``) exists. The README stays
a front page: under 150 lines, starting with the two set-up commands.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from offline_eval.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console"}
CHAIN = {"&&", "||", ";", "|"}
# The line before a block whose commands need what the tests cannot have: they are checked, not run.
NEEDS = re.compile(r"^<!--\s*needs:\s*(\S.*?)\s*-->$")
REPO_PATH = re.compile(r"^(?:offline_eval|tests|benchmarks|scripts|models|examples|docs)/[\w./{},-]*$")


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    words: tuple[str, ...]
    needs: str = ""  # what the page's <!-- needs: ... --> marker says the command needs: not run

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {shlex.join(self.words)}"


def _fenced_blocks(text: str) -> list[tuple[str, str, int, str]]:
    """(language, body, line of the body's first line, its marker's needs) of every ``` block."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        opening = re.match(r"^\s*```(\w*)\s*$", lines[i])
        if not opening:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        before = next((line.strip() for line in reversed(lines[:i]) if line.strip()), "")
        needs = NEEDS.match(before)
        blocks.append((opening.group(1), "\n".join(lines[i + 1:end]), i + 2, needs.group(1) if needs else ""))
        i = end + 1
    return blocks


def _name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def _split_words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def _commands_of(page: Path) -> list[Command]:
    found = []
    for language, body, first, needs in _fenced_blocks(page.read_text(encoding="utf-8")):
        if language not in SHELL_LANGUAGES:
            continue
        logical, start = "", first
        for number, line in enumerate(body.splitlines(), first):
            if not logical:
                start = number
            if line.rstrip().endswith("\\"):
                logical += line.rstrip()[:-1] + " "
                continue
            words, logical = _split_words(logical + line), ""
            command: list[str] = []
            for word in [*words, ";"]:
                if word in CHAIN:
                    if command:
                        found.append(Command(_name(page), start, tuple(command), needs))
                    command = []
                else:
                    command.append(word)
    return found


COMMANDS = [command for page in PAGES for command in _commands_of(page)]


def _program(command: Command) -> str:
    return Path(command.words[0]).name


def _parse(argv: list[str]) -> tuple[argparse.Namespace | None, str]:
    """The real parser's reading of ``argv`` and its complaint ("" when none); no namespace for --help
    and --version, which print and exit 0."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return build_parser().parse_args(argv), ""
    except SystemExit as stop:
        return None, "" if stop.code == 0 else err.getvalue().strip().splitlines()[-1]
    except FileNotFoundError:  # a flag whose type reads its file (--rubrics): files may be absent here
        return argparse.Namespace(), ""


def _option_strings(parser: argparse.ArgumentParser, words: list[str]) -> set[str]:
    """The flags of the (sub)command that ``words`` name, e.g. ``["models", "check"]``."""
    for word in words:
        subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subcommands or word not in subcommands[0].choices:
            break
        parser = subcommands[0].choices[word]
    return {flag for action in parser._actions for flag in action.option_strings}


@pytest.mark.parametrize("command", [c for c in COMMANDS if _program(c) == "offline-eval"], ids=str)
def test_every_offline_eval_command_parses(command):
    words = list(command.words[1:])
    _, complaint = _parse(words)
    assert not complaint, f"{command}: {complaint}"
    known = _option_strings(build_parser(), [w for w in words if not w.startswith("-")])
    for word in words:  # whole flags: argparse would also take an abbreviation (--fail-on)
        if word.startswith("--") and word not in ("--help", "--version"):
            assert word.split("=", 1)[0] in known, f"{command}: {word} is not the whole name of a flag"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_flag_named_in_the_prose_exists(page):
    """``offline-eval SUBCOMMAND --flag`` in running text (not a whole command line: it may leave out
    required arguments) names flags of that subcommand."""
    parser = build_parser()
    prose = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for code in re.findall(r"`(offline-eval [^`]+)`", prose.replace("\n", " ")):
        words = _split_words(code)[1:]
        known = _option_strings(parser, [w for w in words if not w.startswith("-")])
        for word in words:
            if word.startswith("--"):
                assert word.split("=", 1)[0] in known, f"{page.name}: `{code}`: no flag {word}"


def _script_of(command: Command) -> Path | None:
    args = [w for w in command.words[1:] if not w.startswith("-")]
    if _program(command).startswith("python") and command.words[1] in ("-m", "-c"):
        return None
    return REPO / args[0] if args else None


@pytest.mark.parametrize("command", [c for c in COMMANDS if _program(c) != "offline-eval"], ids=str)
def test_every_other_command_names_what_exists(command):
    program = _program(command)
    assert program in {"python", "python3", "bash", "pip"}, \
        f"{command}: not a command the docs test knows; mark a block of output as ```text"
    if program == "pip":
        declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        for word in command.words[2:]:
            for extras in re.findall(r"\[([\w,-]+)\]", word):
                assert set(extras.split(",")) <= set(declared), f"{command}: unknown extra {extras}"
        return
    script = _script_of(command)
    if script is None:
        return
    assert script.is_file(), f"{command}: {script.relative_to(REPO)} is not in the repository"
    sources = script.read_text(encoding="utf-8") + (
        script.with_suffix(".py").read_text(encoding="utf-8") if script.suffix == ".sh"
        and script.with_suffix(".py").is_file() else "")
    for word in command.words[2:]:
        flag = word.split("=", 1)[0]
        if flag.startswith("--"):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", sources), \
                f"{command}: {script.relative_to(REPO)} takes no {flag}"


def _not_run(command: Command) -> str:
    """Why the test only checks ``command`` ("" when it runs it): the page's ``<!-- needs: ... -->``
    marker, or one of the set-up commands the test's own environment stands for."""
    words, program = command.words, _program(command)
    if command.needs:
        return command.needs
    if program == "pip" or words[1:3] in (("-m", "venv"), ("-m", "pip")):
        return "PyPI: the test runs in the environment it installs"
    if program == "offline-eval" and words[1:3] == ("models", "setup-starter"):
        return "PyPI: the tests' tiny models stand in for the starter models it sets up"
    if program == "bash" and words[1:2] == ("scripts/test.sh",):
        return "the test suite itself"
    return ""


def _fresh_clone(into: Path) -> Path:
    """The repository's tracked files in ``into``/repo, as a clone gives them: nothing untracked and no
    ``../shared`` beside it."""
    git = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True)
    if git.returncode != 0:
        pytest.skip("not a git checkout: which files a clone holds is unknown")
    for name in filter(None, git.stdout.decode().split("\0")):
        source, target = REPO / name, into / "repo" / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    (into / "home").mkdir()
    return into


def _execute(command: Command, work: Path, tiny_profile: Path) -> tuple[int, str]:
    """Runs ``command`` in ``work`` as a shell would (``~/`` expanded); ``offline-eval`` in process,
    the starter profile played by the tiny models."""
    words = [os.path.expanduser(w) if w.startswith("~/") else w for w in command.words]
    if _program(command) != "offline-eval":
        program = sys.executable if _program(command).startswith("python") else words[0]
        done = subprocess.run([program, *words[1:]], cwd=work, capture_output=True, text=True, timeout=300)
        return done.returncode, done.stderr
    argv = words[1:]
    if "--profile" in argv and argv[argv.index("--profile") + 1] == "starter":
        argv[argv.index("--profile") + 1] = str(tiny_profile)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as stop:  # --help and --version print and exit
            code = stop.code
    return code, err.getvalue()


@contextlib.contextmanager
def _first_hour(folder: Path, tiny_profile: Path):
    """``folder``'s repo/ as the working folder and its home/ as an empty home: no answer cache, models
    folder or profile but what the commands make, the tiny models standing in for the starter profile."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder / "repo")
        patch.setenv("HOME", str(folder / "home"))
        for name in ("OFFLINE_EVAL_CACHE", "OFFLINE_EVAL_MODELS", "XDG_CACHE_HOME"):
            patch.delenv(name, raising=False)
        patch.setenv("OFFLINE_EVAL_PROFILE", str(tiny_profile))  # what `models setup-starter` provides
        yield folder / "repo"


MAIN_JOB = next(c for c in COMMANDS if c.page == "README.md" and c.words[1:2] == ("run",))
RUN_PAGES = [p for p in PAGES if any(not _not_run(c) for c in COMMANDS if c.page == _name(p))]


def _follow(page: Path, folder: Path, tiny_profile: Path) -> list[str]:
    """Runs the commands of ``page`` that are not marked, in order, in ``folder``; the failures."""
    failures = []
    with _first_hour(folder, tiny_profile) as work:
        for command in (c for c in COMMANDS if c.page == _name(page) and not _not_run(c)):
            code, err = _execute(command, work, tiny_profile)
            if code != 0:
                failures.append(f"{command}: exit {code}\n{err[-2000:]}")
    return failures


@pytest.fixture(scope="module")
def the_readme_followed(tmp_path_factory, tiny_profile) -> tuple[Path, list[str]]:
    """A fresh clone where the README's commands have run, its main job among them: where a reader of
    any other page starts; and the README's failures."""
    folder = _fresh_clone(tmp_path_factory.mktemp("first-hour"))
    return folder, _follow(REPO / "README.md", folder, tiny_profile)


@pytest.mark.parametrize("page", RUN_PAGES, ids=_name)
def test_every_command_runs_as_written(page, the_readme_followed, tiny_profile, tmp_path):
    """Each page's commands in order, as a reader types them, in a clean copy of a fresh clone (with an
    empty home, no ``../shared``) where the README's have run; each exits 0 unless the page marks it
    ``<!-- needs: ... -->`` (then its flags are checked above)."""
    readme, failures = the_readme_followed
    if page.name != "README.md":
        assert not [f for f in failures if f.startswith(str(MAIN_JOB))], "the README's main job failed"
        shutil.copytree(readme, tmp_path / "clone", symlinks=True)
        failures = _follow(page, tmp_path / "clone", tiny_profile)
    assert not failures, "\n".join(failures)


def test_the_main_job_and_the_listings_run():
    ran = [shlex.join(c.words[1:]) for c in COMMANDS if not _not_run(c) and _program(c) == "offline-eval"]
    assert "run --dataset examples/sample.jsonl --profile starter" in ran  # the README's main job
    assert "metrics" in ran and any(s.endswith("--help") for s in ran)
    assert any(s.startswith("retrieval --corpus examples/") for s in ran)


@pytest.mark.parametrize("page", [p for p in PAGES if p.name != "measurements.md"], ids=_name)
def test_no_page_sends_a_reader_to_the_development_tree(page):
    """``../shared`` is beside this repository's development checkout only; docs/measurements.md names
    it for the benchmarks that read it."""
    assert "../shared" not in page.read_text(encoding="utf-8"), f"{_name(page)} names ../shared"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_link_and_path_leads_somewhere(page):
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: link to {target}: no such file"
        if anchor:
            assert anchor in _anchors(linked), f"{page.name}: link to {target}: no such heading"
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for code in re.findall(r"`([^`\n]+)`", prose):
        if not REPO_PATH.match(code):
            continue
        stem = re.match(r"^(.*?)\{([^}]*)\}(.*)$", code)
        for variant in [stem.group(1) + part + stem.group(3) for part in stem.group(2).split(",")] \
                if stem else [code]:
            assert (REPO / variant).exists(), f"{page.name}: `{code}`: {variant} is not in the repository"


def test_a_contents_list_names_every_section():
    """A page that opens with a list of its sections (docs/measurements.md) lists each one, in order."""
    pages = 0
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        listed = re.findall(r"^- \[[^\]]+\]\(#([^)]+)\)$", text, re.M)
        if listed:
            pages += 1
            sections = [_slug(m.group(1)) for m in re.finditer(r"^##\s+(.*)$", text, re.M)]
            assert listed == sections, f"{page.name}: the contents list and the sections differ"
    assert pages, "no page has a contents list"


def test_the_readme_is_a_front_page():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 150
    commands = [c for c in COMMANDS if c.page == "README.md"]
    assert "models setup-starter" in shlex.join(commands[2].words) and commands[3].words[1] == "run"
    assert commands[4].words == ("bash", "scripts/test.sh")  # CI runs exactly this (.ci/run)
    assert "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()
    assert all(os.path.exists(REPO / "docs" / link) for link in re.findall(r"\(docs/([\w.-]+\.md)\)", text))
