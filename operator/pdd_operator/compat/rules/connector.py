"""The KV connector: both roles run a NIXL connector that their vLLM version ships."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.kv_transfer_config import (
    FIELDS_READ_UNTIL,
    REMOVED_FIELDS_REFUSED_SINCE,
    REMOVED_IN_0_32,
    UNKNOWN_FIELDS_REFUSED_SINCE,
)
from pdd_operator.vllm.transfer_mode import PUSH_CONNECTOR_SINCE
from pdd_operator.vllm.versions import fmt, fmt_line


@rule(
    id="kv-connector-missing", family="connector", severity="error",
    fields=("spec.kvTransfer.connector",),
    source=("vllm v1 core: without --kv-transfer-config no KV connector is created, and kv_transfer_params in a "
            "request are ignored ('Got kv_transfer_params, but no KVConnector found'), so decode recomputes every "
            "prompt (kserve#5987, dynamo#11467); Dynamo >= 1.0 dynamo.vllm (components/src/dynamo/vllm/args.py) refuses "
            "to start a prefill worker without --kv-transfer-config"),
    without_connector=True, any_release=True,
)
def check_connector_present(pair: PDPair) -> list[Violation]:
    """Every engine of a prefill/decode topology has a KV connector.

    Judged on any release (``Rule.any_release``) and beside any connector on the other role, a platform plugin's
    included (TPUConnector from tpu_inference): an engine built without ``--kv-transfer-config`` has no connector on
    every release (vLLM creates one only from a KVTransferConfig: vllm/distributed/kv_transfer/kv_transfer_state.py
    ``ensure_kv_transfer_initialized``, 0.12.0 lines 51-64, 0.23.0 lines 65-78, 0.34.0 lines 73-83: nothing without a
    kv_transfer_config), so it neither sends nor reads KV whatever its counterpart's connector would do.

    A Dynamo vLLM worker (``launcher`` ``dynamo.vllm``) reaches this rule without a connector only on a runtime that
    no longer adds NixlConnector itself (Dynamo >= 1.0.0,
    :data:`~pdd_operator.compat.dynamo_worker_flags.CONNECTOR_REJECTED_SINCE`): :func:`_dynamo_worker_without_connector`
    says what that worker does. An engine whose ``--kv-transfer-config`` is given but is no JSON object has no
    connector here only because the value cannot be read: vLLM's parser refuses it (exit 2), so the finding says that
    and how to write it (:func:`unparsable_kv_transfer_config`), not "add a connector"."""
    out = []
    for r in pair.roles:
        if r.connector is None:
            if (unread := unparsable_kv_transfer_config(r.errors)) is not None:
                out.append(_unparsable(pair, r, unread))
                continue
            if r.launcher == "dynamo.vllm":
                out.append(_dynamo_worker_without_connector(r.role))
                continue
            kv_role = "kv_producer" if r.role == "prefill" else "kv_consumer"
            out.append((
                f"{r.role}: the engine runs in a prefill/decode topology but has no KV connector (no "
                "--kv-transfer-config): it never receives KV from the other role, so decode recomputes every "
                "prompt (or prefill never hands KV over) while every request still succeeds. " + _LATER,
                fix_for(pair, "Set spec.kvTransfer.connector (the operator renders it on both roles).",
                        f"Add --kv-transfer-config '{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"{kv_role}\"}}' "
                        f"to the {r.role} container{_named(r)}."),
            ))
    return out


@rule(
    id="dynamo-connector-assumed", family="connector", severity="warning",
    fields=("spec.kvTransfer.connector",),
    source=("ai-dynamo dynamo/vllm/args.py per release: before 1.0 the worker builds its connector from --connector "
            "(default nixl; 0.9.1 wheel l.138-144, create_kv_transfer_config l.509-556); from 1.0.0 it adds none and a "
            "prefill worker without --kv-transfer-config raises ValueError (1.0.0 l.192-207; every release read to "
            "1.6.1 the same); pdd_operator/compat/dynamo_engine_defaults.py added_connector, "
            "dynamo_worker_flags.py CONNECTOR_REJECTED_SINCE"),
    without_connector=True, any_release=True,
    example="python3 -m dynamo.vllm --model M --is-prefill-worker (no --kv-transfer-config) on my.io/dynamo:custom",
)
def check_dynamo_connector_assumed(pair: PDPair) -> list[Violation]:
    """A Dynamo vLLM worker that names no KV connector runs on a runtime image whose Dynamo release tells which one
    it gets (NixlConnector by default before Dynamo 1.0, none from 1.0).

    Where the release is not known (a custom image, a ``-dev`` tag), the worker is judged with the pre-1.0 default
    (:func:`~pdd_operator.compat.dynamo_engine_defaults.added_connector`) and this warning says so; where that
    choice decides the verdict (no error found either way on the pre-1.0 reading, while from 1.0 a prefill worker
    refuses to start) :func:`pdd_operator.compat.engine.evaluate` reports the pair "not checked" for it instead."""
    return [(f"{r.role}: {r.connector_assumed}.",
             f"Add --kv-transfer-config '{_DYNAMO_KV}' (or the connector you mean) to the {r.role} worker's args, or "
             "run a Dynamo vllm-runtime image whose tag names its release (nvcr.io/nvidia/ai-dynamo/vllm-runtime:X.Y.Z).")
            for r in pair.roles if r.connector_assumed]


@rule(
    id="dynamo-kv-transfer-config-overwritten", family="connector", severity="warning",
    fields=("spec.kvTransfer.connector",),
    source=("ai-dynamo dynamo/vllm/args.py overwrite_args: kv_transfer_config set among the worker's defaults whatever "
            "--kv-transfer-config gave (0.4.0 l.204-245, 0.4.1 l.211-281 with ENABLE_LMCACHE); from 0.5.0 "
            "create_kv_transfer_config keeps the user's (0.5.0 l.279-291); pdd_operator/compat/dynamo_engine_defaults.py "
            "overwritten_connector, KV_TRANSFER_OVERWRITTEN"),
    without_connector=True, any_release=True,
    example="python3 -m dynamo.vllm --is-prefill-worker --kv-transfer-config {...kv_producer...} on vllm-runtime:0.4.1",
)
def check_dynamo_kv_transfer_overwritten(pair: PDPair) -> list[Violation]:
    """A Dynamo vLLM worker runs with the --kv-transfer-config it gives (Dynamo 0.4.x replaces it with its own).

    Where the worker's Dynamo release is 0.4.0 or 0.4.1, every other rule judged the config Dynamo builds (NixlConnector
    ``kv_both``, or LMCache's with ``ENABLE_LMCACHE`` on 0.4.1) and this warning says the user's was dropped."""
    return [(f"{r.role}: {r.connector_overwritten}.",
             f"Drop --kv-transfer-config from the {r.role} worker's args (Dynamo 0.4.x ignores it), or run a Dynamo "
             "vllm-runtime image of 0.5.0 or later, which uses it.")
            for r in pair.roles if r.connector_overwritten]


_LATER = ("The NIXL rules (handshake, block sizes, side channel, parallelism across roles) are checked once both roles "
          "have a connector.")

#: The KV transfer config Dynamo's vLLM worker asks for in its own error text (args.py, below).
_DYNAMO_KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _dynamo_worker_without_connector(role: str) -> Violation:
    """(message, fix) for a ``dynamo.vllm`` worker of a Dynamo >= 1.0 runtime with no ``--kv-transfer-config``.

    ai-dynamo/dynamo components/src/dynamo/vllm/args.py ``update_dynamo_config_with_engine`` (1.x): a worker in
    ``--disaggregation-mode prefill`` (``--is-prefill-worker`` is a deprecated alias of it) without
    ``--kv-transfer-config`` raises ``ValueError('--connector is deprecated and the default is no longer nixl. When
    using --disaggregation-mode prefill, you must explicitly provide --kv-transfer-config ...')`` before the engine
    starts; a decode worker is not checked there and starts with no connector. The fix is in the graph's own terms:
    the worker's args list, with the config that error text gives."""
    if role == "prefill":
        said = ("prefill: Dynamo's vLLM worker (runtime >= 1.0) no longer adds NixlConnector itself and refuses to "
                "start a prefill worker without --kv-transfer-config: dynamo.vllm raises ValueError('--connector is "
                "deprecated and the default is no longer nixl ... you must explicitly provide --kv-transfer-config') "
                "at startup, so the prefill pods crash-loop; a worker started without --disaggregation-mode prefill "
                "(a script whose line break cuts the flags off the command, say) runs aggregated instead and never "
                "hands KV to a decode.")
    else:
        said = (f"{role}: Dynamo's vLLM worker (runtime >= 1.0) no longer adds NixlConnector itself, so this worker "
                "starts with no KV connector: it never pulls KV from the prefill workers and recomputes every prompt.")
    return (f"{said} {_LATER}",
            f"Add --kv-transfer-config '{_DYNAMO_KV}' to the {role} worker's args (Dynamo's own example value).")


def unparsable_kv_transfer_config(errors: tuple[str, ...] | list[str]) -> str | None:
    """The error of an engine's ``RoleConfig.errors`` saying its ``--kv-transfer-config`` is no JSON object
    (:func:`~pdd_operator.vllm.args.json_flag`: "is not valid JSON: ...", "must be a JSON object"), else ``None``.
    vLLM's parser reads the flag with ``TypeAdapter(KVTransferConfig).validate_json`` (``parse_dataclass``,
    vllm/engine/arg_utils.py 0.14.1 l.279-286), before that with ``KVTransferConfig(**json.loads(x))`` (0.9.0
    l.163-192), either of which refuses such a value as the arguments are parsed: the engine never starts."""
    return next((e for e in errors if e.startswith("--kv-transfer-config ")
                 and (" is not valid JSON" in e or e.endswith(" must be a JSON object"))), None)


def _unparsable(pair: PDPair, r, error: str) -> tuple[str, str]:
    """The ``kv-connector-missing`` finding of engine ``r`` whose ``--kv-transfer-config`` cannot be read (``error``)."""
    example = f'{{"kv_connector":"NixlConnector","kv_role":"{"kv_producer" if r.role == "prefill" else "kv_consumer"}"}}'
    return (f"{r.role}: its --kv-transfer-config is given but cannot be read ({error}), so no connector is known here; "
            "vLLM's argument parser refuses the value as well (it reads the flag as JSON) and the engine never starts.",
            fix_for(pair, "Give spec.kvTransfer as the PDDeployment schema asks (the operator writes the JSON).",
                    f"Write the {r.role} container{_named(r)}'s --kv-transfer-config value as one JSON object with "
                    f"double-quoted keys and strings, e.g. '{example}' (single quotes around it in a shell; in a YAML "
                    "args list, the JSON as one item)."))


def _named(r) -> str:
    return f" ({r.container})" if r.container else ""


@rule(
    id="nixl-connector-unavailable", family="connector", severity="error",
    fields=("spec.engine",),
    source="vllm-nixl-facts.md section 7: NixlConnector first in 0.9.0",
    until=(0, 9, 0),
)
def check_nixl_available(pair: PDPair) -> list[Violation]:
    """The vLLM version ships a NixlConnector."""
    return [(f"vLLM {fmt(pair.version)} has no NixlConnector (first in 0.9.0).", "Use a vLLM >= 0.20 engine image.")]


@rule(
    id="push-connector-unavailable", family="connector", severity="error",
    fields=("spec.kvTransfer.connector", "spec.engine"),
    source="vllm kv_connector/factory.py (NixlPushConnector from 0.24.0)",
    until=PUSH_CONNECTOR_SINCE, example="kvTransfer: {connector: NixlPushConnector} on v0.20.2",
)
def check_push_available(pair: PDPair) -> list[Violation]:
    """NixlPushConnector exists in the vLLM version."""
    if not any(r.push for r in pair.roles):
        return []
    return [(f"NixlPushConnector does not exist in vLLM {fmt(pair.version)} (first in {fmt(PUSH_CONNECTOR_SINCE)}).",
             f"Use NixlConnector (pull), or a vLLM >= {fmt_line(PUSH_CONNECTOR_SINCE)} engine image.")]


@rule(
    id="handshake-compat-disabled", family="handshake", severity="warning",
    fields=("spec.kvTransfer.extraConfig",),
    source=("vllm nixl worker's handshake: kv_connector_extra_config enforce_handshake_compat (default True) "
            "switches the compatibility-hash comparison (v1/nixl_connector.py 0.13.0 l.950 and l.1033; nixl/worker.py "
            "0.20.0 l.334 and l.435; nixl/base_worker.py 0.28.0 l.561, 0.34.0 l.1113; no hash before 0.13.0); "
            "docs/features/nixl_connector_compatibility.md 'What must match' (l.74 in 0.20.0, l.76 from 0.28.0); "
            "secondary: seed 000 section 2"),
)
def check_handshake_compat(pair: PDPair) -> list[Violation]:
    """The handshake compatibility check stays on."""
    for r in pair.roles:
        value = r.extra.get("enforce_handshake_compat", True)
        if value is False or str(value).lower() == "false":
            return [(
                "enforce_handshake_compat is false: prefill and decode pair even when their compatibility hashes "
                "differ, and mismatches show up as wrong output or crashes instead of a handshake error.",
                "Remove enforce_handshake_compat from the kv_connector_extra_config.",
            )]
    return []


@rule(
    id="kv-transfer-config-removed-field", family="connector", severity="error",
    fields=("spec.kvTransfer",),
    source=("vllm/config/kv_transfer.py 0.32.0 (kv_ip, kv_rank, kv_parallel_size, kv_buffer_size removed) and "
            "vllm/config/utils.py config() (pydantic, extra='forbid' from 0.16.0; none in 0.14.0/0.14.1): "
            "'Unexpected keyword argument' at startup; KVTransferConfig's fields read in the 0.14.0-0.34.0 sdists"),
    example='--kv-transfer-config {"kv_connector":"NixlConnector",'
    '"kv_role":"kv_producer","kv_rank":0,"kv_parallel_size":2} on v0.32.0',
    without_connector=True, one_engine=True,
)
def check_removed_kv_transfer_fields(pair: PDPair) -> list[Violation]:
    """The --kv-transfer-config holds no field that the vLLM version removed or never had.

    The PyNccl-era keys (kv_rank, kv_parallel_size, kv_ip, kv_buffer_size) are still copied into NIXL setups from
    old examples; vLLM accepted and ignored them until 0.31 and refuses them from 0.32.0, before the engine starts
    (:data:`~pdd_operator.vllm.kv_transfer_config.REMOVED_IN_0_32`). A PDDeployment's rendered config never holds
    them.

    Not version-bounded in the registry on purpose: with an unknown version the keys are reported as a warning
    (harmless up to 0.31, fatal from 0.32) rather than holding the whole pair unchecked, since public guides of
    older releases still carry them (llm-d's Gaudi guide: ``"kv_parallel_size": "1"``).

    An engine-only rule (``without_connector``): ``KVTransferConfig`` is built from the flag's JSON while the
    arguments are parsed (``--kv-transfer-config`` typed as the config class, vllm/engine/arg_utils.py ``add_cli_args``;
    vllm/config/kv_transfer.py 0.32.0), so the keys are refused whatever ``kv_connector`` names (P2pNcclConnector,
    LMCache, Mooncake).

    A key that was never a field (``backends`` beside ``kv_connector`` instead of inside
    ``kv_connector_extra_config``, as Ray Serve LLM configs write it; :data:`~pdd_operator.vllm.kv_transfer_config.
    KV_TRANSFER_FIELDS`) is refused the same way from 0.16.0, whose ``config()`` first forbids extra keys (0.14.x
    ignores it; there is no 0.15); an error from 0.16.0 to 0.34.0, a warning for an unknown release or a later one
    (which may have added the field)."""
    out: list[Violation] = []
    for r in pair.roles:
        unknown = [k for k in r.kv_transfer_removed if k not in REMOVED_IN_0_32]
        if unknown:
            out.extend(_unknown_fields(pair, r.role, unknown, r.version))
        if not (removed := [k for k in r.kv_transfer_removed if k in REMOVED_IN_0_32]):
            continue
        keys = ", ".join(removed)
        fix = (f"Remove {keys} from the {r.role} container's --kv-transfer-config{_named(r)}: NIXL never read them "
               "(its side channel is VLLM_NIXL_SIDE_CHANNEL_HOST / VLLM_NIXL_SIDE_CHANNEL_PORT).")
        if r.version is None:
            out.append((f"{r.role}: --kv-transfer-config sets {keys}, which KVTransferConfig dropped in 0.32.0: "
                        "vLLM 0.32.0 and later refuse them at startup (pydantic 'Unexpected keyword argument'), "
                        "earlier releases ignore them; this engine's vLLM version is unknown.", fix, "warning"))
        elif r.version >= REMOVED_FIELDS_REFUSED_SINCE:
            out.append((f"{r.role}: --kv-transfer-config sets {keys}, which vLLM {fmt(r.version)} no longer accepts: "
                        "KVTransferConfig dropped kv_ip, kv_rank, kv_parallel_size and kv_buffer_size in 0.32.0 and "
                        "its config classes refuse unknown keys (pydantic 'Unexpected keyword argument'), so the "
                        "engine exits at startup.", fix))
    return out


def _unknown_fields(pair: PDPair, role: str, keys: list[str], version) -> list[Violation]:
    """The finding for keys of a role's --kv-transfer-config that ``KVTransferConfig`` never had: an error on the
    releases that forbid them and whose fields were read, a warning where the release is unknown or newer."""
    names = ", ".join(keys)
    hint = (" (NixlConnector reads its backend list from kv_connector_extra_config.backends)"
            if "backends" in keys else "")
    fix = fix_for(pair, f"Remove {names} from the {role} --kv-transfer-config or move it under kv_connector_extra_config.",
                  f"Move {names} in the {role} container's --kv-transfer-config under kv_connector_extra_config, where "
                  f"connectors read their own settings{hint}, or remove it.")
    if version is not None and UNKNOWN_FIELDS_REFUSED_SINCE <= version <= FIELDS_READ_UNTIL:
        return [(f"{role}: --kv-transfer-config sets {names}, which is no field of KVTransferConfig{hint}: vLLM "
                 f"{fmt(version)} builds the config with pydantic extra='forbid' ('Unexpected keyword argument'), so "
                 "the engine exits at argument parsing.", fix)]
    if version is not None and version < UNKNOWN_FIELDS_REFUSED_SINCE:
        return []  # ignored by vLLM before 0.16.0
    return [(f"{role}: --kv-transfer-config sets {names}, which is no field of KVTransferConfig in the releases read"
             f"{hint}: vLLM 0.16.0 to 0.34.0 refuse it at argument parsing ('Unexpected keyword argument'), 0.14 "
             f"ignores it; this engine's vLLM {'version is unknown' if version is None else fmt(version) + ' was not read'}.",
             fix, "warning")]
