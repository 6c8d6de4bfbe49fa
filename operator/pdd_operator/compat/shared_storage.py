"""A pair of vLLM's V1 ``SharedStorageConnector`` (the example connector that moves KV through files) on the releases
whose connector was read.

``SharedStorageConnector`` (vllm/distributed/kv_transfer/kv_connector/v1/shared_storage_connector.py, read in the
0.9.0 and 0.10.1.1 sdists; registered by kv_connector/factory.py, 0.9.0 lines 108-111, until its 0.13.0 rename to
``ExampleConnector``) saves each layer's KV of a finished prefill as a safetensors file under
``kv_connector_extra_config.shared_storage_path`` (default ``/tmp``, 0.9.0 line 83), in a folder named after the md5 of
the prompt's token ids aligned to the block size (``_generate_foldername_debug``), and the other engine loads a
prompt's files only where that folder exists (``_found_match_for_request``, 0.9.0 lines 338-348): a prompt that finds
none is recomputed, so a different path, host or block size costs the transfer but fails nothing. ``kv_role`` only
chooses who saves and who loads. What it does not check is the loaded tensor against the engine's own cache:
``inject_kv_into_layer`` (0.9.0 lines 102-132, 0.10.1.1 lines 107-138) writes the file's ``[2, tokens, heads x head
size]`` tensor into the paged cache with ``dst[:, slot_mapping, ...] = src``, which raises where the per-rank heads
(TP), the model or the element type (``--dtype``, ``--kv-cache-dtype``) differ.

A pair whose roles both run it (no wrapper) on a release of :data:`SHARED_STORAGE_JUDGED` under the V1 engine, with
the same model, --dtype, --kv-cache-dtype and TP, therefore moves KV or falls back to recomputing, and is judged by the
engine-alone rules (:func:`judged_shared_storage_pair`, ``compat.engine.evaluate``): ok where none fails. Any other
pair of it (roles that differ in those, a wrapper, a release not read, the renamed ``ExampleConnector``) stays "not
checked".
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair

SHARED_STORAGE = "SharedStorageConnector"
#: The releases whose SharedStorageConnector was read (the 0.9.0 and 0.10.1.1 sdists: the same save, match and inject
#: code; 0.9.1-0.10.1 lie between them), as ``[first, end)``.
SHARED_STORAGE_JUDGED = ((0, 9, 0), (0, 10, 2))
#: What must be equal in both roles: the shape and element type of the KV tensor one saves and the other injects.
_SAME = ("model", "dtype", "kv_cache_dtype", "tp")


def judged_shared_storage_pair(pair: PDPair) -> bool:
    """Both roles run :data:`SHARED_STORAGE` (no wrapper) under the V1 engine (``VLLM_USE_V1`` not ``0``) of a known
    release of :data:`SHARED_STORAGE_JUDGED`, with the same model, --dtype, --kv-cache-dtype and TP: such a pair is
    judged by the engine-alone rules (ok where none fails), not "not checked"."""
    version = pair.version
    return (version is not None and SHARED_STORAGE_JUDGED[0] <= version < SHARED_STORAGE_JUDGED[1]
            and all(r.connector == SHARED_STORAGE and not r.wrapper and r.version == version
                    and str(r.env.get("VLLM_USE_V1", "")).strip() != "0" for r in pair.roles)
            and all(getattr(pair.prefill, k) == getattr(pair.decode, k) for k in _SAME))
