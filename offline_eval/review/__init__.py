"""``offline-eval review RUN_FOLDER``: a labelling page for domain experts, served on 127.0.0.1 only.

:mod:`.session` reads the run folder, keeps the seeded order (``review.json``) and records labels
(``labels.jsonl``, :mod:`offline_eval.people.labels`); :mod:`.server` serves :mod:`.page` and its JSON;
:mod:`offline_eval.cli.review` is the subcommand. docs/review.md says how to use it and why it samples as
it does.
"""

from offline_eval.review.session import REVIEW_FILE, Review, ReviewError, seeded_order

__all__ = ["REVIEW_FILE", "Review", "ReviewError", "seeded_order"]
