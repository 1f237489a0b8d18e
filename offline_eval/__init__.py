"""offline-eval: RAG evaluation that never leaves the machine.

Importing the package puts the Hugging Face stack in offline mode before any of it is imported,
so no code path can reach a hub or send telemetry.
"""

from offline_eval.offline import enforce_offline

enforce_offline()

__version__ = "0.1.0"
