"""Reading a judge's JSON the way a patient human would, and saying exactly why when we can't.

Handles code fences, prose before and after, single quotes, Python literals (True/None) and trailing
commas; then checks the result against the prompt's JSON schema (the subset our prompts use: type,
properties, required, items, enum, minItems, maxItems). Failure is a reason string, never an
exception and never a made-up value.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from offline_eval.json_scan import balanced_spans

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
# Deeper than any answer a prompt asks for, and far below the parsers' recursion limit (json and ast
# raise RecursionError near 1,000; the bracket scan below is quadratic in the depth).
MAX_DEPTH = 100


def _depth(text: str) -> int:
    """The deepest nesting of brackets in ``text``, quotes ignored (so never less than the JSON's own)."""
    depth = deepest = 0
    for c in text:
        if c in "{[":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "}]" and depth:
            depth -= 1
    return deepest


def _loads(candidate: str) -> Any:
    for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
        try:
            return json.loads(attempt)
        except (ValueError, RecursionError):
            pass
        try:
            value = ast.literal_eval(attempt)
            if isinstance(value, (dict, list)):
                return json.loads(json.dumps(value))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
        pythonic = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", attempt)))
        try:
            value = ast.literal_eval(pythonic)
            if isinstance(value, (dict, list)):
                return json.loads(json.dumps(value))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    raise ValueError("not JSON")


def extract_json(text: str) -> tuple[Any, str | None]:
    """(value, None) for the first JSON object/array in ``text``, else (None, reason)."""
    if not text or not text.strip():
        return None, "empty output"
    if _depth(text) > MAX_DEPTH:
        return None, f"JSON nested more than {MAX_DEPTH} levels deep"
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text.strip()]
    for candidate in candidates:
        try:
            return _loads(candidate.strip()), None
        except ValueError:
            pass
        for span in balanced_spans(candidate):
            try:
                return _loads(span), None
            except ValueError:
                continue
    if text.count("{") > text.count("}") or text.count("[") > text.count("]"):
        return None, "output cut off before the JSON closed"
    return None, "no JSON object found in the output"


_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool,
          "number": (int, float), "integer": int, "null": type(None)}


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> str | None:
    """None when ``value`` fits ``schema``, else the first problem as a short reason."""
    expected = schema.get("type")
    if expected:
        kinds = expected if isinstance(expected, list) else [expected]
        ok = any(isinstance(value, _TYPES[k]) and not (k in ("number", "integer") and isinstance(value, bool))
                 for k in kinds)
        if not ok:
            return f"{path} should be {expected}, got {type(value).__name__}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path} should be one of {schema['enum']}, got {value!r}"
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                return f"{path} lacks '{name}'"
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                problem = validate(value[name], sub, f"{path}.{name}")
                if problem:
                    return problem
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            return f"{path} has {len(value)} items, fewer than {schema['minItems']}"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{path} has {len(value)} items, more than {schema['maxItems']}"
        if "items" in schema:
            for i, item in enumerate(value):
                problem = validate(item, schema["items"], f"{path}[{i}]")
                if problem:
                    return problem
    return None


def coerce(value: Any, schema: dict[str, Any]) -> Any:
    """Forgive the harmless: a bare list where {"key": list} was asked, "true"/"1" for booleans."""
    if schema.get("type") == "object" and isinstance(value, list):
        props = schema.get("properties", {})
        arrays = [k for k, s in props.items() if s.get("type") == "array"]
        if len(arrays) == 1 and set(schema.get("required", [])) <= {arrays[0]}:
            value = {arrays[0]: value}
    if schema.get("type") == "boolean" and isinstance(value, (str, int)) and not isinstance(value, bool):
        text = str(value).strip().lower()
        if text in ("true", "yes", "1"):
            return True
        if text in ("false", "no", "0"):
            return False
    if schema.get("type") in ("integer", "number") and isinstance(value, str):
        try:
            return int(value) if schema["type"] == "integer" else float(value)
        except ValueError:
            return value
    if isinstance(value, dict) and "properties" in schema:
        return {k: coerce(v, schema["properties"][k]) if k in schema["properties"] else v
                for k, v in value.items()}
    if isinstance(value, list) and "items" in schema:
        return [coerce(v, schema["items"]) for v in value]
    return value


def parse_output(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    value, problem = extract_json(text)
    if problem:
        return None, problem
    value = coerce(value, schema)
    problem = validate(value, schema)
    return (None, problem) if problem else (value, None)


def closed_strings(text: str, key: str) -> list[str] | None:
    """The strings of the list under ``key`` in a reply cut off before its JSON closed (a small judge
    reaching its token cap mid-list): those whose closing quote was written, in order; None when the
    list never opens or no string in it closed. What a salvage reads when a listed reply cannot be
    parsed even after its repair."""
    start = re.search(rf'"{re.escape(key)}"\s*:\s*\[', text)
    if start is None:
        return None
    found = [_unescaped(s) for s in re.findall(r'"((?:[^"\\]|\\.)*)"\s*(?=[,\]])', text[start.end():])]
    return found or None


def _unescaped(text: str) -> str:
    try:
        return json.loads(f'"{text}"')
    except ValueError:
        return text
