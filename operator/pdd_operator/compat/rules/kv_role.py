"""A ``kv_role`` that contradicts the role the deployment gives the engine (its flags, labels or name).

The reader pairs such an engine by the deployment's own role (``compat.manifests._classify``), and this rule says
what the connector does with the ``kv_role`` it was given instead.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.compat.rules.mooncake import MOONCAKE

#: The ``kv_role`` each P/D role should have, and the one that says the opposite.
_EXPECTED = {"prefill": "kv_producer", "decode": "kv_consumer"}
_OPPOSITE = {"prefill": "kv_consumer", "decode": "kv_producer"}


def contradicting(r: RoleConfig) -> str | None:
    """``r``'s ``kv_role`` where it says the opposite of ``r.role`` (a prefill with ``kv_consumer``, a decode with
    ``kv_producer``), else ``None``."""
    kv_role = r.kv_transfer.get("kv_role")
    return kv_role if kv_role == _OPPOSITE.get(r.role) else None


def _fix(pair: PDPair, r: RoleConfig) -> str:
    return fix_for(pair, f"Set the {r.role}'s kv_role to {_EXPECTED[r.role]} (spec.kvTransfer).",
                   f"Set kv_role {_EXPECTED[r.role]} in the {r.role}'s --kv-transfer-config.")


@rule(
    id="kv-role-contradicts-role", family="connector", severity="error",
    fields=("spec.kvTransfer",),
    source=("MooncakeConnector asserts the kv_role on each request: a decode (do_remote_prefill) must not be "
            "kv_producer, a prefill (do_remote_decode) not kv_consumer (0.14.0 mooncake_connector.py lines 277 and "
            "367; 0.20.0 mooncake/mooncake_connector.py lines 556 and 607; 0.34.0 lines 1190 and 1247): the "
            "scheduler's AssertionError stops the engine on the first request. NixlConnector reads no kv_role in "
            "0.9.0-0.21.0 (nixl_connector.py: the proxy's kv_transfer_params do_remote_prefill / do_remote_decode "
            "decide each transfer) and from 0.24.0 only for its kv_both deprecation note, prefill context "
            "parallelism (nixl/connector.py 0.34.0 lines 112-128) and a push consumer's pipeline parallelism "
            "(nixl/base_worker.py 0.28.0 line 451): the transfer is unchanged"),
    example='a Deployment labelled prefill with {"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}',
    without_connector=True,
)
def check_kv_role_contradicts_role(pair: PDPair) -> list[Violation]:
    """An engine's ``kv_role`` agrees with the role its deployment gives it (flags, labels, names).

    MooncakeConnector: an error (the engine asserts its kv_role on the first request of its role and stops).
    NixlConnector: a warning (the kv_role is not what moves KV; a later release may read it). P2pNcclConnector pairs
    are judged by ``p2p-nccl-kv-role``; other connectors are not judged here."""
    out: list[Violation] = []
    for r in pair.roles:
        kv_role = contradicting(r)
        if kv_role is None or r.wrapper:
            continue
        if r.connector == MOONCAKE:
            flag = "do_remote_prefill" if r.role == "decode" else "do_remote_decode"
            out.append((
                f"The {r.role} runs MooncakeConnector with kv_role {kv_role}, the opposite of its role: on its first "
                f"request ({flag} from the proxy) the connector asserts that a {r.role} is not {kv_role} and the "
                "engine stops (AssertionError); no KV moves.", _fix(pair, r)))
        elif r.nixl:
            out.append((
                f"The {r.role} has kv_role {kv_role}, the opposite of its role. NixlConnector does not decide the "
                "transfer by kv_role (the proxy's kv_transfer_params do), so KV still moves, but the setting is "
                "misleading and newer releases read it (prefill context parallelism refuses kv_consumer from 0.34.0).",
                _fix(pair, r), "warning"))
    return out
