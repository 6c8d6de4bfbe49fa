"""The NIXL backends a vLLM engine's agent really runs, from ``kv_connector_extra_config.backends`` and its release.

- vLLM 0.9.0-0.10.2 never read the key: the NIXL worker creates its agent with ``NixlWrapper(uuid, None)``
  (v1/nixl_connector.py: 0.9.0 line 329, 0.10.2 line 437), i.e. NIXL's default ``nixl_agent_config`` (UCX), whatever
  the list says. From 0.11.0 (nixl_connector.py lines 472-481; nixl/worker.py 0.20.0 lines 105 and 177;
  nixl/base_worker.py 0.34.0 lines 683 and 797) the agent is created with ``nixl_agent_config(backends=...)`` when
  the list holds a name other than ``"UCX"`` (``non_ucx_backends``, compared case-sensitively), and the KV caches
  are registered with ``register_memory(descs, backends=self.nixl_backends)`` (0.11.0 line 816; 0.34.0 line 1944).
- NIXL's Python agent (src/api/python/_api.py ``nixl_agent.__init__``, the same in tags 0.2.0, 0.4.0, 0.6.0, 0.8.0 and
  at v1.4.0) creates only the backends whose plugin it finds (``bknd not in self.plugin_list``: "Skipping backend
  registration %s due to the missing plugin", a log line, no error), and ``register_memory`` looks each named
  backend up in ``self.backends[name]``: a name it skipped raises ``KeyError`` while the vLLM worker registers its
  KV caches, so the engine never starts. Plugin names are upper case and compared as written
  (:data:`PLUGIN_NAMES`): ``"ucx"``, ``"Mooncake"`` or ``"libfabric"`` is no plugin's name.
"""

from __future__ import annotations

from pdd_operator.vllm.versions import Version

#: The first release whose NIXL worker reads ``kv_connector_extra_config.backends`` (0.11.0 sdist).
BACKENDS_READ_SINCE: Version = (0, 11, 0)
#: What an agent runs where vLLM does not read the list, and vLLM's default where it does.
DEFAULT: tuple[str, ...] = ("UCX",)
#: The names NIXL's backend plugins register (``get_plugin_name`` / ``PLUGIN_NAME`` in ai-dynamo/nixl
#: src/plugins/*/ at v1.4.0: ucx, libfabric, cuda_gds, gds_mt, posix, obj, mooncake, uccl, hf3fs, gpunetio,
#: azure_blob, gusli, infinia; ``UCX_MO`` in older releases).
PLUGIN_NAMES: frozenset[str] = frozenset({
    "UCX", "UCX_MO", "LIBFABRIC", "GDS", "GDS_MT", "POSIX", "OBJ", "MOONCAKE", "UCCL", "HF3FS", "GPUNETIO",
    "AZURE_BLOB", "GUSLI", "INFINIA",
})


def written(value: object) -> list[str]:
    """The backend names a ``kv_connector_extra_config.backends`` value lists: a list's items as strings, a single
    string as one name, vLLM's default ``["UCX"]`` for anything else (absent, empty, not a list)."""
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, list) and value:
        return [str(b) for b in value]
    return list(DEFAULT)


def effective(value: object, version: Version | None) -> list[str]:
    """The backends the engine's NIXL agent is asked for: :func:`written`, or ``["UCX"]`` on a release before
    :data:`BACKENDS_READ_SINCE` (the list is not read there). ``version`` ``None`` (unknown) reads the list."""
    if version is not None and version < BACKENDS_READ_SINCE:
        return list(DEFAULT)
    return written(value)


def miscased(name: str) -> str | None:
    """The plugin name ``name`` means when it differs from one only in case (``"ucx"`` -> ``"UCX"``); ``None`` for
    an exact plugin name or a name no plugin has in any case."""
    upper = name.upper()
    return upper if upper in PLUGIN_NAMES and name != upper else None
