from __future__ import annotations

from pathlib import Path

import pytest

from tests import tiny_models

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


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
