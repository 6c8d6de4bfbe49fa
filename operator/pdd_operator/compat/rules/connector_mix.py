"""One role transfers KV with NIXL, the other with a connector that has no NIXL inside."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule


@rule(
    id="kv-connector-mixed", family="connector", severity="error",
    fields=("spec.kvTransfer.connector",),
    source=("vllm distributed/kv_transfer/kv_connector/v1/nixl: a NIXL role hands KV over only through NIXL's own "
            "handshake and kv_transfer_params (remote_engine_id, remote_block_ids); a connector without a NIXL child "
            "(OffloadingConnector, LMCache, Mooncake) neither serves nor reads them, so no KV moves between the roles. "
            "vllm/config/vllm.py _post_init_kv_transfer_config (0.18.0, 0.24.0 sdists, 0.32.0 wheel) replaces the "
            "--kv-transfer-config with OffloadingConnector kv_both whenever --kv-offloading-size is set; "
            "vllm/utils/argparse_utils.py (0.32.0) keeps the last of a repeated flag, logging only 'Found duplicate keys'"),
    without_connector=True,
)
def check_connector_mixed(pair: PDPair) -> list[Violation]:
    """Both roles run vLLM's NIXL connector, not NIXL on one and another connector on the other.

    Runs where at least one role has a NIXL connector (``RoleConfig.nixl``) and another role a connector with no
    NIXL inside; a pair without NIXL on any role is out of these rules' scope ("not checked",
    :func:`pdd_operator.compat.engine.evaluate`), and a role with no connector at all is ``kv-connector-missing``'s.
    The message says why the engine runs that connector when its command line names NIXL too
    (``RoleConfig.connector_note``: ``--kv-offloading-size``, a repeated ``--kv-transfer-config``).
    """
    nixl = [r for r in pair.roles if r.nixl]
    if not nixl:
        return []
    # imported here as connector_registry imports p2p_nccl lazily for the same reason: the rules' order
    from pdd_operator.compat.rules.connector_registry import miscased

    out = []
    for r in pair.roles:
        if r.connector is None or r.nixl:
            continue
        if miscased(r.connector):
            # a vLLM name in another case does not start on any release: kv-connector-unregistered says so
            continue
        other = next(o for o in nixl if o is not r)
        why = f" ({r.connector_note})" if r.connector_note else ""
        out.append((
            f"{r.role}: runs {r.connector}{why}, a KV connector without NIXL, while {other.role} runs {other.connector}. "
            f"The {other.role}'s NIXL handshake and kv_transfer_params are never served or read by the {r.role}, so no "
            f"KV moves between the roles: the decode prefills every prompt again while the prefill keeps each request's "
            f"blocks until their lease runs out.",
            f"Give the {r.role} the same NIXL --kv-transfer-config as the {other.role} (for a CPU tier beside NIXL, a "
            "MultiConnector with a NixlConnector child and an OffloadingConnector child, not --kv-offloading-size or "
            "a second --kv-transfer-config).",
        ))
    return out
