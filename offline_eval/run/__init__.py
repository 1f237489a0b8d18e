"""Runs: a dataset × metrics scored into a run folder, above the engine and the metrics.

``config`` holds one :class:`~offline_eval.run.config.RunConfig` (the commands make theirs from their
flags, the API from its keywords) and builds the run every command executes (:func:`~offline_eval.run.config.build_run`); ``execute``
runs it (:func:`~offline_eval.run.execute.run_dataset`, for the CLI and the API alike); ``runner``
scores it window by window in this process, ``ray_engine`` shards it over replicas on a Ray cluster;
both feed their finished rows to one ``runner.RunSink`` (fingerprint, resume, results, summary) over the
run folder (``folder``: lock, earlier runs kept).
"""
