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

Then the cheap commands are really run, in process, each in a fresh scratch folder (where ``examples/``
and ``../shared`` lead where they do from the repository root) with a private answer cache, and must
exit 0:

- ``--help``, ``--version`` and ``offline-eval metrics``: they need no model and no data;
- ``offline-eval run`` on data that is there (the repository's ``examples/``, or ``../shared/data`` when
  present) with no GPU, no Ray, no model folder and no network: with model-free metrics as written, and
  otherwise with the starter profile (or no profile) standing in for the tests' tiny random models
  (``tiny_profile`` in conftest.py), since the starter models are set up from PyPI.

Parsed only: commands that need a GPU (``--device cuda*``, ``--engine ray``, the ``gpu`` and ``cpu``
profiles), the network (``models pull``, ``models setup-starter``, ``pip``), real model folders
(``--judge``, ``--hhem``, ``--embedder``, ``--m3``, ``--rerank``, ``models import-gguf``), data that is
not in the repository (``data.jsonl``, ``labelled.jsonl``), a run folder made by an earlier command
(``report``, ``compare``, ``review``, ``estimate``, ``cache``), a server (``review``), and the
benchmark and test scripts (minutes to hours).

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
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from offline_eval.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console"}
CHAIN = {"&&", "||", ";", "|"}
# What a command needs that a test machine lacks, by flag: a command with any of these is parsed only.
NEEDS_MORE = {"--judge", "--judge-backend", "--judge-model", "--hhem", "--hhem-tokenizer", "--embedder",
              "--models-dir", "--engine", "--ray-address", "--replicas", "--gpus-per-replica", "--plugin",
              "--config", "--calibration", "--m3", "--rerank"}
REPO_PATH = re.compile(r"^(?:offline_eval|tests|benchmarks|scripts|models|examples|docs)/[\w./{},-]*$")


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    words: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {shlex.join(self.words)}"


def _fenced_blocks(text: str) -> list[tuple[str, str, int]]:
    """(language, body, line of the body's first line) of every ``` block."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        opening = re.match(r"^\s*```(\w*)\s*$", lines[i])
        if not opening:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        blocks.append((opening.group(1), "\n".join(lines[i + 1:end]), i + 2))
        i = end + 1
    return blocks


def _split_words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def _commands_of(page: Path) -> list[Command]:
    found = []
    for language, body, first in _fenced_blocks(page.read_text(encoding="utf-8")):
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
                        found.append(Command(page.relative_to(REPO).as_posix(), start, tuple(command)))
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


def _runnable(command: Command) -> tuple[bool, bool]:
    """(run it?, with the tiny models standing in for the starter profile?)."""
    words = list(command.words[1:])
    if _program(command) != "offline-eval":
        return False, False
    if any(w in ("--help", "-h", "--version") for w in words) or words[:1] == ["metrics"]:
        return True, False
    if words[:1] != ["run"]:
        return False, False
    args, complaint = _parse(words)
    flags = {w.split("=", 1)[0] for w in words if w.startswith("--")}
    if complaint or flags & NEEDS_MORE or not getattr(args, "dataset", None) \
            or str(getattr(args, "device", None) or "cpu").startswith("cuda"):
        return False, False
    from offline_eval.metrics import metric_classes

    classes = metric_classes()
    model_free = args.metrics is not None and all(m in classes and not classes[m].roles for m in args.metrics)
    if not model_free and args.profile not in (None, "starter"):
        return False, False
    dataset = Path(args.dataset)
    return ((REPO / dataset).exists() if not dataset.is_absolute() else False), not model_free


RUNNABLE = [c for c in COMMANDS if _runnable(c)[0]]


@pytest.mark.parametrize("command", RUNNABLE, ids=str)
def test_the_cheap_commands_run(command, tiny_profile, tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(REPO / "examples")
    if (REPO.parent / "shared").exists():
        (tmp_path / "shared").symlink_to(REPO.parent / "shared")
    monkeypatch.chdir(work)
    monkeypatch.setenv("OFFLINE_EVAL_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("OFFLINE_EVAL_PROFILE", str(tiny_profile))
    argv = list(command.words[1:])
    if _runnable(command)[1] and "--profile" in argv:  # the starter profile: the tiny models stand in
        argv[argv.index("--profile") + 1] = str(tiny_profile)
    try:
        code = main(argv)
    except SystemExit as stop:  # --help and --version print and exit
        code = stop.code
    assert code == 0, f"{command}: exit {code}\n{capsys.readouterr().err[-2000:]}"


def test_the_cheap_commands_include_the_main_job_and_the_listings():
    shown = [shlex.join(c.words[1:]) for c in RUNNABLE]
    assert "run --dataset examples/sample.jsonl --profile starter" in shown  # the README's main job
    assert "metrics" in shown and any(s.endswith("--help") for s in shown)


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
