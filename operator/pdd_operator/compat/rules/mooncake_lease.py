"""MooncakeConnector's KV lease (``kv_connector_extra_config.kv_lease_duration``, vLLM 0.34.0): a value vLLM refuses
as the engine starts, and a lease that only one role of a pair sets.

vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py 0.34.0 (the key is not read in 0.33.0 or
before): ``_get_kv_lease_duration`` (l.703-712) returns ``None`` for an unset key, else ``float(value)``, and raises
ValueError for a value <= 0; the scheduler (l.1053) and the worker (l.1476) call it as they are built. The decode's
scheduler then lists each request whose KV the prefill holds (l.1140-1153) and sends renewals every
``kv_lease_duration / 6`` seconds (l.1271-1290, ``_send_heartbeat_to_worker`` l.2947-2968); the prefill frees a
finished request's blocks ``kv_lease_duration`` seconds after it finishes, or ``VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT``
(480 s by default, envs.py l.2017-2018) where it has no lease (``record_send_reqs`` l.3009-3011), a renewal moving the
deadline to ``now + kv_lease_duration * 2 / 3`` (``_renew_kv_leases`` l.1718-1731). A prefill without a lease answers
every renewal with an error that the decode only logs ("Set the same kv_lease_duration on prefill and decode
instances", l.1718-1723 and l.2961-2968); a decode without one never renews. Neither stops a transfer by itself:
a pull fails only where the request waited longer than the prefill holds its blocks, which the manifest cannot tell,
so a one-sided lease is a warning.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.compat.rules.mooncake import runs_mooncake
from pdd_operator.vllm.versions import Version, fmt

#: The first release whose MooncakeConnector reads ``kv_lease_duration`` (absent from the 0.33.0 sdist's
#: mooncake_connector.py, ``_get_kv_lease_duration`` at l.703 of 0.34.0's).
KV_LEASE_SINCE: Version = (0, 34, 0)
#: The newest release read (inclusive).
KV_LEASE_READ_THROUGH: Version = (0, 34, 0)
#: ``VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT``'s default (envs.py 0.34.0 l.280 and l.2017-2018), in seconds.
ABORT_REQUEST_TIMEOUT_S = 480


def lease_seconds(value: object) -> float | str | None:
    """``kv_lease_duration`` as 0.34.0's ``_get_kv_lease_duration`` reads it: ``None`` where unset (or ``None``), the
    seconds (a positive float), or why vLLM raises ValueError (a string). Pure."""
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value) if value else "kv_lease_duration must be positive, got 0.0."
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return f"float() refuses {value!r}"
    return seconds if seconds > 0 else f"kv_lease_duration must be positive, got {seconds}."


def _reads_lease(version: Version | None) -> bool | None:
    """Whether release ``version`` reads the key (``None``: not known, or newer than the releases read)."""
    if version is None or version > KV_LEASE_READ_THROUGH:
        return None
    return version >= KV_LEASE_SINCE


@rule(
    id="mooncake-kv-lease-invalid", family="connector", severity="error",
    fields=("spec.kvTransfer",), in_manifest=("args",),
    source=("vllm distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py 0.34.0 "
            "_get_kv_lease_duration l.703-712 (float(), ValueError for <= 0), called by the scheduler l.1053 and the "
            "worker l.1476"),
    example='{"kv_connector":"MooncakeConnector","kv_role":"kv_both","kv_connector_extra_config":'
            '{"kv_lease_duration":0}} on v0.34.0',
    without_connector=True, one_engine=True,
)
def check_mooncake_kv_lease_invalid(pair: PDPair) -> list[Violation]:
    """A MooncakeConnector engine's ``kv_lease_duration`` is a positive number where vLLM reads it (0.34.0): else its
    connector raises ValueError as the engine starts. On a release not known here, a warning."""
    out: list[Violation] = []
    for r in pair.roles:
        if not runs_mooncake(r) or not isinstance(r.extra, dict):
            continue
        why = lease_seconds(r.extra.get("kv_lease_duration"))
        reads = _reads_lease(r.version)
        if not isinstance(why, str) or reads is False:
            continue
        fix = fix_for(pair, "Give spec.kvTransfer.extraConfig.kv_lease_duration as a positive number of seconds (or "
                      "leave it out).",
                      f"Give kv_lease_duration in the {r.role}'s kv_connector_extra_config as a positive number of "
                      "seconds (or leave it out).")
        if reads:
            out.append((f"{r.role}: MooncakeConnector kv_lease_duration: {why}; vLLM {fmt(r.version)} raises "
                        "ValueError while building the connector, so the engine never serves.", fix))
        else:
            out.append((f"{r.role}: MooncakeConnector kv_lease_duration: {why}. vLLM 0.34.0 raises ValueError for it "
                        "as the engine starts (older releases ignore the key); the vLLM version is not known here.",
                        fix, "warning"))
    return out


@rule(
    id="mooncake-kv-lease-one-sided", family="connector", severity="warning",
    fields=("spec.kvTransfer",), in_manifest=("args",),
    source=("vllm distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py 0.34.0: decode renewals "
            "every kv_lease_duration / 6 (l.1271-1290, l.2947-2968), the prefill's hold of kv_lease_duration or "
            "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT (l.3009-3011), renewals refused without a lease (l.1718-1723)"),
    example="kv_lease_duration: 30 in the decode's kv_connector_extra_config, none in the prefill's, on v0.34.0",
    since=KV_LEASE_SINCE, without_connector=True,
)
def check_mooncake_kv_lease_one_sided(pair: PDPair) -> list[Violation]:
    """Both roles of a MooncakeConnector pair set ``kv_lease_duration`` or neither does, and the prefill's lease
    outlasts the decode's renewal period.

    Warnings only: with a lease on the decode alone the prefill refuses every renewal and frees the blocks after its
    fixed timeout; with one on the prefill alone the blocks are freed ``kv_lease_duration`` seconds after the prefill
    and never renewed; a prefill lease shorter than a quarter of the decode's lapses between renewals. Each fails a
    pull only for a request that waits on the decode longer than that, which depends on the load."""
    if not all(runs_mooncake(r) for r in pair.roles) or len(pair.roles) != 2:
        return []
    if any(_reads_lease(r.version) is False for r in pair.roles):
        return []
    prefill, decode = pair.roles
    p, d = (lease_seconds(r.extra.get("kv_lease_duration")) if isinstance(r.extra, dict) else None
            for r in (prefill, decode))
    if isinstance(p, str) or isinstance(d, str) or p == d:
        return []
    where = fix_for(pair, "Set kv_lease_duration once, in spec.kvTransfer.extraConfig.",
                    "Set the same kv_lease_duration in the prefill's and the decode's kv_connector_extra_config.")
    if p is None:
        return [(f"MooncakeConnector kv_lease_duration is {d:g} s on the decode but not set on the prefill: the "
                 "prefill answers each lease renewal with an error ('kv_lease_duration is not set on this prefill "
                 f"instance', logged once by the decode) and frees a request's KV blocks {ABORT_REQUEST_TIMEOUT_S} s "
                 "(VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT) after its prefill whatever the decode asks, so a request "
                 "waiting longer on the decode loses its KV.", where)]
    if d is None:
        return [(f"MooncakeConnector kv_lease_duration is {p:g} s on the prefill but not set on the decode: the decode "
                 f"never renews the lease, so the prefill frees a request's KV blocks {p:g} s after its prefill and a "
                 "request that waits longer on the decode fails its pull ('KV lease ... expired').", where)]
    if p * 2 / 3 < d / 6:
        return [(f"MooncakeConnector kv_lease_duration differs: {p:g} s on the prefill, {d:g} s on the decode. The "
                 f"decode renews every {d / 6:g} s and each renewal holds the blocks {p * 2 / 3:g} s more, so the "
                 "lease lapses between renewals and a request waiting on the decode can lose its KV.", where)]
    return []
