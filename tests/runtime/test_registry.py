"""Backend knowledge lives in the backend's declaration: no other module compares a backend's name, the
facts the package asks about a backend come from the registry, and backends learn their identity
from it."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest

import offline_eval
from offline_eval.cli.shared import add_model_arguments
from offline_eval.engine.requests import Classify, Embed, Generate, Request, ScoreOptions
from offline_eval.judging.settings import JUDGE, EvalSettings
from offline_eval.run.config import RunConfig, build_run
from offline_eval.run.model_choice import ModelChoice
from offline_eval.runtime.base import Backend, Embedder, JudgeBackend, Verifier
from offline_eval.runtime.hashing_embedder import HashingEmbedder
from offline_eval.runtime.profiles import ROLES, load_profile
from offline_eval.runtime.registry import DECLARED_BACKENDS, JUDGE_VERIFIES, backend_spec, declaration_of
from offline_eval.runtime.scripted import ScriptedJudge, ScriptedVerifier

PACKAGE = Path(offline_eval.__file__).resolve().parent
REGISTRY = "offline_eval.runtime.registry"
BACKEND_NAMES = {spec.name for spec in DECLARED_BACKENDS}


def _mentions_backend(node: ast.AST) -> bool:
    """Whether an expression reads a backend's name (``spec.backend``, ``settings.verifier``, ...)."""
    for sub in ast.walk(node):
        name = sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(sub, ast.Attribute) else ""
        if "backend" in name.lower() or "verifier" in name.lower():
            return True
    return False


def _backend_literal(node: ast.AST, other: ast.AST) -> str | None:
    """The backend name ``node`` spells when it is compared with ``other``. A name that is also a role
    ("judge") counts only against an expression that reads a backend: ``spec.role == "judge"`` asks
    for a role."""
    if isinstance(node, ast.Constant) and node.value in BACKEND_NAMES:
        if node.value not in ROLES or _mentions_backend(other):
            return node.value
    return None


def backend_comparisons(source: str) -> list[tuple[int, str]]:
    """(line, name) of every comparison of an expression with a backend's name as a string literal:
    ``==``/``!=``/``is``, membership in a literal tuple/list/set, ``"name" in <backends>`` and ``case``;
    and of the two ways of writing backends down by hand: a choice between backend names on a backend
    condition, an argparse ``choices`` list of them."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, operands, operands[1:]):
                pairs: list[tuple[ast.AST, ast.AST]] = []
                if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
                    pairs = [(left, right), (right, left)]
                elif isinstance(op, (ast.In, ast.NotIn)):
                    if isinstance(right, (ast.Tuple, ast.List, ast.Set)):
                        pairs = [(item, left) for item in right.elts]
                    elif _mentions_backend(right):  # "hhem" in backends; not "transformers" in sys.modules
                        pairs = [(left, right)]
                found += [(node.lineno, name) for lit, other in pairs if (name := _backend_literal(lit, other))]
        elif isinstance(node, ast.IfExp) and _mentions_backend(node.test):  # "judge" if is_judge else "hhem"
            found += [(node.lineno, name) for branch in (node.body, node.orelse)
                      if (name := _backend_literal(branch, node.test))]
        elif isinstance(node, ast.keyword) and node.arg == "choices" and isinstance(node.value, (ast.List, ast.Tuple)):
            found += [(node.lineno, item.value) for item in node.value.elts  # a hand-written list of backends
                      if isinstance(item, ast.Constant) and item.value in BACKEND_NAMES - set(ROLES)]
        elif isinstance(node, ast.Match):
            for case in node.cases:
                for pattern in ast.walk(case.pattern):
                    if isinstance(pattern, ast.MatchValue) and (name := _backend_literal(pattern.value, node.subject)):
                        found.append((pattern.lineno, name))
    return sorted(found)


def test_the_scan_finds_what_it_looks_for() -> None:
    source = """
if spec.backend == "vllm": pass
if "openai" != judge.backend: pass
if settings.verifier == "hhem": pass
if profile.verifier.backend == "judge": pass
if backend in ("scripted", "transformers"): pass
if "hashing" in backend_names: pass
match spec.backend:
    case "sentence-transformers": pass
if spec.role == "judge": pass
if "transformers" in sys.modules: pass
if role in ("judge", "verifier"): pass
if spec.backend == JUDGE_VERIFIES: pass
verifier = "judge" if profile.verifier_is_judge else "hhem"
group.add_argument("--verifier", choices=["hhem", "judge"])
group.add_argument("--verdicts", choices=["options", "generate"])
"""
    assert backend_comparisons(source) == [
        (2, "vllm"), (3, "openai"), (4, "hhem"), (5, "judge"), (6, "scripted"), (6, "transformers"),
        (7, "hashing"), (9, "sentence-transformers"), (14, "hhem"), (14, "judge"), (15, "hhem")]


def test_no_backend_name_is_compared_outside_the_registry_and_its_own_module() -> None:
    own_module = {spec.name: set() for spec in DECLARED_BACKENDS}
    for spec in DECLARED_BACKENDS:
        if spec.module:
            own_module[spec.name].add(spec.module)
    offences = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if module == REGISTRY:
            continue
        for line, name in backend_comparisons(path.read_text(encoding="utf-8")):
            if module not in own_module[name]:
                offences.append(f"{path.relative_to(PACKAGE.parent)}:{line} compares with {name!r}")
    assert not offences, "ask the backend's declaration (offline_eval.runtime.registry) instead:\n" + "\n".join(offences)


def test_backends_learn_their_declaration_from_the_registry() -> None:
    assert declaration_of(ScriptedJudge) is backend_spec("judge", "scripted")
    assert declaration_of(ScriptedVerifier) is backend_spec("verifier", "scripted")
    assert HashingEmbedder.declaration() is backend_spec("embedder", "hashing")

    class Counting(ScriptedVerifier):  # a test's subclass is still the declared backend
        pass

    assert Counting.declaration() is backend_spec("verifier", "scripted")
    with pytest.raises(LookupError, match="not a declared backend"):
        declaration_of(Backend)
    # every declared class is named where its module defines it (checked without importing torch)
    for spec in DECLARED_BACKENDS:
        if spec.module is None:
            continue
        tree = ast.parse(Path(PACKAGE.parent, *spec.module.split(".")).with_suffix(".py").read_text(encoding="utf-8"))
        bases = {node.name: [ast.unparse(b) for b in node.bases] for node in tree.body if isinstance(node, ast.ClassDef)}
        assert bases.get(spec.class_name) == ["Backend"], f"{spec.module}.{spec.class_name} derives from Backend"


def test_every_backend_class_of_the_package_is_declared() -> None:
    # the other half of the check above: no class deriving from Backend is left out of the table, so the
    # table holds every backend without importing a backend's module (and its torch or vLLM) to find it
    declared = {(spec.module, spec.class_name) for spec in DECLARED_BACKENDS if spec.module}
    defined = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        defined |= {(module, node.name) for node in ast.parse(path.read_text(encoding="utf-8")).body
                    if isinstance(node, ast.ClassDef) and "Backend" in [ast.unparse(b) for b in node.bases]}
    assert defined == declared


def test_identities_of_built_backends_are_unchanged() -> None:
    assert HashingEmbedder(dim=8).identity == 'embedder:hashing:{"dim": 8}'
    assert ScriptedVerifier().identity == "verifier:scripted"
    script = {"generate": [{"match": "x", "response": "y"}]}
    assert ScriptedJudge(script=script).identity == "judge:scripted:" + json.dumps(script, sort_keys=True)[:64]


def test_shared_checks_are_written_once() -> None:
    for make in (lambda: ScriptedJudge(batch_size=0), lambda: ScriptedVerifier(batch_size=0),
                 lambda: HashingEmbedder(batch_size=0)):
        with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
            make()
    assert [Backend.dtype_name(n) for n in ("auto", "FP32", "bf16", "half", "float16")] == [
        "auto", "float32", "bfloat16", "float16", "float16"]
    with pytest.raises(ValueError, match="unknown dtype 'int8'"):
        Backend.dtype_name("int8")


def test_each_request_names_the_backend_method_that_answers_it() -> None:
    contract = {"judge": JudgeBackend, "verifier": Verifier, "embedder": Embedder}
    kinds = [Generate, ScoreOptions, Classify, Embed]
    assert {cls.backend_method for cls in kinds} == {"generate", "score_options", "classify", "embed"}
    for cls in kinds:
        assert issubclass(cls, Request) and hasattr(contract[cls.role], cls.backend_method)


def test_claims_checked_by_classifier_is_the_verifier_declaration(tmp_path: Path) -> None:
    """The run's setup reads it from the verifier's declaration, so metrics look up no backend."""
    manifest = tmp_path / "doubles.toml"
    manifest.write_text('[judge]\nbackend = "scripted"\n[verifier]\nbackend = "scripted"\n'
                        '[embedder]\nbackend = "hashing"\n', encoding="utf-8")
    classified = build_run(RunConfig(metrics=["faithfulness"], models=ModelChoice(profile=str(manifest))))
    assert classified.settings.verifier == "hhem" and classified.settings.claims_checked_by_classifier
    judged = build_run(RunConfig(metrics=["faithfulness"],
                                 models=ModelChoice(profile=str(manifest), verifier=JUDGE_VERIFIES)))
    assert judged.settings.verifier == JUDGE_VERIFIES and not judged.settings.claims_checked_by_classifier
    assert not EvalSettings().claims_checked_by_classifier
    assert classified.settings.fingerprint() == EvalSettings(verifier="hhem", verifier_classifies=False).fingerprint()


def test_settings_of_a_verifier_not_the_judge_say_whether_it_classifies() -> None:
    with pytest.raises(ValueError, match="verifier_classifies"):
        EvalSettings(verifier="hhem")
    with pytest.raises(ValueError, match="verifier_classifies"):
        EvalSettings(verifier=JUDGE_VERIFIES, verifier_classifies=True)
    assert JUDGE_VERIFIES == JUDGE  # the settings name the judge as the registry does


def test_settings_record_a_stand_in_as_the_backend_it_stands_in_for(tmp_path: Path) -> None:
    manifest = tmp_path / "doubles.toml"
    manifest.write_text('[judge]\nbackend = "scripted"\n[verifier]\nbackend = "scripted"\n'
                        '[embedder]\nbackend = "hashing"\n', encoding="utf-8")
    assert load_profile(str(manifest)).claims_checked_by == "hhem"  # as the run's settings always said
    assert load_profile("starter", models_dir=tmp_path).claims_checked_by == JUDGE_VERIFIES
    assert load_profile("gpu", models_dir=tmp_path).claims_checked_by == "hhem"


def test_verifier_choices_leave_out_test_doubles() -> None:
    parser = argparse.ArgumentParser()
    add_model_arguments(parser.add_argument_group("models"))
    choices = next(a.choices for a in parser._actions if a.dest == "verifier")
    assert choices == ["hhem", "judge"]


def test_backend_facts() -> None:
    assert backend_spec("judge", "vllm").sizes_own_batches
    assert not backend_spec("judge", "transformers").sizes_own_batches
    openai = backend_spec("judge", "openai")
    assert openai.url_option == "base_url" and not openai.takes_device and not openai.needs_folder
    assert backend_spec("judge", "vllm").declares("tensor_parallel_size")
    assert not backend_spec("judge", "scripted").declares("tensor_parallel_size")  # accepts any, declares none
    hhem = backend_spec("verifier", "hhem")
    assert hhem.classifies_claims and hhem.main_folder_kinds == ("config", "weights")
    assert hhem.extra_folder_kinds == ("config", "tokenizer")
