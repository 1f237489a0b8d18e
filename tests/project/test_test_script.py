"""scripts/test.sh, the README's test command, says what each set-up step installs, how large it is and
how long it takes before it starts, and keeps pip's and apt's output in a log (issue #55: it worked for
minutes showing nothing but setuptools' deprecation notices). Read statically: running it installs
gigabytes."""

from __future__ import annotations

import re
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "test.sh"
# what installs or builds something; `vllm_venv.sh --path` only names the venv
INSTALL = re.compile(r"pip install|apt-get (?:update|install)|-m venv "
                     r"|scripts/(?:vllm|flagembedding)_venv\.sh(?! --path)")
STEP = re.compile(r'say "step (\d+) of \$steps: (.*)')
SIZE = re.compile(r"~\d+(?:\.\d+)? [MG]B\b")
DURATION = re.compile(r"~[\d.-]+ min|under a minute")


def _commands() -> list[str]:
    """The script's lines with continuation lines joined, comments left out."""
    text = re.sub(r"\\\n\s*", " ", SCRIPT.read_text(encoding="utf-8"))
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_each_install_step_is_announced_with_its_size_before_it_runs():
    announced = None  # the announcement of the step under way; a "skipped" line ends it
    installs = []
    for line in _commands():
        step = STEP.search(line)
        if step:
            announced = step.group(2) if step.group(2).endswith('..."') else None
        elif INSTALL.search(line):
            installs.append(line)
            assert announced is not None, f"installs with no announcement before it: {line.strip()}"
            assert SIZE.search(announced) and DURATION.search(announced), announced
            assert re.match(r'\s*(?:.*\|\| )?(?:logged "\$log"|optional \w+) ', line), \
                f"its output is not kept in the step's log: {line}"
    assert len(installs) >= 6  # venv, pip twice, FlagEmbedding, vLLM, apt-get


def test_the_steps_are_numbered_and_each_install_step_says_when_it_is_skipped():
    text = "\n".join(_commands())
    total = int(re.search(r"^steps=(\d+)$", text, re.M).group(1))
    steps = [(int(m.group(1)), m.group(2)) for m in STEP.finditer(text)]
    assert sorted({n for n, _ in steps}) == list(range(1, total + 1))
    for n in range(1, total):  # the last step runs the tests
        assert any(number == n and "skipped" in said for number, said in steps), n
    # a failed step says where its output is
    assert re.search(r'say "failed: \$\*; its output: \$log"', text)
