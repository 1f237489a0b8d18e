"""``python -m offline_eval.cli``: the ``offline-eval`` program."""

import sys

from offline_eval.cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
