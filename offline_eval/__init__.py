"""offline-eval: RAG evaluation that never leaves the machine.

Importing the package puts the Hugging Face stack in offline mode before any of it is imported,
so no code path can reach a hub or send telemetry.
"""

from offline_eval.offline import enforce_offline

enforce_offline()

__version__ = "0.1.0"

_API = ("evaluate", "load_models", "compare", "EvalResult", "Models")


def __getattr__(name: str):
    """``offline_eval.evaluate`` and friends (offline_eval.api), imported on first use."""
    if name in _API:
        from offline_eval import api

        return getattr(api, name)
    raise AttributeError(f"module 'offline_eval' has no attribute {name!r}")
