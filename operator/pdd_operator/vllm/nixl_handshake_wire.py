"""What the NIXL handshake puts on the wire, by vLLM release: whether a decode of one release can read a prefill of
another at all.

In pull mode the decode's NIXL worker dials the prefill's side channel and decodes the reply with msgspec
(``_nixl_handshake``: ``vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py`` up to 0.19.x,
``nixl/worker.py`` from 0.20.0). The reply is a msgpack map of the prefill release's struct:

- up to 0.12.0 the bare ``NixlAgentMetadata`` (a ``msgspec.Struct`` up to 0.11.0, a dataclass from 0.11.1), read
  with ``msgspec.msgpack.Decoder(NixlAgentMetadata)`` (0.9.0 nixl_connector.py line 431, 0.11.0 line 660, 0.12.0
  line 1003);
- from 0.13.0 a ``NixlHandshakePayload`` {compatibility_hash, agent_metadata_bytes} wrapping the encoded
  ``NixlAgentMetadata`` (0.13.0 nixl_connector.py lines 127-142 and 1004-1010; 0.20.0 nixl/metadata.py line 54 and
  nixl/worker.py line 404); the inner metadata is decoded after the hash check (0.13.0 line 1042, 0.20.0 worker.py
  line 444).

msgspec skips keys the target does not define and raises ``ValidationError`` ("Object missing required field") for
a field without a default that the map lacks: so the handshake fails exactly where the decode's struct requires a
field the prefill's struct does not send. :data:`REQUIRED` lists the required fields of both structs with the first
and last release read that has them (AST of every sdist 0.9.0-0.34.0 in :data:`READ`; the optional fields added from
0.29.0, ``dcp_size`` ... ``layer_group_ids``, never fail a decode and are left out).
"""

from __future__ import annotations

from pdd_operator.vllm.versions import Version, fmt

#: The releases whose NIXL connector was read, oldest first.
READ: tuple[Version, ...] = (
    (0, 9, 0), (0, 9, 1), (0, 9, 2), (0, 10, 0), (0, 10, 1), (0, 10, 2), (0, 11, 0), (0, 11, 1), (0, 11, 2),
    (0, 12, 0), (0, 13, 0), (0, 14, 0), (0, 14, 1), (0, 16, 0), (0, 17, 0), (0, 17, 1), (0, 18, 0), (0, 18, 1),
    (0, 19, 0), (0, 19, 1), (0, 20, 0), (0, 20, 1), (0, 20, 2), (0, 21, 0), (0, 22, 0), (0, 22, 1), (0, 23, 0),
    (0, 24, 0), (0, 25, 0), (0, 25, 1), (0, 26, 0), (0, 27, 0), (0, 27, 1), (0, 28, 0), (0, 29, 0), (0, 30, 0),
    (0, 31, 0), (0, 32, 0), (0, 33, 0), (0, 34, 0),
)

#: (struct, field) -> the spans (first release read, last release read) in which the field is required.
#: 0.10.1.1 is read as (0, 10, 1).
REQUIRED: dict[tuple[str, str], tuple[tuple[Version, Version], ...]] = {
    ("NixlHandshakePayload", "compatibility_hash"): (((0, 13, 0), (0, 34, 0)),),
    ("NixlHandshakePayload", "agent_metadata_bytes"): (((0, 13, 0), (0, 34, 0)),),
    ("NixlAgentMetadata", "engine_id"): (((0, 9, 0), (0, 34, 0)),),
    ("NixlAgentMetadata", "agent_metadata"): (((0, 9, 0), (0, 34, 0)),),
    ("NixlAgentMetadata", "kv_caches_base_addr"): (((0, 9, 0), (0, 34, 0)),),
    ("NixlAgentMetadata", "num_blocks"): (((0, 9, 0), (0, 34, 0)),),
    ("NixlAgentMetadata", "tp_size"): (((0, 9, 1), (0, 9, 1)),),
    ("NixlAgentMetadata", "block_len"): (((0, 9, 1), (0, 10, 2)),),
    ("NixlAgentMetadata", "attn_backend_name"): (((0, 9, 1), (0, 12, 0)), ((0, 20, 0), (0, 34, 0))),
    ("NixlAgentMetadata", "kv_cache_layout"): (((0, 10, 1), (0, 34, 0)),),
    ("NixlAgentMetadata", "block_lens"): (((0, 11, 0), (0, 34, 0)),),
    ("NixlAgentMetadata", "device_id"): (((0, 11, 1), (0, 34, 0)),),
    ("NixlAgentMetadata", "block_size"): (((0, 11, 1), (0, 34, 0)),),
    ("NixlAgentMetadata", "ssm_sizes"): (((0, 18, 0), (0, 34, 0)),),
    ("NixlAgentMetadata", "physical_blocks_per_logical_kv_block"): (((0, 21, 0), (0, 34, 0)),),
    ("NixlAgentMetadata", "block_strides"): (((0, 29, 0), (0, 34, 0)),),
}

#: The first release read whose reply wraps the metadata in ``NixlHandshakePayload``.
PAYLOAD_SINCE: Version = (0, 13, 0)


def _required_at(release: Version) -> frozenset[tuple[str, str]]:
    return frozenset(k for k, spans in REQUIRED.items() if any(a <= release <= b for a, b in spans))


def required_fields(version: Version) -> frozenset[tuple[str, str]] | None:
    """The (struct, field) pairs the handshake of ``version`` requires, or ``None`` where it is not known: past the
    newest release read, before the oldest, or between two releases read that disagree (0.15.x between 0.14.1 and
    0.16.0 agrees, so it is known)."""
    release = version[:3]
    if release in READ:
        return _required_at(release)
    if release < READ[0] or release > READ[-1]:
        return None
    below = max(r for r in READ if r < release)
    above = min(r for r in READ if r > release)
    low, high = _required_at(below), _required_at(above)
    return low if low == high else None


def unreadable_reply(decode: Version | None, prefill: Version | None, *, inner: bool = True) -> str | None:
    """Why a decode of vLLM ``decode`` cannot decode the handshake reply of a prefill of vLLM ``prefill``, or
    ``None`` where it can (or where either release is not known here).

    inner: also judge the inner ``NixlAgentMetadata`` where both wrap it in ``NixlHandshakePayload`` (pass ``False``
    where the decode's compatibility-hash check refuses a version mismatch before it decodes the inner metadata).
    Returns a sentence naming the missing fields and the releases, for a finding message.
    """
    if decode is None or prefill is None:
        return None
    need, sent = required_fields(decode), required_fields(prefill)
    if need is None or sent is None:
        return None
    def layer(fields: frozenset[tuple[str, str]], struct: str) -> set[str]:
        return {f for s, f in fields if s == struct}

    def outer(version: Version, fields: frozenset[tuple[str, str]]) -> tuple[str, set[str]]:
        struct = "NixlHandshakePayload" if version[:3] >= PAYLOAD_SINCE else "NixlAgentMetadata"
        return struct, layer(fields, struct)

    struct, needed = outer(decode, need)
    missing = needed - outer(prefill, sent)[1]
    if not missing and inner and struct == "NixlHandshakePayload":
        struct, missing = "NixlAgentMetadata", layer(need, "NixlAgentMetadata") - layer(sent, "NixlAgentMetadata")
    if not missing:
        return None
    return (f"the decode (vLLM {fmt(decode)}) decodes the prefill's handshake reply as {struct} and requires "
            f"{', '.join(sorted(missing))}, which the reply of vLLM {fmt(prefill)} does not carry: msgspec raises "
            "ValidationError 'Object missing required field' at the first handshake and no KV moves")
