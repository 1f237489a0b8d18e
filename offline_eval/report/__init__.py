"""Reports: self-contained HTML, SVG charts, run comparison, CI gating and terminal summaries.

Submodules are imported lazily by their users so that ``import offline_eval.report`` stays cheap.
"""
