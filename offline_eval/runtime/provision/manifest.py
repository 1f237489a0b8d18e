"""Writing a manifest: a profile as manifest data, and nested data as TOML (the standard library reads
TOML but does not write it)."""

from __future__ import annotations

import json
import re
from typing import Any

from offline_eval.runtime.profiles import Folder, Profile

__all__ = ["dump_toml", "profile_to_dict"]


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def dump_toml(data: dict[str, Any], header: str = "") -> str:
    """Write nested dicts of str/int/float/bool/lists as TOML (tables after scalars, depth first)."""
    lines: list[str] = [f"# {line}" if line else "#" for line in header.splitlines()]

    def table(prefix: list[str], body: dict[str, Any]) -> None:
        scalars = {k: v for k, v in body.items() if not isinstance(v, dict) and v is not None}
        tables = {k: v for k, v in body.items() if isinstance(v, dict)}
        if prefix and (scalars or not tables):
            if lines:
                lines.append("")
            lines.append("[" + ".".join(_toml_key(p) for p in prefix) + "]")
        for key, value in scalars.items():
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
        for key, value in tables.items():
            table([*prefix, key], value)

    table([], data)
    return "\n".join(lines) + "\n"


def _folder_dict(folder: Folder, path_text: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"path": path_text}
    for key in ("name", "repo", "revision", "allow_patterns", "ignore_patterns", "provision"):
        value = getattr(folder, key)
        if value is not None:
            out[key] = value
    return out


def profile_to_dict(profile: Profile, paths: dict[tuple[str, str], str] | None = None) -> dict[str, Any]:
    """A profile as manifest data. ``paths`` maps (role, folder key) to the path text to write
    (default: the manifest's own text, else the resolved absolute path)."""
    paths = paths or {}
    data: dict[str, Any] = {
        "profile": {"name": profile.name, "starter": profile.starter, "description": profile.description}
    }
    for spec in profile.roles():
        role: dict[str, Any] = {"backend": spec.backend}
        folders = spec.folders()
        main = folders.pop("main", None)
        if main is not None:
            role.update(_folder_dict(main, paths.get((spec.role, "main"), main.source or str(main.path))))
        if spec.options:
            role["options"] = dict(spec.options)
        if main is not None and main.files:
            role["files"] = dict(sorted(main.files.items()))
        if folders:
            role["extra"] = {}
            for key, folder in folders.items():
                sub = _folder_dict(folder, paths.get((spec.role, key), folder.source or str(folder.path)))
                if folder.files:
                    sub["files"] = dict(sorted(folder.files.items()))
                role["extra"][key] = sub
        data[spec.role] = role
    return data
