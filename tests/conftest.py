from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests import tiny_models

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

# A test run started in the background of a shell without job control (`nohup pytest &`, a CI script's
# `&`) inherits SIGINT ignored, and every process a test starts would inherit it too: Ctrl-C, which the
# interrupt and review tests send as a terminal does, would then reach nobody. A handler of our own is
# reset to the default in every process started from here, as in a run from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def _private_hash_memo(tmp_path_factory) -> None:
    """Tests remember file hashes in their own memo, not the user's ~/.cache."""
    import os

    os.environ["OFFLINE_EVAL_HASHES"] = str(tmp_path_factory.mktemp("memo") / "file-hashes.sqlite")


@pytest.fixture(scope="session")
def tiny_profile(tmp_path_factory) -> Path:
    """A manifest whose judge, HHEM verifier and embedder are tiny random models built here."""
    root = tmp_path_factory.mktemp("tiny-models")
    judge = tiny_models.build_judge(root / "judge")
    hhem = tiny_models.build_hhem(root / "hhem")
    embedder = tiny_models.build_embedder(root / "embedder")
    return tiny_models.write_manifest(root / "tiny.toml", judge, hhem, embedder)


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA
