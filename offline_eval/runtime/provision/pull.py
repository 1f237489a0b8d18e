"""On a connected machine: download a profile's Hub snapshots and write the manifest that checks them
after they were carried into the air gap (``offline-eval models pull``)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from offline_eval.runtime.identity import hash_folder
from offline_eval.runtime.profiles import PACKAGE_PREFIX, Folder, Profile, RoleSpec
from offline_eval.runtime.provision.manifest import dump_toml, profile_to_dict

__all__ = ["Downloader", "download_env", "hub_download", "pull_profile"]


# Run by a child interpreter: it must not import offline_eval, whose import forces HF_HUB_OFFLINE=1.
_DOWNLOAD_SCRIPT = r"""
import json, sys
from huggingface_hub import HfApi, snapshot_download
job = json.loads(sys.argv[1])
commit = HfApi().model_info(job["repo"], revision=job["revision"]).sha
path = snapshot_download(
    repo_id=job["repo"], revision=commit, local_dir=job["local_dir"],
    allow_patterns=job["allow_patterns"], ignore_patterns=job["ignore_patterns"],
)
print(json.dumps({"commit": commit, "path": str(path)}))
"""

# huggingface_hub reads these at import time; the child starts from a clean slate for them.
_ONLINE_ENV = {"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0"}
_DROP_ENV = ("HF_HUB_DISABLE_IMPLICIT_TOKEN",)

Downloader = Callable[[Folder, Path], str]


def download_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: online, telemetry still off, the user's stored Hub token allowed."""
    env = dict(os.environ if base is None else base)
    env.update(_ONLINE_ENV)
    for key in _DROP_ENV:
        env.pop(key, None)
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    return env


def hub_download(folder: Folder, local_dir: Path) -> str:
    """Download ``folder.repo`` at ``folder.revision`` into ``local_dir`` in a child Python; return
    the resolved commit hash. Progress goes to this process's stderr."""
    job = {
        "repo": folder.repo,
        "revision": folder.revision or "main",
        "local_dir": str(local_dir),
        "allow_patterns": folder.allow_patterns,
        "ignore_patterns": folder.ignore_patterns,
    }
    proc = subprocess.run(
        [sys.executable, "-c", _DOWNLOAD_SCRIPT, json.dumps(job)],
        env=download_env(),
        stdout=subprocess.PIPE,
        text=True,
        cwd=local_dir.parent,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"downloading {folder.repo}@{job['revision']} failed (exit {proc.returncode}); see above")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"downloading {folder.repo}: no result from the download process")
    return str(json.loads(lines[-1])["commit"])


def _pull_name(folder: Folder) -> str:
    """The folder name under ``dest``: the manifest's relative path, else the repo's name."""
    source = folder.source
    if source and not source.startswith(PACKAGE_PREFIX) and not Path(source).expanduser().is_absolute():
        return Path(source).as_posix()
    assert folder.repo
    return folder.repo.split("/")[-1].lower()


def pull_profile(profile: Profile, dest: Path, download: Downloader | None = None) -> Path:
    """Download every role folder that has a ``repo`` into ``dest`` and write ``dest/<name>.toml``.

    The written manifest has ``models_root = "."`` (folders relative to itself), each revision resolved
    to its commit hash and the sha256 of every file, so ``offline-eval models check --profile
    dest/<name>.toml`` verifies the copy after it was carried into the air gap. Folders without a
    ``repo`` (the starter judge, a package's folder, a remote judge) are written as they were.
    ``download(folder, local_dir) -> commit`` defaults to :func:`hub_download`.
    """
    download = download or hub_download
    dest = Path(dest).expanduser().absolute()
    dest.mkdir(parents=True, exist_ok=True)
    paths: dict[tuple[str, str], str] = {}
    roles: dict[str, RoleSpec] = {}
    for spec in profile.roles():
        new = dataclasses.replace(
            spec, options=dict(spec.options), extra_paths=dict(spec.extra_paths), extra_sources=dict(spec.extra_sources)
        )
        for key, folder in spec.folders().items():
            if not folder.repo:
                continue
            name = _pull_name(folder)
            local_dir = dest / name
            local_dir.mkdir(parents=True, exist_ok=True)
            print(f"pull: {spec.role} {folder.repo}@{folder.revision or 'main'} -> {local_dir}", file=sys.stderr)
            commit = download(folder, local_dir)
            files = hash_folder(local_dir)
            paths[(spec.role, key)] = name
            if key == "main":
                new.path, new.revision, new.files, new.source = local_dir, commit, files, name
            else:
                new.extra_paths[key] = local_dir
                new.extra_sources[key] = dataclasses.replace(
                    folder, path=local_dir, revision=commit, files=files, source=name
                )
        roles[spec.role] = new
    pulled = dataclasses.replace(profile, **roles)
    data = profile_to_dict(pulled, paths)
    data["profile"]["models_root"] = "."
    manifest = dest / f"{profile.name}.toml"
    header = (
        f"offline-eval model profile '{profile.name}', written by `offline-eval models pull` on "
        f"{time.strftime('%Y-%m-%d %H:%M:%S %z')}.\n"
        f"Folders are relative to this file. Carry this folder into the air gap and run:\n"
        f"  offline-eval models check --profile {manifest.name}"
    )
    manifest.write_text(dump_toml(data, header), encoding="utf-8")
    return manifest
