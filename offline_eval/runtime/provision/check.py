"""Inside the air gap: is every folder of a profile there, with the files its backend needs and the
sha256s its manifest lists (``offline-eval models check``)."""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path

from offline_eval.runtime.identity import default_memo, list_files
from offline_eval.runtime.profiles import PACKAGE_PREFIX, Folder, Profile, RoleSpec, package_folder
from offline_eval.runtime.provision.starter import STARTER_MARKER
from offline_eval.runtime.registry import JUDGE_VERIFIES

__all__ = ["RoleStatus", "check_folder", "check_profile", "format_status_table"]


WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model*.bin")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "spiece.model",
    "vocab.txt",
    "sentencepiece.bpe.model",
    "vocab.json",
)


def _kinds_needed(spec: RoleSpec, key: str) -> tuple[str, ...]:
    """Which kinds of file a folder must hold (config, weights, tokenizer), as the backend declares."""
    declaration = spec.declaration
    return declaration.main_folder_kinds if key == "main" else declaration.extra_folder_kinds


def _find_kind(kind: str, names: list[str]) -> str | None:
    top = [n for n in names if "/" not in n]
    if kind == "config":
        return "config.json" if "config.json" in top else None
    if kind == "weights":
        for name in top:
            if any(fnmatch.fnmatch(name, pattern) for pattern in WEIGHT_PATTERNS):
                return name
        return None
    for name in TOKENIZER_FILES:
        if name in top:
            return name
    return None


_KIND_LABEL = {
    "config": "config.json",
    "weights": "weights (*.safetensors or pytorch_model*.bin)",
    "tokenizer": "tokenizer (tokenizer.json, tokenizer.model, spiece.model or vocab.txt)",
}


@dataclass
class RoleStatus:
    """What :func:`check_profile` found for one folder of one role.

    ``present`` names the file found for each required kind (config, weights, tokenizer); ``missing``
    the kinds not found; ``absent``/``mismatched`` the manifest's hashed files that are not there or
    differ; ``unlisted`` files present but not in the manifest (reported, not an error).
    """

    role: str
    backend: str
    folder: str = "main"
    path: Path | None = None
    exists: bool = False
    present: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    hashed: bool = False
    verified: int = 0
    absent: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)
    note: str = ""
    hint: str = ""
    local: bool = True

    @property
    def ok(self) -> bool:
        """Provisioned: folder there, nothing required missing, every listed hash matching."""
        if not self.local:
            return True
        return self.exists and not self.missing and not self.absent and not self.mismatched

    @property
    def label(self) -> str:
        return self.role if self.folder == "main" else f"{self.role} ({self.folder})"

    def describe(self) -> str:
        """A short status line (the table's last column)."""
        if not self.local:
            return self.note
        if not self.exists:
            return f"missing folder; provision: {self.hint}"
        parts = []
        if self.missing:
            parts.append("no " + ", no ".join(_KIND_LABEL[k] for k in self.missing))
        if self.mismatched:
            parts.append(f"sha256 MISMATCH: {', '.join(self.mismatched)}")
        if self.absent:
            parts.append(f"files listed but absent: {', '.join(self.absent)}")
        if self.hashed and not self.mismatched and not self.absent:
            parts.append(f"{self.verified} files sha256-verified")
        elif not self.hashed:
            parts.append("no sha256 in manifest" if self.exists else "")
        if self.unlisted:
            parts.append(f"{len(self.unlisted)} unlisted file(s)")
        if self.note:
            parts.append(self.note)
        return "; ".join(p for p in parts if p) or "ok"


def check_folder(spec: RoleSpec, key: str, folder: Folder, hint: str, verify_hashes: bool = True) -> RoleStatus:
    """Check one folder of a role: required files, then the manifest's sha256s when there are any."""
    status = RoleStatus(role=spec.role, backend=spec.backend, folder=key, path=folder.path, hint=hint)
    if folder.path is None or not folder.path.is_dir():
        status.missing = list(_kinds_needed(spec, key))
        if folder.source and folder.source.startswith(PACKAGE_PREFIX) and not package_folder(folder.source)[1]:
            status.note = "package not installed"
        return status
    status.exists = True
    names = list_files(folder.path)
    for kind in _kinds_needed(spec, key):
        found = _find_kind(kind, names)
        if found:
            status.present[kind] = found
        else:
            status.missing.append(kind)
    expected = folder.files
    marker = folder.path / STARTER_MARKER
    if not expected and marker.is_file():
        # setup-starter records the hashes of the folder it converted
        try:
            expected = dict(json.loads(marker.read_text(encoding="utf-8")).get("files", {}))
        except (ValueError, OSError):
            status.note = f"unreadable {STARTER_MARKER}"
    if expected and verify_hashes:
        status.hashed = True
        for name, want in sorted(expected.items()):
            target = folder.path / name
            if not target.is_file():
                status.absent.append(name)
            elif default_memo().sha256(target) != want.lower():
                status.mismatched.append(name)
            else:
                status.verified += 1
        status.unlisted = [n for n in names if n not in expected]
    elif expected:
        status.note = "sha256 not verified (--no-hash)"
    return status


def check_profile(profile: Profile, verify_hashes: bool = True) -> list[RoleStatus]:
    """One :class:`RoleStatus` per folder of each role (judge, verifier, embedder, then extras)."""
    out: list[RoleStatus] = []
    for spec in profile.roles():
        if not spec.needs_folder:
            url_option = spec.declaration.url_option
            if spec.backend == JUDGE_VERIFIES:
                note = "no model: the judge verifies claims"
            elif url_option:
                note = f"remote server {spec.options.get(url_option, '?')} (not checked)"
            else:
                note = f"{spec.backend}: nothing to check"
            out.append(RoleStatus(role=spec.role, backend=spec.backend, local=False, note=note))
            continue
        for key, folder in spec.folders().items():
            out.append(check_folder(spec, key, folder, profile.provision_hint(spec, folder), verify_hashes))
    return out


def format_status_table(profile: Profile, statuses: list[RoleStatus]) -> str:
    """A plain-text table of :func:`check_profile`'s result, with a header line about the profile."""
    head = f"profile {profile.name}" + (" (STARTER: scores are only a pipeline check)" if profile.starter else "")
    if profile.manifest:
        head += f"  manifest {profile.manifest}"
    rows = [("role", "backend", "ok", "path", "status")]
    for s in statuses:
        rows.append((s.label, s.backend, "yes" if s.ok else "NO", str(s.path) if s.path else "-", s.describe()))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [head]
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    return "\n".join(lines)
