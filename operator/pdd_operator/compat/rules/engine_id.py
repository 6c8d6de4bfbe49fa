"""A NIXL engine id written into ``--kv-transfer-config`` and shared by several instances of a role."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.expansion import unknown_names


def _dialed(r: RoleConfig) -> bool:
    """Whether the other role finds ``r``'s engine by its engine id: the prefill in pull mode (the decode reads its
    blocks), the decode where it is written to (push mode, or ``bidirectional_kv_xfer``, in which the prefill reads a
    later turn from the decode)."""
    if r.role == "prefill":
        return not r.push
    return r.push or bool(r.extra.get("bidirectional_kv_xfer"))


@rule(
    id="nixl-engine-id-shared", family="connector", severity="error",
    fields=("spec.prefill.kvTransfer", "spec.decode.kvTransfer"),
    source=("vllm KVTransferConfig draws engine_id = uuid4() only when none is given (config.py 0.9.1 lines "
            "3705-3706; config/kv_transfer.py 0.34.0 line 133), and appends only _dp<rank> per data-parallel rank "
            "(v1/engine/core.py 0.9.1 lines 786-791). The NIXL worker that reads or writes a remote engine keys it by "
            "that id: it handshakes only with an id it does not know yet and otherwise reuses the agents it holds "
            "for it (0.9.1 nixl_connector.py lines 334, 884-885; 0.23.0 nixl/worker.py lines 295, 1956, 2101, 2170; "
            "0.34.0 nixl/pull_worker.py line 152, base_worker.py line 833)"),
    example="a Dynamo prefill component of replicas 2 whose --kv-transfer-config writes engine_id",
)
def check_engine_id_shared(pair: PDPair) -> list[Violation]:
    """A role whose engines the other role reaches by engine id (:func:`_dialed`) and that runs several instances
    (``replicas`` > 1 of its pod template or component) does not write one literal ``engine_id`` into their
    ``--kv-transfer-config``: every instance would announce the same id, and once the other side has met one of
    them it reads (or writes) the blocks of every other instance's requests through that first instance's agents
    and memory: wrong KV, or transfers that fail, and the real owner's blocks held until the abort timeout. A
    data-parallel engine is one instance (vLLM suffixes each rank's id). An id whose value is not in the files
    is not judged."""
    out: list[Violation] = []
    for r in pair.roles:
        engine_id = r.kv_transfer.get("engine_id")
        if (not r.nixl or not isinstance(engine_id, str) or not engine_id or unknown_names(engine_id)
                or r.replicas is None or r.replicas < 2 or not _dialed(r)):
            continue
        other = "decode" if r.role == "prefill" else "prefill"
        out.append((
            f"{r.role}: its {r.replicas} instances all start with engine_id {engine_id!r} written in "
            f"--kv-transfer-config, and vLLM keeps a written engine_id as it is (only a missing one is drawn at "
            f"random). The {other} keys the remote NIXL agents by engine id and handshakes only with an id it has "
            f"not met, so after meeting one {r.role} instance it serves the requests of every other one through "
            "that first instance's agents and memory regions: it moves the wrong blocks (or fails), and the other "
            f"{r.role} instances' blocks stay held until the abort timeout.",
            fix_for(pair, "Leave engine_id out of the KV transfer settings.",
                    f"Drop engine_id from the {r.role}'s --kv-transfer-config (vLLM then draws one per instance), "
                    "or give each instance its own."),
        ))
    return out
