"""Model profiles: which model serves each role, where its files are, and how to provision them.

A profile is a TOML manifest (built-in ones live in the repository's top-level ``models/`` folder) with
one table per role::

    [profile]            name, starter (scores are only a pipeline check), description,
                         models_root (optional: a folder relative to the manifest file)
    [judge]              backend = "vllm" | "transformers" | "openai"
    [verifier]           backend = "hhem" | "judge" (the judge verifies claims itself)
    [embedder]           backend = "sentence-transformers"

and in each role table: ``path`` (absolute, relative to the models root, or ``pkg:PACKAGE/sub/dir`` for
weights shipped inside an installed Python package), ``name`` (what run.json and the report call the
model; default: ``repo``, else the folder's config, else the folder's name), ``repo`` and ``revision`` (read by ``models pull``
only), ``allow_patterns``/``ignore_patterns`` (for the pull), ``provision`` (the command that provisions
the folder, shown when it is missing), ``[ROLE.options]`` (backend options), ``[ROLE.files]`` (file name
-> sha256, written by ``models pull``) and ``[ROLE.extra.KEY]`` extra folders with the same keys (HHEM's
flan-t5-base tokenizer and config: ``KEY = "tokenizer_path"``).

The models root is ``--models-dir``, else the manifest's own ``models_root``, else
``$OFFLINE_EVAL_MODELS``, else ``~/.cache/offline-eval/models``.

Nothing here imports torch or transformers: backends are created lazily by
:func:`offline_eval.runtime.loading.models_from_profile`.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import os
import sysconfig
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from offline_eval.runtime.registry import JUDGE_VERIFIES, BackendSpec, backend_names, backend_spec

ROLES: tuple[str, ...] = ("judge", "verifier", "embedder")
BUILTIN_PROFILES: tuple[str, ...] = ("gpu", "cpu", "starter")
DEFAULT_PROFILE = "starter"
MODELS_ENV = "OFFLINE_EVAL_MODELS"
DEFAULT_MODELS_DIR = Path("~/.cache/offline-eval/models")
PACKAGE_PREFIX = "pkg:"


class ProfileError(ValueError):
    """A manifest is malformed or names something unknown; the message says which file and key."""


class ModelNotProvisioned(RuntimeError):
    """A role's model folder is missing; the message names the role, the path and the fix."""


@dataclass
class Folder:
    """One folder of model files and where ``models pull`` gets it from."""

    path: Path | None
    repo: str | None = None
    revision: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # relative name -> sha256
    allow_patterns: list[str] | None = None
    ignore_patterns: list[str] | None = None
    provision: str | None = None  # the command that provisions this folder
    source: str | None = None  # ``path`` as written in the manifest
    name: str | None = None  # what the manifest calls the model


@dataclass
class RoleSpec:
    """One role's model: backend, folder, backend options, pull source and expected file hashes.

    ``extra_paths`` are further folders the backend needs (key = constructor keyword, e.g. HHEM's
    ``tokenizer_path``); ``extra_sources`` holds their pull sources and hashes under the same keys.
    When the command line gave the role another folder than the profile's, ``replaced`` names the
    profile's and ``not_carried`` holds the profile's options fitted to that model
    (:attr:`BackendSpec.model_options`), which the new one runs without; ``not_taken`` holds the
    profile's options that a backend chosen on the command line does not take.
    """

    role: str
    backend: str
    path: Path | None
    options: dict[str, Any] = field(default_factory=dict)
    repo: str | None = None
    revision: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    extra_paths: dict[str, Path] = field(default_factory=dict)
    extra_sources: dict[str, Folder] = field(default_factory=dict)
    allow_patterns: list[str] | None = None
    ignore_patterns: list[str] | None = None
    provision: str | None = None
    source: str | None = None
    name: str | None = None
    replaced: str | None = None
    not_carried: dict[str, Any] = field(default_factory=dict)
    not_taken: dict[str, Any] = field(default_factory=dict)

    @property
    def declaration(self) -> BackendSpec:
        """The registry's declaration of this role's backend: what it needs and how it is served."""
        return backend_spec(self.role, self.backend)

    @property
    def needs_folder(self) -> bool:
        """Whether this backend reads its weights from local folders."""
        return self.declaration.needs_folder

    def folders(self) -> dict[str, Folder]:
        """The role's folders: ``"main"`` (when it has one) then each extra folder by key."""
        out: dict[str, Folder] = {}
        if self.path is not None:
            out["main"] = Folder(
                path=self.path,
                repo=self.repo,
                revision=self.revision,
                files=self.files,
                allow_patterns=self.allow_patterns,
                ignore_patterns=self.ignore_patterns,
                provision=self.provision,
                source=self.source,
                name=self.name,
            )
        for key, path in self.extra_paths.items():
            extra = self.extra_sources.get(key) or Folder(path=path)
            out[key] = dataclasses.replace(extra, path=path)
        return out


@dataclass
class Profile:
    """The models of one evaluation: a judge, a verifier and an embedder.

    ``starter`` marks a profile whose scores are only a pipeline check (the 135M starter judge);
    outputs and reports must say so.
    """

    name: str
    starter: bool
    judge: RoleSpec
    verifier: RoleSpec
    embedder: RoleSpec
    description: str = ""
    models_dir: Path | None = None
    manifest: Path | None = None

    def role(self, name: str) -> RoleSpec:
        """The spec of role ``name`` (judge, verifier or embedder)."""
        if name not in ROLES:
            raise KeyError(f"unknown role '{name}' (roles: {', '.join(ROLES)})")
        return getattr(self, name)

    def roles(self) -> list[RoleSpec]:
        """The three role specs in order judge, verifier, embedder."""
        return [self.judge, self.verifier, self.embedder]

    @property
    def verifier_is_judge(self) -> bool:
        """True when claims are verified by the judge itself (no separate verifier model)."""
        return self.verifier.backend == JUDGE_VERIFIES

    @property
    def claims_checked_by(self) -> str:
        """Who checks claims against contexts, as a run's settings record it: the verifier backend's
        name (a test double's is the backend it stands in for)."""
        return self.verifier.declaration.recorded_name

    def provision_hint(self, spec: RoleSpec | None = None, folder: Folder | None = None) -> str:
        """The command that provisions a role's folder (or the whole profile)."""
        for candidate in (folder.provision if folder else None, spec.provision if spec else None):
            if candidate:
                return candidate
        builtin = self.manifest is None or self.manifest.parent.resolve() == builtin_dir().resolve()
        target = self.name if builtin else self.manifest
        return (
            f"offline-eval models pull --profile {target} --to DIR on a connected machine, "
            f"then carry DIR in and pass --models-dir DIR"
        )

    def with_overrides(
        self,
        judge_path: str | os.PathLike[str] | None = None,
        judge_backend: str | None = None,
        verifier: str | None = None,
        embedder_path: str | os.PathLike[str] | None = None,
        hhem_path: str | os.PathLike[str] | None = None,
        hhem_tokenizer_path: str | os.PathLike[str] | None = None,
        judge_model: str | None = None,
    ) -> Profile:
        """A copy with the CLI's model flags applied.

        ``--judge PATH`` (for ``--judge-backend openai``: the server's base URL, with ``judge_model``
        the served model name), ``--judge-backend``, ``--verifier hhem|judge``, ``--embedder PATH``,
        ``--hhem PATH`` and ``--hhem-tokenizer PATH``. User paths are taken relative to the working
        directory. An overridden folder drops the manifest's pull source and hashes (another model), and
        the options the manifest fitted to its model (:attr:`BackendSpec.model_options`: the judge's
        ``max_model_len`` and ``max_new_tokens``), so the new model runs with its own limits
        (:meth:`swap_notes` names them). Replacing the starter profile's judge clears ``starter``: the
        tiny judge was the reason.
        """
        judge, own_judge = self._judge_with(judge_path, judge_backend, judge_model)
        verifier_spec = self._verifier_with(verifier)
        if hhem_path is not None or hhem_tokenizer_path is not None:
            if not verifier_spec.needs_folder:
                raise ProfileError("--hhem/--hhem-tokenizer need the hhem verifier: add --verifier hhem")
            if hhem_path is not None:
                _swap_folder(verifier_spec, _user_path(os.fspath(hhem_path)))
            if hhem_tokenizer_path is not None:
                path = _user_path(os.fspath(hhem_tokenizer_path))
                verifier_spec.extra_paths["tokenizer_path"] = path
                verifier_spec.extra_sources["tokenizer_path"] = Folder(path=path, source=str(path))

        embedder = _copy_spec(self.embedder)
        if embedder_path is not None:
            _swap_folder(embedder, _user_path(os.fspath(embedder_path)))

        return dataclasses.replace(
            self, starter=self.starter and own_judge, judge=judge, verifier=verifier_spec, embedder=embedder
        )

    def _judge_with(self, path: str | os.PathLike[str] | None, backend: str | None,
                    model: str | None) -> tuple[RoleSpec, bool]:
        """The judge after ``--judge-backend``, ``--judge`` and ``--judge-model``, and whether it is still
        the profile's own judge (a starter profile stays one only then). A judge served over HTTP takes
        its server's URL for ``--judge`` and has no folder."""
        judge = _copy_spec(self.judge)
        if backend is not None:
            _check_backend("judge", backend, where="--judge-backend")
            if backend != judge.backend:
                allowed = backend_spec("judge", backend).options
                if allowed is not None:
                    judge.not_taken = {k: v for k, v in judge.options.items() if k not in allowed}
                    judge.options = {k: v for k, v in judge.options.items() if k in allowed}
                judge.backend = backend
        url_option = judge.declaration.url_option
        if path is not None:
            text = os.fspath(path)
            if url_option and "://" in text:
                judge.options[url_option] = text
                _set_folder(judge, None)
            else:
                _swap_folder(judge, _user_path(text))
        if model is not None:
            judge.options["model"] = model
        if url_option and path is None and backend is not None:
            _set_folder(judge, None)
        if judge.needs_folder and judge.path is None:
            raise ProfileError(f"the {judge.backend} judge needs a model folder: pass --judge PATH")
        return judge, path is None

    def _verifier_with(self, verifier: str | None) -> RoleSpec:
        """The verifier ``--verifier`` asks for: the profile's own when it has that backend, else the
        backend's default setup (:attr:`BackendSpec.default_setup`) under the models root."""
        if verifier is None:
            return _copy_spec(self.verifier)
        _check_backend("verifier", verifier, where="--verifier")
        if verifier == self.verifier.backend:
            return _copy_spec(self.verifier)
        setup = backend_spec("verifier", verifier).default_setup
        if setup is None:
            raise ProfileError(f"--verifier: the {verifier} verifier has no default model; name it in a manifest")
        table = {"backend": verifier, **copy.deepcopy(dict(setup))}
        return _role_from_table("verifier", table, self.models_dir or default_models_dir(), "--verifier")

    def swap_notes(self, roles: Iterable[str] | None = None) -> list[str]:
        """One line per role (of ``roles``; default: all) whose folder the command line replaced while the
        profile set options for it: which were fitted to the profile's model and are not applied, and
        which still are (none for a test double, which stands in for no model); and one per role whose
        backend it replaced, naming the profile's options that backend does not take."""
        notes = []
        for spec in self.roles():
            if roles is not None and spec.role not in roles:
                continue
            if spec.not_taken:
                notes.append(f"the {spec.backend} {spec.role} does not take the {self.name} profile's "
                             f"{_listed(spec.not_taken)}: not applied")
            if spec.replaced is None or spec.declaration.test_double:  # a double stands in for no model
                continue
            if not spec.not_carried and not spec.options:
                continue
            line = f"{spec.role} {spec.path} replaces the {self.name} profile's {spec.replaced}"
            if spec.not_carried:
                line += (f": {_listed(spec.not_carried)} (set for that model) not applied, the new model's own "
                         "limits apply")
            if spec.options:
                line += f"; kept: {_listed(spec.options)}"
            notes.append(line)
        return notes


# --------------------------------------------------------------------------------------------------
# locating manifests and folders


def builtin_dir() -> Path:
    """Folder of the built-in manifests: ``offline_eval/models/``, in the repository and in the package."""
    return Path(__file__).resolve().parents[1] / "models"


def default_models_dir() -> Path:
    """The models root when no ``--models-dir`` is given: ``$OFFLINE_EVAL_MODELS`` or the user cache."""
    env = os.environ.get(MODELS_ENV)
    return Path(env).expanduser() if env else DEFAULT_MODELS_DIR.expanduser()


def package_folder(ref: str) -> tuple[Path, bool]:
    """Resolve ``pkg:PACKAGE/sub/dir`` to a folder inside an installed package without importing it.

    Returns the folder and whether the package is installed; when it is not, the folder is where pip
    would put it (so messages can name it).
    """
    rest = ref[len(PACKAGE_PREFIX) :] if ref.startswith(PACKAGE_PREFIX) else ref
    package, _, sub = rest.strip("/").partition("/")
    if not package or "." in package:
        raise ProfileError(f"'{ref}': expected pkg:PACKAGE/sub/folder with a top-level package name")
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        base = Path(next(iter(spec.submodule_search_locations)))
        installed = True
    else:
        base = Path(sysconfig.get_paths()["purelib"]) / package
        installed = False
    return (base / sub if sub else base), installed


def resolve_path(text: str, root: Path) -> Path:
    """A manifest path: ``pkg:`` reference, absolute (``~`` expanded) or relative to ``root``."""
    if text.startswith(PACKAGE_PREFIX):
        return package_folder(text)[0]
    path = Path(text).expanduser()
    return path if path.is_absolute() else root / path


def _user_path(text: str) -> Path:
    if text.startswith(PACKAGE_PREFIX):
        return package_folder(text)[0]
    return Path(text).expanduser().absolute()


def is_manifest_path(name_or_path: str) -> bool:
    """Whether a ``--profile`` value names a manifest file rather than a built-in profile."""
    return (
        name_or_path.endswith(".toml")
        or os.sep in name_or_path
        or "/" in name_or_path
        or name_or_path not in BUILTIN_PROFILES and Path(name_or_path).is_file()
    )


def manifest_path(name_or_path: str) -> Path:
    """The manifest file of a built-in profile name or a path to a TOML file."""
    if is_manifest_path(name_or_path):
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise ProfileError(f"profile manifest {path} not found")
        return path.absolute()
    if name_or_path not in BUILTIN_PROFILES:
        raise ProfileError(
            f"unknown profile '{name_or_path}' (built-in: {', '.join(BUILTIN_PROFILES)}; "
            f"or a path to a .toml manifest)"
        )
    return builtin_dir() / f"{name_or_path}.toml"


# --------------------------------------------------------------------------------------------------
# parsing


def load_profile(name_or_path: str, models_dir: Path | str | None = None) -> Profile:
    """Load a built-in profile (``gpu``, ``cpu``, ``starter``) or a TOML manifest file.

    Relative folders resolve against ``models_dir`` when given, else the manifest's ``models_root``
    (relative to the manifest file), else ``$OFFLINE_EVAL_MODELS``, else ``~/.cache/offline-eval/models``.
    """
    path = manifest_path(name_or_path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: not valid TOML: {exc}") from None
    return profile_from_dict(data, path, models_dir)


def profile_from_dict(data: dict[str, Any], manifest: Path | None, models_dir: Path | str | None = None) -> Profile:
    """Build a :class:`Profile` from parsed manifest data (see the module docstring for the keys)."""
    where = str(manifest) if manifest else "<profile>"
    meta = data.get("profile", {})
    if not isinstance(meta, dict):
        raise ProfileError(f"{where}: [profile] must be a table")
    unknown = set(data) - {"profile", *ROLES}
    if unknown:
        raise ProfileError(f"{where}: unknown table(s) {', '.join(sorted(unknown))}")
    if models_dir is not None:
        root = Path(models_dir).expanduser().absolute()
    elif meta.get("models_root") is not None and manifest is not None:
        root = (manifest.parent / Path(str(meta["models_root"])).expanduser()).resolve()
    else:
        root = default_models_dir()
    name = str(meta.get("name") or (manifest.stem if manifest else "custom"))
    specs = {}
    for role in ROLES:
        table = data.get(role)
        if not isinstance(table, dict):
            raise ProfileError(f"{where}: missing [{role}] table")
        specs[role] = _role_from_table(role, table, root, f"{where} [{role}]")
    return Profile(
        name=name,
        starter=bool(meta.get("starter", False)),
        judge=specs["judge"],
        verifier=specs["verifier"],
        embedder=specs["embedder"],
        description=str(meta.get("description", "")),
        models_dir=root,
        manifest=manifest,
    )


_FOLDER_KEYS = {"path", "name", "repo", "revision", "files", "allow_patterns", "ignore_patterns", "provision"}


def _folder_from_table(table: dict[str, Any], root: Path, where: str) -> Folder:
    unknown = set(table) - _FOLDER_KEYS
    if unknown:
        raise ProfileError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    source = table.get("path")
    for key in ("path", "name"):
        if table.get(key) is not None and not isinstance(table[key], str):
            raise ProfileError(f"{where}: {key} must be a string")
    files = table.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise ProfileError(f"{where}: [files] must map file names to sha256 strings")
    for key in ("allow_patterns", "ignore_patterns"):
        value = table.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ProfileError(f"{where}: {key} must be a list of strings")
    return Folder(
        path=resolve_path(source, root) if source else None,
        repo=table.get("repo"),
        revision=None if table.get("revision") is None else str(table["revision"]),
        files={str(k): v.lower() for k, v in files.items()},
        allow_patterns=table.get("allow_patterns"),
        ignore_patterns=table.get("ignore_patterns"),
        provision=table.get("provision"),
        source=source,
        name=table.get("name"),
    )


def _check_backend(role: str, backend: str, where: str) -> None:
    known = backend_names(role)
    if backend not in known:
        raise ProfileError(f"{where}: unknown {role} backend '{backend}' (known: {', '.join(sorted(known))})")


def _role_from_table(role: str, table: dict[str, Any], root: Path, where: str) -> RoleSpec:
    table = dict(table)
    backend = table.pop("backend", None)
    if not isinstance(backend, str):
        raise ProfileError(f"{where}: missing backend")
    _check_backend(role, backend, where)
    options = table.pop("options", {})
    if not isinstance(options, dict):
        raise ProfileError(f"{where}: options must be a table")
    allowed_set = backend_spec(role, backend).options
    bad = set() if allowed_set is None else set(options) - allowed_set
    if bad:
        allowed = ", ".join(sorted(allowed_set or ())) or "none"
        raise ProfileError(f"{where}: unknown option(s) {', '.join(sorted(bad))} for backend {backend} (allowed: {allowed})")
    extras = table.pop("extra", {})
    if not isinstance(extras, dict):
        raise ProfileError(f"{where}: extra must be a table of folders")
    main = _folder_from_table(table, root, where)
    extra_sources = {}
    for key, sub in extras.items():
        if not isinstance(sub, dict) or not sub.get("path"):
            raise ProfileError(f"{where}: [{role}.extra.{key}] needs a path")
        extra_sources[key] = _folder_from_table(sub, root, f"{where} extra.{key}")
    spec = RoleSpec(
        role=role,
        backend=backend,
        path=main.path,
        options=dict(options),
        repo=main.repo,
        revision=main.revision,
        files=main.files,
        extra_paths={k: f.path for k, f in extra_sources.items() if f.path is not None},
        extra_sources=extra_sources,
        allow_patterns=main.allow_patterns,
        ignore_patterns=main.ignore_patterns,
        provision=main.provision,
        source=main.source,
        name=main.name,
    )
    if spec.needs_folder and spec.path is None:
        raise ProfileError(f"{where}: backend {backend} needs a path")
    url_option = spec.declaration.url_option
    if url_option and url_option not in options:
        raise ProfileError(f"{where}: the {backend} {role} needs options.{url_option}")
    return spec


def _copy_spec(spec: RoleSpec) -> RoleSpec:
    return dataclasses.replace(
        spec,
        options=dict(spec.options),
        files=dict(spec.files),
        extra_paths=dict(spec.extra_paths),
        extra_sources=dict(spec.extra_sources),
        not_carried=dict(spec.not_carried),
        not_taken=dict(spec.not_taken),
    )


def _set_folder(spec: RoleSpec, path: Path | None) -> None:
    """Point a role at another folder: its pull source, hashes and provisioning hint no longer apply."""
    spec.path = path
    spec.repo = None
    spec.revision = None
    spec.files = {}
    spec.allow_patterns = None
    spec.ignore_patterns = None
    spec.provision = None
    spec.source = None if path is None else str(path)
    spec.name = None


def _swap_folder(spec: RoleSpec, path: Path) -> None:
    """Point a role at a folder the command line gives. Unless it is the profile's own, the options the
    manifest fitted to the profile's model (:attr:`BackendSpec.model_options`) are set aside in
    ``not_carried``: a limit of one model is not another's."""
    if spec.path is not None and spec.path.resolve() == path.resolve():
        _set_folder(spec, path)
        return
    fitted = spec.declaration.model_options
    spec.not_carried = {k: v for k, v in spec.options.items() if k in fitted}
    spec.options = {k: v for k, v in spec.options.items() if k not in fitted}
    spec.replaced = spec.source or (str(spec.path) if spec.path is not None else f"{spec.backend} {spec.role}")
    _set_folder(spec, path)


def _listed(options: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(options.items()))


# --------------------------------------------------------------------------------------------------
# building backends


def backend_kwargs(spec: RoleSpec, device: str | None, batch_size: int | None) -> dict[str, Any]:
    """The constructor keywords of ``spec``'s backend class (pure: no file access, no imports).

    ``batch_size`` None → the manifest's ``options.batch_size`` → left out (the backend's own default:
    vLLM's is a whole stage). ``device`` None is left out too. Paths are passed as strings.
    """
    if spec.backend == JUDGE_VERIFIES:
        raise ValueError("the verifier is the judge: there is no verifier backend to build")
    options = dict(spec.options)
    size = batch_size if batch_size is not None else options.get("batch_size")
    options.pop("batch_size", None)
    kwargs: dict[str, Any] = {}
    if spec.needs_folder and spec.path is None:
        raise ValueError(f"the {spec.role} backend {spec.backend} needs a model folder")
    if spec.path is not None:  # file-backed test doubles (a scripted judge's script) take it too
        kwargs["path"] = str(spec.path)
    if spec.declaration.takes_device and device is not None:
        kwargs["device"] = device
    if size is not None:
        kwargs["batch_size"] = int(size)
    kwargs.update(options)
    for key, path in spec.extra_paths.items():
        kwargs[key] = str(path)
    return kwargs


def missing_folder_message(profile: Profile, spec: RoleSpec) -> str | None:
    """One line naming the role, the missing folder and the command that provisions it; None if all
    of the role's folders exist."""
    if not spec.needs_folder:
        return None
    for key, folder in spec.folders().items():
        if folder.path is not None and not folder.path.is_dir():
            what = spec.role if key == "main" else f"{spec.role} ({key})"
            return (
                f"{what} model folder {folder.path} not found ({spec.backend} backend, profile "
                f"{profile.name}); provision it with: {profile.provision_hint(spec, folder)}"
            )
    return None
