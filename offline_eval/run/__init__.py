"""Runs: a dataset × metrics scored into a run folder, above the engine and the metrics.

``config`` turns flags, a TOML file or keywords into one :class:`~offline_eval.run.config.RunConfig`
and builds the run every command executes (:func:`~offline_eval.run.config.build_run`); ``runner``
scores it window by window in this process, ``ray_engine`` shards it over replicas on a Ray cluster;
both feed their finished rows to one ``runner.RunSink`` (fingerprint, resume, results, summary) over the
run folder (``folder``: lock, earlier runs kept).
"""
