"""The people side: a few expert labels turned into what the experts would say.

:mod:`.labels` reads and writes people's labels (``labels.jsonl``); :mod:`.calibration` fits a judge's
threshold per metric on them, which a run applies to its rows; :mod:`.estimate` gives, from the labels
and a run's scores, what the experts would say of every row. :mod:`.agreement` scores a labelled dataset
and measures how far the judge agrees with people (for the ``agreement`` and ``calibrate`` commands,
:mod:`offline_eval.cli.agreement`); :mod:`offline_eval.cli.estimate` is the ``estimate`` command.

Importing this package loads none of its modules: a run reads calibrations without loading the commands.
"""
