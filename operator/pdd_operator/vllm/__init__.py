"""What pdd-operator knows about vLLM itself, below both ``render`` and ``compat``.

- ``versions``: vLLM version strings and image tags -> ``(major, minor, patch)``.
- ``args``: ``vllm serve`` argv parsing (flags, JSON flags, env-passed arguments).
- ``architectures``: model families and their KV-cache traits (hybrid SSM, MLA, sliding window).
- ``model_config``: facts from a model's config.json, merged with ``spec.model``.
- ``must_match``: the settings prefill and decode must share, once, with the vLLM code that compares them.

Nothing here imports ``render``, ``compat``, kopf or kubernetes.
"""
