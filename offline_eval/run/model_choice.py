"""Which models a run uses, as the command line, a --config TOML, the Python API and a Ray replica give
them: a profile and what is changed in it. The run's configuration (:mod:`offline_eval.run.config`) and
the Ray engine, which rebuilds the same models on every replica, both read it from here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

from offline_eval.engine.models import Models

__all__ = ["ModelChoice"]


@dataclass
class ModelChoice:
    """Which models a run uses: a profile (gpu, cpu, starter, a manifest path; None: $OFFLINE_EVAL_PROFILE,
    else the first provisioned) and what the command line or the caller changes in it. Field names are
    the flags' (``--judge-backend`` is ``judge_backend``) and the API's keywords."""

    profile: str | None = None
    models_dir: Path | None = None
    judge: str | None = None  # a folder, or a base URL with judge_backend "openai"
    judge_backend: str | None = None
    judge_model: str | None = None  # the served model name for judge_backend "openai"
    verifier: str | None = None  # "hhem" or "judge"
    hhem: str | None = None
    hhem_tokenizer: str | None = None
    embedder: str | None = None
    device: str | None = None
    batch_size: int | None = None
    judge_batch_size: int | None = None
    verify: bool = True  # check model files against their manifests' sha256s before loading

    # field -> (Profile.with_overrides keyword, the role it configures; None: it decides who verifies)
    _OVERRIDES = {"judge": ("judge_path", "judge"), "judge_backend": ("judge_backend", "judge"),
                  "judge_model": ("judge_model", "judge"), "verifier": ("verifier", None),
                  "hhem": ("hhem_path", "verifier"), "hhem_tokenizer": ("hhem_tokenizer_path", "verifier"),
                  "embedder": ("embedder_path", "embedder")}

    def overrides(self, roles: Iterable[str] | None = None) -> dict[str, Any]:
        """The choices as :meth:`Profile.with_overrides` keywords; with ``roles``, only those for these
        roles (a judge verifies when the profile has no verifier, so the verifier's role brings the
        judge's choices along)."""
        wanted = None if roles is None else set(roles) | ({"judge"} if "verifier" in roles else set())
        return {keyword: getattr(self, name) for name, (keyword, role) in self._OVERRIDES.items()
                if wanted is None or role is None or role in wanted}

    def profile_for(self, roles: Iterable[str]) -> tuple[Any, set[str]]:
        """The profile these choices make for a run whose metrics use ``roles``, and the roles it loads
        (the judge's instead of the verifier's when the judge verifies claims itself)."""
        from offline_eval.runtime.loading import resolve_profile

        roles = set(roles)
        return resolve_profile(self.profile, Path(self.models_dir) if self.models_dir else None, roles,
                               self.overrides(roles))

    def models_of(self, profile: Any, roles: set[str]) -> Models:
        """The models of ``roles`` of ``profile`` on this device and batch sizes: identities computed (files
        checked against their manifests unless ``verify`` is off), nothing loaded."""
        from offline_eval.runtime.loading import models_from_profile

        return models_from_profile(profile, device=self.device, batch_size=self.batch_size,
                                   judge_batch_size=self.judge_batch_size, roles=roles, verify=self.verify)

    def portable(self) -> "ModelChoice":
        """A copy whose relative paths are absolute against this working directory: what a Ray replica,
        which may run elsewhere, rebuilds the same models from."""
        from offline_eval.runtime.profiles import is_manifest_path

        profile = _portable_path(self.profile) if self.profile and is_manifest_path(self.profile) else self.profile
        models_dir = _portable_path(self.models_dir)
        return replace(self, profile=profile, models_dir=Path(models_dir) if models_dir else None,
                       **{name: _portable_path(getattr(self, name)) for name in _PATH_CHOICES})


_PATH_CHOICES = ("judge", "hhem", "hhem_tokenizer", "embedder")  # the model folders a choice can name


def _portable_path(text: str | os.PathLike[str] | None) -> str | None:
    """Absolute for relative paths (replicas run elsewhere); ``~`` and ``pkg:`` stay as written so each
    node expands them itself; URLs are left alone."""
    if text is None:
        return None
    text = os.fspath(text)
    if text.startswith(("~", "pkg:")) or "://" in text or os.path.isabs(text):
        return text
    return os.path.abspath(text)
