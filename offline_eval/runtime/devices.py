"""What a ``--device`` may name: the devices every local backend takes."""

from __future__ import annotations

DEVICE_FORMS = "cpu, cuda or cuda:N"


def device_problem(device: str) -> str | None:
    """Why ``device`` is no --device value (None: it is one): the devices are cpu, cuda and cuda:N,
    those every local backend takes (torch's mps or xla would fail only once the weights had loaded,
    naming no flag). Whether this machine has it is :func:`offline_eval.run.config.check_device`'s."""
    kind, sep, index = str(device).partition(":")
    if device in ("cpu", "cuda") or (kind == "cuda" and sep and index.isascii() and index.isdigit()):
        return None
    return f"expected {DEVICE_FORMS}, got {device!r}"
