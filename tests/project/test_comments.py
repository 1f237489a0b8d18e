"""Words that age well: no docstring or comment in offline_eval/ points to an issue or a SPEC section,
and no line of it names the machine a figure was measured on.

Neither the issue tracker nor the SPEC travels with the code, so "(issue #20)" or "SPEC §2" tells a
reader of the package nothing; the reasoning they stood for is written out where it is used, and
measured figures live in docs/ and benchmarks/results/, which the comments name instead. A CPU or GPU
model in the package ("on an AVX2 EPYC, ...") is the sign of such a figure: the code runs on any machine.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "offline_eval"

# "issue #20", "issues #16, #33", "issue 27", "(#20)", "PR #5"; not "issue identical requests" or a
# colour ("#c62828", "fill='#222'").
ISSUE = re.compile(r"\b(?:issues?|PR|pull request)\s*#?\d+\b|(?:^|(?<=[\s(,;]))#\d+(?![\w-])", re.IGNORECASE)
# "SPEC §2", "SPEC section 6", "spec §1.2"; a paper's section ("the M3 paper, §3.2") is a public source.
SPEC = re.compile(r"(?-i:\bSPEC\b)|\bspec(?:ification)?\s*(?:§|section\s*\d)", re.IGNORECASE)
# CPU and GPU models a benchmark names its machine by; instruction sets (AVX-512, AMX) are not machines.
MACHINE = re.compile(r"\b(?:EPYC|Xeon|Ryzen|Threadripper|Graviton|Neoverse|Core i[3579]|Apple M\d"
                     r"|[AHV]100|A10G?|H200|B200|L4|L40S?|T4|RTX\s?\d{4}|GTX\s?\d{3,4})\b")


def _comments_and_docstrings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every module, class and function docstring of ``source``."""
    found = [(token.start[0], token.string) for token in tokenize.generate_tokens(io.StringIO(source).readline)
             if token.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                found.append((node.body[0].lineno, docstring))
    return found


def _pointers(text: str) -> list[str]:
    return [m.group(0) for pattern in (ISSUE, SPEC) for m in pattern.finditer(text)]


def test_no_comment_or_docstring_points_to_an_issue_or_the_spec():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, text in _comments_and_docstrings(path.read_text(encoding="utf-8")):
            for i, text_line in enumerate(text.splitlines()):
                offenders += [f"{path.relative_to(PACKAGE.parent)}:{line + i}: {hit!r} in {text_line.strip()!r}"
                              for hit in _pointers(text_line)]
    assert not offenders, "write out the reasoning instead of pointing to it:\n" + "\n".join(offenders)


@pytest.mark.parametrize("text", ["(issue #20)", "issues #16, #33", "see issue 27", "(#33)", "PR #5",
                                  "SPEC §2", "(SPEC §1)", "spec section 6"])
def test_the_check_finds_a_pointer(text):
    assert _pointers(text)


@pytest.mark.parametrize("text", ["The three metrics issue identical requests", "the M3 paper, §3.2",
                                  "colour #c62828", "fill='#222'", "a specimen", "the spec of role ``name``",
                                  "docs/measurements.md, \"A run beside busy loops\""])
def test_the_check_leaves_ordinary_words(text):
    assert not _pointers(text)


def test_no_line_of_the_package_names_a_machine():
    offenders = [f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()!r}"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                 if MACHINE.search(line)]
    assert not offenders, "a measured figure belongs in docs/measurements.md, named by its section:\n" + "\n".join(
        offenders)


@pytest.mark.parametrize("text", ["on an AVX2 EPYC, 16 rows", "Intel Xeon", "an NVIDIA H100", "an RTX 4090",
                                  "a T4", "an A100 80GB"])
def test_the_machine_check_finds_a_machine(text):
    assert MACHINE.search(text)


@pytest.mark.parametrize("text", ["AVX-512 and later", "AVX2 without AVX-512", "AMX", "a 95% interval",
                                  "x100", "B1234", "top_p", "H1"])
def test_the_machine_check_leaves_ordinary_words(text):
    assert not MACHINE.search(text)
