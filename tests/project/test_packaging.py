"""What pyproject.toml packages exists (issue #33: it listed prompt TOML and report asset files the package
does not have, so a reader could not tell what a wheel carries)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_package_data_pattern_matches_a_file():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    data = project["tool"]["setuptools"]["package-data"]
    assert data, "no package data declared"
    for package, patterns in data.items():
        root = REPO / package.replace(".", "/")
        for pattern in patterns:
            assert list(root.glob(pattern)), f"{package}: {pattern} matches no file"
    assert {p.name for p in (REPO / "offline_eval" / "models").glob("*.toml")} >= {"starter.toml", "cpu.toml", "gpu.toml"}
