"""One evaluation sample and the error every bad input turns into."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

# Canonical field -> names accepted on input, in order of preference.
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "question": ("question", "user_input", "query"),
    "answer": ("answer", "response", "prediction"),
    "contexts": ("contexts", "retrieved_contexts", "retrieved"),
    "ground_truth": ("ground_truth", "reference", "ground_truths", "gold"),
    "reference_contexts": ("reference_contexts", "references", "gold_contexts"),
    "keypoints": ("keypoints", "key_points"),
    "conversation": ("conversation", "history", "messages"),
    "conversation_id": ("conversation_id", "conv_id", "dialog_id", "dialogue_id", "session_id", "thread_id"),
}

TEXT_FIELDS = ("question", "answer", "ground_truth")
LIST_FIELDS = ("contexts", "reference_contexts", "keypoints")

# A turn's speaker as datasets spell it -> the role it is read as. A role not here is an error: a
# conversation whose speakers cannot be told apart cannot be read as a history.
ROLES: dict[str, str] = {
    "user": "user", "human": "user", "customer": "user", "client": "user",
    "assistant": "assistant", "agent": "assistant", "ai": "assistant", "bot": "assistant",
    "model": "assistant", "gpt": "assistant", "system": "system", "tool": "tool",
}

# The two sides of a conversation written out as text, by the names that label nothing else an answer
# lists: "Model: X200", "System: Linux", "Client: Acme" or "Agent: J. Doe" are fields, and "User: admin"
# or "Assistant: Jane" alone can be too, so a turn is read only where both sides speak.
EXCHANGE_SPEAKERS: dict[str, tuple[str, ...]] = {"user": ("user", "human", "用户"),
                                                 "assistant": ("assistant", "ai", "助手")}
_SPEAKER_SIDE = {name: side for side, names in EXCHANGE_SPEAKERS.items() for name in names}
# A line that opens with a speaker's name and a colon ("User:", "**AI:**", "> 用户：").
_TURN = re.compile(r"^[ \t>*_#-]*(" + "|".join(sorted(map(re.escape, _SPEAKER_SIDE), key=len, reverse=True))
                   + r")[ \t*_]*[:：]", re.IGNORECASE | re.MULTILINE)


def exchange_span(text: str, start: int = 0) -> tuple[int, int] | None:
    """Where in ``text`` (from ``start``) a conversation is written out: from the first line opening
    with a speaker's name to the end of the last such line, when both sides of
    :data:`EXCHANGE_SPEAKERS` speak; else None."""
    lines = list(_TURN.finditer(text, start))
    if len({_SPEAKER_SIDE[m.group(1).lower()] for m in lines}) < 2:
        return None
    last = text.find("\n", lines[-1].start())
    return lines[0].start(), len(text) if last < 0 else last


def forged_turn(answer: str) -> tuple[str, str]:
    """``answer`` cut where an exchange written into it begins, and the text cut off ("" when none is).
    An answer is one turn, the assistant's reply: lines after its first in which both sides of a
    conversation speak (:data:`EXCHANGE_SPEAKERS`: "User: …" and "Assistant: …") are a conversation
    written into the answer (a planted exchange in which the grader is asked and answers Yes, or a model
    that went on to write the user's next turn), not something the answer says. The cut is at the first
    such line. A first line that names its speaker ("Assistant: Paris.") is the answer's own."""
    start = len(answer) - len(answer.lstrip())
    line_end = answer.find("\n", start)
    if line_end < 0:
        return answer, ""
    span = exchange_span(answer, line_end + 1)
    if span is None:
        return answer, ""
    return answer[:span[0]].rstrip(), answer[span[0]:].strip()


# Characters that move the cursor, recolour or retitle a terminal, ring its bell or end the line:
# C0 and C1 controls (ESC, BEL, CR, LF, ...), DEL, the Unicode line and paragraph separators and the
# bidirectional overrides that make text display in another order than it reads.
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every control character escaped the way ``repr`` writes it (``\\x1b``,
    ``\\n``, ``\\u202e``), so a value from a data file printed to a terminal shows as what it
    is and cannot rewrite the screen or break a one-line message."""
    return _UNPRINTABLE.sub(lambda match: ascii(match.group())[1:-1], text)


def described(value: Any) -> str:
    """A value from a data file as a one-line message shows it: a list or an object by its kind and size
    (its contents could run to pages), true and false as JSON writes them, anything else as ``repr``
    writes it, cut to 40 characters and :func:`printable`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)}"
    if isinstance(value, Mapping):
        return "an object"
    text = repr(value)
    return printable(text if len(text) <= 40 else text[:37] + "...")


class DataError(ValueError):
    """Bad input. The message is one line naming the file, the row (1-based) and the field.

    The message quotes values from the data (ids, keys, paths); it is made :func:`printable` here,
    where every such message is formed, so an id holding an escape sequence is shown escaped
    rather than sent to the terminal. ``source``, ``row`` and ``field`` keep the raw values.
    """

    def __init__(self, message: str, *, source: str | None = None, row: int | None = None,
                 field: str | None = None):
        where = ", ".join(
            part for part in (
                source,
                f"row {row}" if row is not None else None,
                f"field '{field}'" if field else None,
            ) if part
        )
        super().__init__(printable(f"{where}: {message}" if where else message))
        self.source, self.row, self.field = source, row, field


def _lacking(value: Any) -> bool:
    """None, a blank text, or a list of nothing else (:meth:`Sample.missing`)."""
    if isinstance(value, list):
        return all(_lacking(item) for item in value)
    return value is None or isinstance(value, str) and not value.strip()


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation: who spoke (``user``, ``assistant``, ``system`` or ``tool``) and
    what they said."""

    role: str
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass
class Sample:
    """A question, the RAG system's answer and retrieved contexts, and whatever reference exists.

    Fields a metric does not need may be None; a metric whose field is missing is *unscored* for
    this sample with the reason ``missing_field:<name>``, never a crash and never NaN.

    A turn of a chat carries ``conversation``: the turns up to the question the answer replies to
    (the question itself may be the last of them), and ``conversation_id``: samples sharing it are
    the turns of one conversation, in dataset order. :attr:`history` is what came before the
    question.
    """

    id: str
    question: str | None = None
    answer: str | None = None
    contexts: list[str] | None = None
    ground_truth: str | None = None
    reference_contexts: list[str] | None = None
    keypoints: list[str] | None = None
    language: str | None = None
    conversation: list[Turn] | None = None
    conversation_id: str | None = None
    row: int = 0  # 1-based position in the source file, for messages
    extra: dict[str, Any] = field(default_factory=dict)  # carried through to the output untouched

    def missing(self, names: tuple[str, ...] | list[str]) -> list[str]:
        """The names among ``names`` that this sample lacks: None, a text of nothing but white space (a
        blank answer is no answer: a judge would grade the blank), or a list of no item or only blank texts
        (``contexts: [""]`` holds no passage to verify against, as ``[]`` does not)."""
        return [name for name in names if _lacking(getattr(self, name))]

    @property
    def history(self) -> list[Turn]:
        """The turns before the question: the conversation less its last turn when that is the
        question asked by the user; [] without a conversation."""
        turns = list(self.conversation or [])
        if turns and turns[-1].role == "user" and turns[-1].content.strip() == (self.question or "").strip():
            turns.pop()
        return turns

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "question": self.question,
            "answer": self.answer,
            "contexts": self.contexts,
            "ground_truth": self.ground_truth,
            "reference_contexts": self.reference_contexts,
            "keypoints": self.keypoints,
            "language": self.language,
        }
        # only when present, so a sample without a conversation is written (and fingerprinted) as before
        if self.conversation is not None:
            out["conversation"] = [turn.to_dict() for turn in self.conversation]
        if self.conversation_id is not None:
            out["conversation_id"] = self.conversation_id
        return {**out, **self.extra}
