"""The judging steps every judge-based metric shares, below ``metrics/`` and above ``runtime/``: asking for
JSON (:mod:`.asking`, reading it: :mod:`.parsing`), the verdict rules (:mod:`.verdicts`), the contexts'
windows (:mod:`.windows`), an answer's statements (:mod:`.statements`) and the settings they read
(:mod:`.settings`). The criteria, the test-set pipeline and answering read them as the metrics do; nothing
here imports a metric, a run or a face."""
