"""What run.json, summary.json and the report say of each model besides its identity: a name a person
knows it by, its folder, the dtype it runs in and the limits it runs with (the profile's, or the
model's own from its config), read from the folder's files without loading the model.

The name is the manifest's ``name``, else its ``repo``, else the ``_name_or_path`` the folder's
config.json was saved from (when that is a Hub id, not a local path), else the folder's name; the
architecture (config.json's ``model_type`` and ``architectures``) is recorded beside it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from offline_eval.runtime.base import Backend
from offline_eval.runtime.profiles import RoleSpec

# safetensors' names of the floating-point dtypes (its header is JSON: name -> {"dtype", ...})
SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "BF16": "bfloat16", "F16": "float16"}
_HEADER_LIMIT = 1 << 26  # a header larger than this is no safetensors header


def model_details(spec: RoleSpec, identity: str, *, device: str | None, profile: str) -> dict[str, Any]:
    """The record of one role's model: identity, name, architecture, folder (or server), dtype, limits,
    and the profile's options it does not run with (its folder or backend replaced on the command line)."""
    config = read_config(spec.path)
    details: dict[str, Any] = {"identity": identity, "name": model_name(spec, config)}
    architecture = architecture_of(config)
    if architecture:
        details["architecture"] = architecture
    url_option = spec.declaration.url_option
    if url_option and url_option in spec.options:
        details["server"] = spec.options[url_option]
    else:
        details["folder"] = None if spec.path is None else str(spec.path)
    dtype = run_dtype(spec, config, device)
    if dtype:
        details["dtype"] = dtype
    limits = model_limits(spec, config, profile)
    if limits:
        details["limits"] = limits
    if spec.not_carried:
        details["not_carried"] = {"options": dict(spec.not_carried), "set_for": spec.replaced}
    if spec.not_taken:
        details["not_taken"] = dict(spec.not_taken)  # options of the profile's backend this one lacks
    return details


def read_config(path: Path | None) -> dict[str, Any]:
    """A model folder's config.json (its text model's, for a multimodal config); {} when there is none."""
    if path is None or not path.is_dir() or not (path / "config.json").is_file():
        return {}
    try:
        data = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    text = data.get("text_config")
    return {**data, **text} if isinstance(text, dict) else data


def model_name(spec: RoleSpec, config: dict[str, Any]) -> str:
    """What a person calls the model (see the module docstring)."""
    if spec.name:
        return spec.name
    if spec.repo:
        return spec.repo
    origin = config.get("_name_or_path")
    if isinstance(origin, str) and _is_hub_id(origin):
        return origin
    if spec.path is not None:
        return spec.path.stem if spec.path.is_file() else spec.path.name
    return str(spec.options.get("model") or spec.backend)


def _is_hub_id(text: str) -> bool:
    """``org/name`` or ``name``, not a folder the config was saved from."""
    return bool(text) and text.count("/") <= 1 and not text.startswith((".", "/", "~")) and "\\" not in text \
        and ":" not in text


def architecture_of(config: dict[str, Any]) -> str | None:
    """``model_type (Architecture)`` from a config, or None."""
    kind = config.get("model_type")
    names = config.get("architectures")
    first = names[0] if isinstance(names, list) and names and isinstance(names[0], str) else None
    if kind and first:
        return f"{kind} ({first})"
    return str(kind or first) if kind or first else None


def run_dtype(spec: RoleSpec, config: dict[str, Any], device: str | None) -> str | None:
    """The dtype the backend computes in: the profile's, else what its "auto" makes of the checkpoint's
    dtype on this device ("auto" when the checkpoint's is unknown); None for a backend without one."""
    rule = spec.declaration.auto_dtype
    if rule is None:
        return None
    wanted = spec.options.get("dtype")
    if wanted is not None:
        try:
            name = Backend.dtype_name(wanted)
        except ValueError:  # the backend says so when it loads
            return str(wanted)
        if name != "auto":
            return name
    kind = (device or "cpu").partition(":")[0]
    return rule(checkpoint_dtype(spec.path, config), kind) or "auto"


def checkpoint_dtype(path: Path | None, config: dict[str, Any]) -> str | None:
    """The dtype the weights are stored in: config.json's ``dtype``/``torch_dtype``, else the first
    floating-point tensor of the folder's first safetensors file; None when neither says."""
    for key in ("dtype", "torch_dtype"):
        value = config.get(key)
        if isinstance(value, str) and value in SAFETENSORS_DTYPES.values():
            return value
    if path is None or not path.is_dir():
        return None
    for weights in sorted(path.glob("*.safetensors")):
        try:
            with open(weights, "rb") as handle:
                size = int.from_bytes(handle.read(8), "little")
                if not 0 < size < _HEADER_LIMIT:
                    continue
                header = json.loads(handle.read(size))
        except (OSError, ValueError):
            continue
        for name, entry in header.items():
            if name != "__metadata__" and isinstance(entry, dict) and entry.get("dtype") in SAFETENSORS_DTYPES:
                return SAFETENSORS_DTYPES[entry["dtype"]]
    return None


def model_limits(spec: RoleSpec, config: dict[str, Any], profile: str) -> dict[str, dict[str, Any]]:
    """Each option fitted to the model (:attr:`BackendSpec.model_options`): its value and where it comes
    from (the profile; the model's config for the input bound, ``max_position_embeddings``; else not set)."""
    out: dict[str, dict[str, Any]] = {}
    declaration = spec.declaration
    for key in sorted(declaration.model_options):
        if key in spec.options:
            out[key] = {"value": spec.options[key], "from": f"profile {profile}"}
        elif key == declaration.context_option:
            out[key] = {"value": config.get("max_position_embeddings"), "from": "model config"}
        else:
            out[key] = {"value": None, "from": "not set"}
    return out
