"""The vLLM engine of one role: ``vllm serve`` arguments and environment, derived from the spec.

Everything that must match between prefill and decode is taken from the spec's top-level sections,
so the two roles' arguments differ only in what the role sections say (and in ``kv_role``).
"""

from __future__ import annotations

import json

from pdd_operator.api.constants import (
    ANNOTATION_PP,
    ANNOTATION_SIDE_CHANNEL_PORT,
    ANNOTATION_TP,
)
from pdd_operator.api.spec import PDDeploymentSpec, RoleSpec
from pdd_operator.vllm.args import int_flag, parse_flags
from pdd_operator.vllm.async_scheduling import hybrid_decode_needs_sync
from pdd_operator.vllm.model_config import resolve_model
from pdd_operator.vllm.must_match import compat_hash  # noqa: F401  (rendered as a pod label)
from pdd_operator.vllm.transfer_mode import Mode, transfer_mode
from pdd_operator.vllm.versions import (
    HYBRID_NIXL_PREFIX_CACHING_SINCE,
    KV_LOAD_FAILURE_FAIL_DEFAULT_SINCE,
    KV_LOAD_FAILURE_POLICY_SINCE,
    Version,
    resolve_version,
)

KV_ROLE = {"prefill": "kv_producer", "decode": "kv_consumer"}


#: What the engines bind when ``extraArgs`` does not say (``--host``). vLLM opens an ``AF_INET6``
#: socket for an IPv6 literal and binds it as given (``create_server_socket`` in
#: ``vllm/entrypoints/openai/api_server.py``, later ``vllm/utils/network_utils.py``), without
#: ``IPV6_V6ONLY``: with Linux's default ``net.ipv6.bindv6only=0`` (the default in every pod's
#: network namespace) ``::`` accepts IPv4 and IPv6, so one value serves IPv4-only, IPv6-only and
#: dual-stack clusters. ``0.0.0.0`` (IPv4 only) or no ``--host`` (vLLM binds ``""``, also IPv4 only)
#: leave an IPv6 pod unreachable. On nodes booted with IPv6 disabled in the kernel
#: (``ipv6.disable=1``) vLLM cannot open the socket: set ``--host 0.0.0.0`` in the roles' extraArgs.
DEFAULT_BIND_HOST = "::"


def side_channel_span(spec: PDDeploymentSpec, role: str) -> int:
    """How many consecutive ports from a role's side-channel port its engine listens on.

    vLLM 0.11.1 and later: one listener per data-parallel rank (``VLLM_NIXL_SIDE_CHANNEL_PORT +
    data_parallel_index``; ``--data-parallel-size`` in extraArgs, else 1). 0.9.1 to 0.11.0: one per
    TP rank of each DP rank (``base + dp_rank * tp_size + tp_rank``); an unknown version counts as the
    older, wider one (vllm-nixl-facts.md, ``VLLM_NIXL_SIDE_CHANNEL_PORT``).
    """
    r = spec.role(role)
    dp = int_flag(parse_flags(["vllm", "serve", "model", *r.extra_args])[1], "--data-parallel-size", 1) or 1
    version, _ = resolve_version(spec.engine.vllm_version, spec.engine.image)
    if version is not None and version >= (0, 11, 1):
        return dp
    return dp * r.tensor_parallel_size


def _role_port_set(spec: PDDeploymentSpec, role: str, shift: int) -> set[int]:
    side = spec.kv_transfer.side_channel_port + shift
    return {spec.port + shift, *range(side, side + side_channel_span(spec, role))}


def decode_port_shift(spec: PDDeploymentSpec) -> int:
    """How far decode's HTTP and side-channel ports are moved from ``spec.port`` and
    ``spec.kvTransfer.sideChannelPort``: 0 on the pod network (each pod has its own IP); with the host
    network, where a prefill and a decode pod can share a node, the smallest shift >= 1 for which
    none of decode's ports (:func:`side_channel_span`) is one of prefill's. Usually 1; 2 when the two
    base ports are adjacent (``port: 5599``, ``sideChannelPort: 5600``).
    """
    if not spec.network.host_network:
        return 0
    prefill = _role_port_set(spec, "prefill", 0)
    shift = 1
    while _role_port_set(spec, "decode", shift) & prefill:
        shift += 1
    return shift


def role_ports(spec: PDDeploymentSpec, role: str) -> tuple[int, int]:
    """``(http_port, side_channel_port)`` of a role's engine.

    Pods have their own IPs, so both roles use ``spec.port`` and ``spec.kvTransfer.sideChannelPort``;
    with the host network decode's are shifted by :func:`decode_port_shift` so that a prefill and a
    decode engine sharing a node never want the same port. The result can pass 65535 for base ports
    near the top of the range; :func:`pdd_operator.render.admission.check_rendered` refuses such specs.
    """
    shift = decode_port_shift(spec) if role == "decode" else 0
    return spec.port + shift, spec.kv_transfer.side_channel_port + shift


def user_bind_host(extra_args: list[str]) -> str | None:
    """The ``--host`` value a role's ``extraArgs`` sets (``--host X`` or ``--host=X``), or ``None``."""
    host = parse_flags(["vllm", "serve", "model", *extra_args])[1].get("--host")
    return host if isinstance(host, str) else None


def kv_transfer_config(spec: PDDeploymentSpec, role: str) -> dict:
    """Return the ``--kv-transfer-config`` object for ``role`` (``prefill`` or ``decode``).

    ``kv_role`` is ``kv_producer`` on prefill and ``kv_consumer`` on decode (vLLM >= 0.23 deprecates
    ``kv_both``; 0.33 reads the role for PP and deferred block freeing). User ``extraConfig`` keys are
    merged into ``kv_connector_extra_config``; ``backends`` comes from ``spec.kvTransfer.backends``.

    Decode gets ``kv_load_failure_policy: "fail"`` on the releases whose default is ``"recompute"``
    (0.13.0-0.16.x, :data:`~pdd_operator.vllm.versions.KV_LOAD_FAILURE_POLICY_SINCE`): a KV load that
    failed (its prefill died before decode's read) then fails the request before any token, and the
    router runs it again through a new prefill leg (:mod:`pdd_operator.router.retry`), instead of decode
    recomputing the prompt unseen. From 0.17.0 ``"fail"`` is vLLM's default and nothing is rendered (so
    pods of those releases do not change); before 0.13.0, or on an unknown release, there is no such
    field to set (docs/router.md "KV load failures").
    """
    return _kv_transfer_config(spec, role, resolve_version(spec.engine.vllm_version, spec.engine.image)[0])


def _kv_transfer_config(spec: PDDeploymentSpec, role: str, version: Version | None) -> dict:
    """:func:`kv_transfer_config` for the vLLM release ``version`` already resolved from ``spec.engine``."""
    kt = spec.kv_transfer
    extra = {"backends": list(kt.backends)}
    extra.update(kt.extra_config or {})
    out = {
        "kv_connector": str(kt.connector),
        "kv_role": KV_ROLE[role],
        "kv_buffer_device": str(kt.buffer_device),
        "kv_connector_extra_config": extra,
    }
    if kt.enable_permute_local_kv:
        out["enable_permute_local_kv"] = True
    if role == "decode":
        if version is not None and KV_LOAD_FAILURE_POLICY_SINCE <= version < KV_LOAD_FAILURE_FAIL_DEFAULT_SINCE:
            out["kv_load_failure_policy"] = "fail"
    # No engine_id, in push mode either: each vLLM process draws a new one (KVTransferConfig's
    # default, uuid4), so a restarted prefill is a new engine to decode. A fixed id (the pod name,
    # before) came back with a restarted container, and vLLM 0.32's push decode kept registering
    # with the dead process's NIXL agent under it (push_worker.py _do_send_reg_notif; base_worker.py
    # _track_remote_engine_replacement: "TODO: Also handle push mode"). The router learns the id
    # from prefill's answers (pdd_operator.router.proxy).
    return out


def _traits(spec: PDDeploymentSpec, model_config: dict | None = None):
    return resolve_model(spec.model, model_config).traits


def _json(obj: dict) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def speculative_config(spec: PDDeploymentSpec, role: RoleSpec) -> dict | None:
    """Return the ``--speculative-config`` object of ``role``, or ``None`` without speculation."""
    sp = spec.speculative
    if sp is None:
        return None
    cfg: dict = {"method": str(sp.method)}
    if sp.draft_model:
        cfg["model"] = sp.draft_model
    if sp.draft_revision:
        cfg["revision"] = sp.draft_revision
    if role.num_speculative_tokens is not None:
        cfg["num_speculative_tokens"] = role.num_speculative_tokens
    return cfg


def vllm_args(spec: PDDeploymentSpec, role: str, model_config: dict | None = None) -> list[str]:
    """Return the arguments after ``vllm serve`` for ``role``.

    Shape: ``[model, --flag, value, ...]``; the role's ``extraArgs`` come last so they can add flags.
    ``--host`` is :data:`DEFAULT_BIND_HOST` unless ``extraArgs`` sets it (then only the user's is rendered).
    Hybrid SSM models get ``--no-disable-hybrid-kv-cache-manager``: up to vLLM 0.21 any
    ``--kv-transfer-config`` otherwise turns the hybrid KV cache manager off, and vLLM asserts it is on
    for Mamba layers (vllm-nixl-facts.md sections 1.5 and 4.2; seed 001 section 7). Their decode gets
    ``--no-async-scheduling`` on vLLM 0.18-0.23 and an unknown release, unless ``extraArgs`` names the flag
    (:func:`pdd_operator.vllm.async_scheduling.hybrid_decode_needs_sync`: vllm#45357, first in 0.24.0).
    """
    model = _traits(spec, model_config)
    r = spec.role(role)
    m = spec.model
    version, _ = resolve_version(spec.engine.vllm_version, spec.engine.image)  # once: the release every rule reads
    args = [
        m.name,
        *(["--host", DEFAULT_BIND_HOST] if user_bind_host(r.extra_args) is None else []),
        "--port", str(role_ports(spec, role)[0]),
        "--tensor-parallel-size", str(r.tensor_parallel_size),
        "--pipeline-parallel-size", str(r.pipeline_parallel_size),
        "--gpu-memory-utilization", f"{r.gpu_memory_utilization:g}",
        "--dtype", str(m.dtype),
        "--kv-cache-dtype", str(spec.kv_cache.dtype),
    ]
    if r.block_size is not None:
        args += ["--block-size", str(r.block_size)]
    if m.max_model_len is not None:
        args += ["--max-model-len", str(m.max_model_len)]
    if m.revision:
        args += ["--revision", m.revision]
    if m.served_model_name:
        args += ["--served-model-name", m.served_model_name]
    if m.trust_remote_code:
        args.append("--trust-remote-code")
    if model.needs_hma:
        args.append("--no-disable-hybrid-kv-cache-manager")
    spec_cfg = speculative_config(spec, r)
    if spec_cfg is not None:
        args += ["--speculative-config", _json(spec_cfg)]
    if role == "decode" and model.needs_hma:
        # Hybrid SSM: with heterogeneous TP, P and D may differ in physical blocks per logical block, and vLLM
        # >= 0.22 refuses prefix caching on decode then (hybrid-prefix-caching); before 0.27 (or on an unknown
        # release) decode's NIXL worker asserts when a transferred request hits its prefix cache, which vLLM
        # turns on by default for hybrid models from 0.28 (hybrid-ssm-prefix-caching). Off costs decode only
        # its local cache hits.
        if (spec.prefill.tensor_parallel_size != spec.decode.tensor_parallel_size
                or version is None or version < HYBRID_NIXL_PREFIX_CACHING_SINCE):
            args.append("--no-enable-prefix-caching")
    user_async = "--async-scheduling" in parse_flags(["vllm", "serve", "model", *r.extra_args])[1]
    if role == "decode" and model.needs_hma and not user_async \
            and hybrid_decode_needs_sync(version):
        # Hybrid SSM decode before vLLM 0.24 (or on an unknown release): with async scheduling a step still in
        # flight rewrites a freed conv/SSM state block that NIXL just filled for a new request (vllm#37285; fixed
        # by vllm#45357 in 0.24.0: pdd_operator.vllm.async_scheduling). extraArgs may turn it back on.
        args.append("--no-async-scheduling")
    args += ["--kv-transfer-config", _json(_kv_transfer_config(spec, role, version))]
    args += list(r.extra_args)
    return args


def engine_env(spec: PDDeploymentSpec, role: str, model_config: dict | None = None) -> list[dict]:
    """Return the engine container's environment for ``role``, as Pod ``env`` entries.

    The NIXL side-channel host is the pod IP from the downward API (the node IP with the host
    network; never ``localhost`` or ``0.0.0.0``: it is both the bind and the advertised address) and
    the port is explicit. ``spec.network.ucx`` becomes ``UCX_TLS``, ``UCX_NET_DEVICES``, ``UCX_IB_GID_INDEX``. Hybrid SSM
    models get ``VLLM_SSM_CONV_STATE_LAYOUT`` (DS unless the spec says otherwise; required from vLLM
    0.20). User env (engine, then role) is appended and wins on a name clash.
    """
    r = spec.role(role)
    ip_field = "status.hostIP" if spec.network.host_network else "status.podIP"
    env: list[dict] = [
        {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": ip_field}}},
        {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(role_ports(spec, role)[1])},
    ]
    ucx = spec.network.ucx
    for name, value in (("UCX_TLS", ucx.transports), ("UCX_NET_DEVICES", ucx.net_devices),
                        ("UCX_IB_GID_INDEX", ucx.gid_index)):
        if value is not None:
            env.append({"name": name, "value": str(value)})
    version, _ = resolve_version(spec.engine.vllm_version, spec.engine.image)
    if _traits(spec, model_config).needs_hma and (version is None or version >= (0, 20, 0)):
        # VLLM_SSM_CONV_STATE_LAYOUT exists from vLLM 0.20 (and is required there with NIXL).
        layout = spec.kv_cache.ssm_conv_state_layout or "DS"
        env.append({"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": str(layout)})
    if spec.kv_cache.layout:
        env.append({"name": "VLLM_KV_CACHE_LAYOUT", "value": kv_layout_name(spec)})
    if spec.model.hf_token_secret_ref:
        ref = spec.model.hf_token_secret_ref
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}})
    merged: dict[str, dict] = {e["name"]: e for e in env}
    for var in [*spec.engine.env, *r.env]:
        merged[var.name] = var.wire()
    return list(merged.values())


def kv_layout_name(spec: PDDeploymentSpec) -> str:
    """``VLLM_KV_CACHE_LAYOUT`` for the engine's version: vLLM < 0.29 knows only HND/NHD, the old
    names of LBHNC/LBNHC (``vllm/config/cache.py`` aliases)."""

    layout = str(spec.kv_cache.layout)
    version, _ = resolve_version(spec.engine.vllm_version, spec.engine.image)
    if version is not None and version < (0, 29, 0):
        return {"LBHNC": "HND", "LBNHC": "NHD"}.get(layout, layout)
    return layout


def spec_transfer_mode(spec: PDDeploymentSpec) -> Mode | None:
    """The NIXL transfer mode the deployment's engines run: ``"push"``, ``"pull"``, or ``None`` when it cannot be told.

    The one definition (:func:`pdd_operator.vllm.transfer_mode.transfer_mode`) applied to what the engines are given:
    ``spec.kvTransfer.connector``, the merged ``kv_connector_extra_config`` (``extraConfig`` over ``backends``,
    :func:`kv_transfer_config`) and the release of ``spec.engine``. ``NixlPushConnector`` pushes; ``NixlConnector``
    pushes when ``extraConfig.transfer_mode`` is ``"push"`` on vLLM >= 0.34.0 (factory.py reads it; older releases
    pull whatever it says); ``None`` for ``transfer_mode`` push on an unknown release, or a value 0.34 refuses.
    """
    version, _ = resolve_version(spec.engine.vllm_version, spec.engine.image)
    return transfer_mode(str(spec.kv_transfer.connector), kv_transfer_config(spec, "prefill")["kv_connector_extra_config"],
                         version)


def uses_push(spec: PDDeploymentSpec) -> bool:
    """True when the deployment's engines push KV (:func:`spec_transfer_mode`); an undecidable mode counts as pull
    (the router's pull dispatch still moves KV from push engines, sequentially: compat rule
    ``transfer-mode-option-managed`` warns of that case)."""
    return spec_transfer_mode(spec) == "push"


def router_pod_annotations(spec: PDDeploymentSpec, role: str) -> dict[str, str]:
    """Annotations a prefill pod needs so the router can drive the push protocol (empty otherwise).

    Push mode tells decode prefill's side-channel port, TP and PP in advance (vllm-nixl-facts.md
    section 6.2), and its engine id, which the router learns from the engine process itself (a
    restarted one draws a new id), so it is not published here.
    """
    if role != "prefill" or not uses_push(spec):
        return {}
    r = spec.role(role)
    return {
        ANNOTATION_SIDE_CHANNEL_PORT: str(role_ports(spec, role)[1]),
        ANNOTATION_TP: str(r.tensor_parallel_size),
        ANNOTATION_PP: str(r.pipeline_parallel_size),
    }
