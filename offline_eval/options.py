"""Options declared once, as dataclass fields, and the flags made from them.

Two kinds of option are declared this way: the judging settings every metric reads
(:class:`offline_eval.judging.settings.EvalSettings`) and a metric's own (``Metric.Options``). Each
option has a public name that is at once its flag's destination, its key in a ``run --config`` TOML
file and its keyword in the Python API, so the three cannot drift apart. A field's annotation says
how a flag's text is read: ``bool`` true/false, ``int`` and ``float`` numbers, a ``tuple`` of numbers
comma-separated values (as many as the default has), a ``Literal`` one of its values. Its
``metadata`` says what the annotation cannot:

    help      what the option does (the flag's help; its default is added unless the help names one)
    metavar   the flag's placeholder (default: the field's name in capitals; none for a choice)
    flag      the flag, where it is not ``--`` and the public name with dashes
    parse     the function that reads the flag's text, where the annotation does not say it (it
              raises argparse.ArgumentTypeError, whose message argparse and the TOML reader show)
    minimum   a whole number's lowest value, 0 or 1 (default: any)
    weights   True for a tuple of weights: each finite and >= 0, not all 0 (a weighted mean of them
              would divide by zero or be NaN on every row)

Only argparse, dataclasses, math and typing are imported: declaring an option costs nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from typing import Any, Callable, Iterable, Literal, Mapping


class HelpFormatter(argparse.HelpFormatter):
    """Shows a flag's default once: only when it has one and its help does not already say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or action.default in (None, False, [], argparse.SUPPRESS) or "default" in text:
            return text
        return f"{text} (default: %(default)s)"


class FlagError(ValueError):
    """A flag's value that only the run can find wrong (a metric's name not in the run, a device this
    machine lacks). The message starts with the flag; ``flag`` names it, so that a face which took the
    value from elsewhere (a ``run --config`` file's key) can say where to fix it without reading the
    message."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(message)
        self.flag = flag


def positive_int(text: str) -> int:
    """A whole number >= 1 (counts and sizes; the flag is named by argparse's error)."""
    return _whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """A whole number >= 0 (a size where 0 turns something off)."""
    return _whole_number(text, 0)


def _whole_number(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {value}")
    return value


def non_negative_number(text: str) -> float:
    """A number >= 0 (a ratio where 0 turns something off)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not value >= 0.0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {value:g}")
    return value


def unit_fraction(text: str) -> float:
    """A share: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {value:g}")
    return value


def boolean(text: str) -> bool:
    """true/false, yes/no or 1/0."""
    value = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}.get(text.lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value


def items(text: str) -> list[str]:
    """The non-empty parts of comma-separated text."""
    return [part.strip() for part in text.split(",") if part.strip()]


def numbers(text: str) -> tuple[float, ...]:
    """Finite numbers separated by commas (float() reads "nan" and "inf", which no option means)."""
    try:
        values = tuple(float(x) for x in items(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected finite numbers separated by commas, got {text!r}")
    return values


def weight_problem(value: Any) -> str | None:
    """What is wrong with one weight of a weighted mean, or None: it must be a finite number >= 0 (a
    NaN or an infinity would make every mean NaN, a negative one a mean outside the values' range)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"a weight must be a number, got {value!r}"
    if not math.isfinite(value) or value < 0:
        return f"a weight must be a finite number >= 0, got {value:g}"
    return None


def weights_problem(values: Iterable[Any]) -> str | None:
    """What is wrong with the weights of a weighted mean, in a few words, or None: each as
    :func:`weight_problem` says, and one at least above 0 (else the mean divides by zero)."""
    values = list(values)
    problem = next(filter(None, map(weight_problem, values)), None)
    if problem is None and values and not any(value > 0 for value in values):
        return "at least one weight must be above 0"
    return problem


def named_numbers(text: str) -> dict[str, float]:
    """``name=weight`` pairs separated by commas (a TOML table is given as such text too), each weight
    finite and >= 0, not all 0 (:func:`weights_problem`)."""
    out = {}
    for part in items(text):
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise argparse.ArgumentTypeError(f"expected name=weight, got '{part}'")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected name=weight with a number, got '{part}'") from None
        problem = weight_problem(out[name.strip()])
        if problem:
            raise argparse.ArgumentTypeError(f"{part.strip()}: {problem}")
    problem = weights_problem(out.values())
    if problem:
        raise argparse.ArgumentTypeError(f"{text.strip()}: {problem}")
    return out


def value_reader(kind: Any, field: dataclasses.Field) -> tuple[Callable[[str], Any], tuple[Any, ...] | None]:
    """How a flag reads an option's text, from its annotation ``kind`` and its field: (the function,
    the choices or None). ``X | None`` is read as ``X``."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        kind = next(k for k in typing.get_args(kind) if k is not type(None))
    parse = field.metadata.get("parse")
    if typing.get_origin(kind) is Literal:
        choices = typing.get_args(kind)
        return parse or type(choices[0]), choices
    if parse:
        return parse, None
    if kind is bool:
        return boolean, None
    if kind is int:
        return {1: positive_int, 0: non_negative_int}.get(field.metadata.get("minimum"), int), None
    if kind is float:
        return float, None
    if typing.get_origin(kind) is tuple:
        return _numbers_like(field.default, weights=bool(field.metadata.get("weights"))), None
    return str, None


def _numbers_like(default: Any, *, weights: bool = False) -> Callable[[str], tuple[float, ...]]:
    """Numbers, as many as ``default`` has when it is a tuple; ``weights``: weights of a weighted mean
    (:func:`weights_problem`)."""
    count = len(default) if isinstance(default, tuple) else None

    def read(text: str) -> tuple[float, ...]:
        values = numbers(text)
        if count is not None and len(values) != count:
            raise argparse.ArgumentTypeError(f"expected {count} numbers, e.g. {','.join(f'{v:g}' for v in default)}")
        problem = weights_problem(values) if weights else None
        if problem:
            raise argparse.ArgumentTypeError(f"{text.strip()}: {problem}")
        return values
    return read


def flag_of(public: str, field: dataclasses.Field) -> str:
    """An option's flag: ``--<public name with dashes>``, unless its ``metadata["flag"]`` names another."""
    return field.metadata.get("flag") or "--" + public.replace("_", "-")


def default_of(field: dataclasses.Field) -> Any:
    """A field's default value (made by its factory where it has one; None where it has neither)."""
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def shown(value: Any) -> str:
    """A default as a flag would be given it: numbers of a tuple or pairs of a table comma-separated,
    None or an empty table as "none"."""
    if isinstance(value, tuple):
        return ",".join(f"{v:g}" for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "none"
    return "none" if value is None else str(value)


def add_field_arguments(group: Any, owner: type, options: Mapping[str, dataclasses.Field], *,
                        prefix: str = "") -> None:
    """A flag for each of ``options`` (public name -> field of the dataclass ``owner``): named by
    :func:`flag_of`, stored under the public name, read by :func:`value_reader`, its help the
    field's (after ``prefix``) with its default, unless the help names one. Every flag defaults to
    None, so a flag left out is told from one given (the ``run --config`` reader fills those)."""
    hints = typing.get_type_hints(owner)
    for public, field in options.items():
        parse, choices = value_reader(hints[field.name], field)
        text = prefix + field.metadata.get("help", field.name)
        if "default" not in text:
            text += f" (default {shown(default_of(field))})"
        group.add_argument(flag_of(public, field), dest=public, type=parse, choices=choices,
                           metavar=field.metadata.get("metavar", None if choices else field.name.upper()),
                           help=text.replace("%", "%%"))
