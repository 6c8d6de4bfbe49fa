"""The form the rules work on: a prefill/decode pair of vLLM engines, each as it will be started.

A :class:`PDPair` comes from a PDDeployment (:func:`from_pddeployment`, through the arguments and
environment the operator renders) or from a foreign manifest (``compat.manifests``, through the
arguments people wrote). Rules never look at the source format, so both share one code path.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace

from pdd_operator.compat.config_files import MAPPINGS_KEY
from pdd_operator.compat.data_parallel import first_local_rank, lb_modes, local_data_parallel, spans_nodes
from pdd_operator.compat.dynamo_worker_flags import WORKER_FLAGS
from pdd_operator.compat.pd_proxy import Proxy, command_proxy, pod_proxies
from pdd_operator.compat.placement import NodeTerm, PodAffinityTerm, node_terms, pod_affinity_terms
from pdd_operator.compat.pod_ports import sidecar_ports
from pdd_operator.render.workloads import Owner, pod_template
from pdd_operator.vllm import nixl_backends
from pdd_operator.vllm.added_flags import added_flags, flags_floor
from pdd_operator.vllm.architectures import ModelTraits
from pdd_operator.vllm.args import container_env, container_launches, int_flag, json_flag, parse_flags
from pdd_operator.vllm.entrypoint import RepeatedEntrypoint, leading_entry
from pdd_operator.vllm.expansion import (
    READ_ENV,
    ContainerEnv,
    opaque_value,
    placeholder_why,
    unknown,
    unknown_names,
)
from pdd_operator.vllm.flag_choices import CHOICE_TABLES
from pdd_operator.vllm.flags import (
    flag_values,
    loose_unknown,
    malformed_option_places,
    malformed_options,
    missing_values,
    short_options,
)
from pdd_operator.vllm.foreign_flags import foreign_flags
from pdd_operator.vllm.grpc_server import GRPC_SERVER_MODULES
from pdd_operator.vllm.http_socket import api_server_count
from pdd_operator.vllm.known_bad import nixl_version
from pdd_operator.vllm.kv_offloading import offloading_connector, repeated_connectors
from pdd_operator.vllm.kv_transfer_config import (
    kv_transfer_config_errors,
    partly_known,
    read_partly,
    refused_fields,
    third_party_module,
    well_typed,
)
from pdd_operator.vllm.lora import adapter_names
from pdd_operator.vllm.max_model_len import CONFIG_OVERRIDE_FLAGS
from pdd_operator.vllm.mm_inputs import disabled_modalities
from pdd_operator.vllm.model_config import resolve_model
from pdd_operator.vllm.moriio_ports import moriio_listener_ports
from pdd_operator.vllm.parser_names import PARSER_FLAGS
from pdd_operator.vllm.removed_flags import removed_flags
from pdd_operator.vllm.rocm_nixl import installs_nixl
from pdd_operator.vllm.scheduler_budget import SchedulerBudget
from pdd_operator.vllm.script import IN_PROCESS_ENGINE, Launch, memlock_ulimit, opaque_command
from pdd_operator.vllm.transfer_mode import transfer_mode
from pdd_operator.vllm.v1_oracle import v0_fallback_flags
from pdd_operator.vllm.versions import (
    Version,
    dev_build,
    dev_build_note,
    image_version_text,
    is_vllm_image,
    resolve_version,
    rules_version,
    tag_uncertainty,
    unknown_tag_note,
)

#: vLLM's NIXL connectors (``vllm/distributed/kv_transfer/kv_connector/factory.py`` registrations).
NIXL_CONNECTORS = ("NixlConnector", "NixlPullConnector", "NixlPushConnector")
#: Connectors that run child connectors listed in ``kv_connector_extra_config.connectors``: vLLM's
#: MultiConnector (``kv_connector/v1/multi_connector.py``: each child gets its own KVTransferConfig built
#: from its dict) and Dynamo KVBM's PdConnector (``kvbm.vllm_integration.connector``), same shape.
WRAPPER_CONNECTORS = ("MultiConnector", "PdConnector")

#: The flags of Dynamo's vLLM worker read by Dynamo release (:mod:`pdd_operator.compat.dynamo_worker_flags`).
_LAUNCHER_FLAGS = frozenset({*WORKER_FLAGS, "--connector", "--kv-transfer-config"})


def unwrap_connector(kv_transfer: dict) -> tuple[dict, str | None]:
    """``(config, wrapper)``: for a wrapper connector with a NIXL child, the child's config (the parent's
    ``kv_role`` where the child has none) and the wrapper's description, e.g.
    ``MultiConnector[OffloadingConnector, NixlConnector]``; otherwise ``(kv_transfer, None)``.

    Every other key is the child's own, as vLLM builds it: ``MultiConnector._get_connector_classes_and_configs``
    gives each child ``KVTransferConfig(**ktc, engine_id=...)`` from its dict alone (kv_connector/v1/multi_connector.py,
    0.20.0 lines 195-200, 0.25.0 222-227, 0.30.0 236-241, 0.34.0 274-279; the same call in every sdist read from
    0.10.1.1), so a child without ``kv_buffer_device`` runs KVTransferConfig's default (cuda to 0.17.x, the platform's
    device_type from 0.18.0), never the parent's; the buffer-device rules read this config."""
    name = kv_transfer.get("kv_connector")
    children = (kv_transfer.get("kv_connector_extra_config") or {}).get("connectors")
    if name not in WRAPPER_CONNECTORS or not isinstance(children, list):
        return kv_transfer, None
    children = [well_typed(c) for c in children if isinstance(c, dict)]
    described = f"{name}[{', '.join(str(c.get('kv_connector')) for c in children)}]"
    for child in children:
        inner, _ = unwrap_connector(child)
        if inner.get("kv_connector") in NIXL_CONNECTORS:
            merged = {**inner}
            merged.setdefault("kv_role", kv_transfer.get("kv_role"))
            return merged, described
    return kv_transfer, described


@dataclass(frozen=True)
class RoleConfig:
    """One role's vLLM engine settings. ``None`` means "not given" (vLLM's default applies).

    Attributes:
        role: ``prefill`` or ``decode``.
        version: vLLM version ``(major, minor, patch)`` or ``None`` if unknown.
        version_text: the version as written (``0.20.2``, ``v0.20.2-cu129``), for messages.
        model: the exact ``--model`` string (hashed raw by the NIXL handshake).
        tp, pp, dp: tensor, pipeline and data parallel sizes (``None``: not a literal integer).
        block_size: ``--block-size`` in tokens.
        kv_cache_dtype, dtype: raw strings of ``--kv-cache-dtype`` and ``--dtype``.
        attention_backend: ``--attention-backend`` (or ``backend`` of ``--attention-config``), if given.
        attention_backend_flag: ``--attention-backend`` itself is given (not only ``--attention-config``'s backend).
        kv_transfer: the ``--kv-transfer-config`` object (``{}`` if absent).
        speculative: the ``--speculative-config`` object or ``None``.
        hma: ``--no-disable-hybrid-kv-cache-manager`` given (True), ``--disable-...`` (False), neither (None); also
            None where the flag's value is not in the manifest (then in ``opaque``: rules reading it name it in
            ``Rule.needs``).
        prefix_caching: ``--enable-prefix-caching`` / ``--no-enable-prefix-caching``, or None (also when its value
            is not in the manifest, as for ``hma``).
        async_scheduling: ``--async-scheduling`` (True) / ``--no-async-scheduling`` (False), or None (unset: vLLM's
            default, :func:`pdd_operator.vllm.async_scheduling.async_scheduling`).
        disable_sliding_window: ``--disable-sliding-window`` given true (True), ``--no-disable-sliding-window`` or
            false (False), neither or a value not in the manifest (None)
            (:mod:`pdd_operator.compat.rules.sliding_window_flag`).
        env: the engine's environment: literal values (downward-API IPs as ``fieldRef:...`` sentinels), and
            ``<unknown:NAME>`` for a variable set to a value not in these files (``valueFrom`` a ConfigMap or Secret,
            a script's unknown value), never dropped (a dropped one would read as vLLM's default).
        env_from: ``(name, why)`` for each variable the rules read (:data:`~pdd_operator.vllm.expansion.READ_ENV`)
            that ``env`` does not set but an ``envFrom`` source not in these files may (a ConfigMap or Secret the files
            do not hold: it may set any variable, or not). ``env`` reads them as unset;
            :meth:`PDPair.env_from_unknown` reads them as unknown (:func:`~pdd_operator.compat.engine.evaluate` keeps
            an error only where both readings refuse).
        host_network: the pod uses the host network.
        resources: the container's resource limits (requests where no limit), as strings.
        capabilities: Linux capabilities added to the container.
        privileged: the container is privileged (``securityContext.privileged``): the runtime gives it every
            capability, IPC_LOCK and SYS_RESOURCE included (Kubernetes "Configure a Security Context": "processes
            in privileged containers get almost the same privileges ... as processes outside a container").
        run_as_non_root: the container runs as a non-root user (IPC_LOCK then does not lift memlock).
        host_users: the pod runs in the host's user namespace (``hostUsers`` not ``false``); in a pod user namespace
            a capability is not held in the initial namespace, against which the kernel checks CAP_IPC_LOCK.
        extra_args: for a PDDeployment, the role's ``extraArgs`` (appended after the rendered flags).
        dra_claims: names of DRA resource claims the container uses.
        networks: the pod's network attachments (:func:`pod_network_attachments`).
        other_ports: other ports the engine listens on (vLLM's HTTP ``--port``, default 8000, but not for Dynamo's
            worker nor a ``--headless`` launch, which serve no HTTP; KV events), to compare with the side channel
            and the other role's.
        http_port: the one of ``other_ports`` that is the HTTP (OpenAI API) ``--port``, ``None`` where it serves no
            HTTP; its socket's SO_REUSEPORT decides whether two engines may share it
            (:mod:`pdd_operator.vllm.http_socket`).
        api_servers: the API server processes the launch starts on ``http_port``
            (:func:`~pdd_operator.vllm.http_socket.api_server_count`), ``None`` where not known.
        run_as_user: the container's ``securityContext.runAsUser`` (the pod's where the container sets none), ``None``
            where neither sets it (the image's user).
        sidecar_ports: ``(container, port)`` that other, non-vLLM containers of the engine's pod listen on
            (:func:`~pdd_operator.compat.pod_ports.sidecar_ports`), to compare with ``other_ports``.
        proxies: the P/D proxies found beside the engine whose request protocol is known
            (:mod:`~pdd_operator.compat.pd_proxy`): a routing sidecar in its pod, a proxy its script starts.
        errors: problems reading the arguments (bad JSON, ...), reported by the ``engine-args-invalid`` rule.
        malformed_options: the words written as options that vLLM's parser can match to none on any release
            (``---max-num-batched-tokens``; :func:`~pdd_operator.vllm.flags.malformed_options`), reported by the
            ``cli-option-malformed`` rule.
        malformed_places: the word right before each of ``malformed_options``, in its order
            (:func:`~pdd_operator.vllm.flags.malformed_option_places`), so that the finding names an empty word's place.
        missing_values: the options that take one argument written without it (``--data-parallel-address
            --data-parallel-rpc-port 13345``; :func:`~pdd_operator.vllm.flags.missing_values`), reported by the
            ``cli-option-missing-value`` rule.
        loose: why any flag of the engine may be other than the manifest shows, or ``""``: its command line holds a
            variable not in these files where flags stand (:func:`~pdd_operator.vllm.flags.loose_unknown`,
            ``$EXTRA_ARGS``); every flag a rule needs is then read as :attr:`opaque` (``compat.engine._runnable``).
        opaque: ``(name, why)`` for each flag (``--block-size``; ``--model`` for the model, positional or not) and
            each env variable (``VLLM_KV_CACHE_LAYOUT``) whose value is not in the manifest (a ConfigMap or Secret
            variable, a shell command substitution or unknown branch: :func:`~pdd_operator.vllm.expansion.opaque_value`);
            such a value is not parsed (never an ``errors`` entry) and the rules that need it (``Rule.needs``) are
            not checked.
        wrapper: the connector the NIXL connector sits inside (``MultiConnector``, Dynamo's ``PdConnector``),
            whose ``kv_transfer`` is then the NIXL child's own config; ``None`` when NIXL is the top connector.
        kv_transfer_written: the ``--kv-transfer-config`` object as written (a wrapper's own, its children
            included; ``{}`` if absent), for rules about the wrapper itself (:mod:`~pdd_operator.compat.rules.mem_pool`).
        ec_transfer_written: the ``--ec-transfer-config`` object (encoder-cache connector of E/P/D disaggregation)
            as written, ``{}`` when absent or unreadable; judged in :mod:`pdd_operator.compat.rules.ec_connector`.
        scheduler: the scheduler's token-budget flags (:class:`~pdd_operator.vllm.scheduler_budget.SchedulerBudget`).
        kv_transfer_removed: keys of ``--kv-transfer-config`` (or of a wrapped connector's config) that vLLM 0.32
            removed from ``KVTransferConfig``, then those it never had (:func:`~pdd_operator.vllm.kv_transfer_config.
            refused_fields`).
        revision: ``--revision`` (the model's weights revision), if given.
        attention_config_keys: the keys of the ``--attention-config`` object as written (``()`` if absent), judged
            by release in ``engine-args-invalid`` (:func:`~pdd_operator.vllm.config_fields.refusals`).
        pass_config_keys: the keys of ``--compilation-config``'s ``pass_config`` object as written (``()`` if
            absent), judged the same way.
        pod_labels: the pod's labels (placement: anti-affinity terms select pods by label).
        nodes: the nodes the pod may run on: its ``nodeSelector``, ``spec.nodeName`` and required node affinity as
            ORed node selector terms (:func:`~pdd_operator.compat.placement.node_terms`), ``None`` when unreadable.
        host_ports: TCP host ports the pod asks the scheduler for: ``hostPort`` of its containers' ``ports`` and,
            on the host network, their ``containerPort`` (the API server defaults ``hostPort`` to it there,
            k8s.io/api core/v1 ``ContainerPort.HostPort``); the scheduler's NodePorts filter never puts two pods
            asking for one host port on one node.
        anti_affinity, pod_affinity: the pod's required pod anti-affinity and affinity terms
            (:func:`~pdd_operator.compat.placement.pod_affinity_terms`).
        replicas: pods of this role the workload runs (``spec.replicas`` of the objects around the pod template,
            multiplied: a StormService's replicas times its role's); ``None`` when not a literal integer.
        namespace: the namespace the manifest writes for the pod's object, ``None`` when it writes none (the
            namespace scope of anti-affinity terms).
        container: the container name, for fixes that speak of the user's manifest.
        launcher: the module that starts vLLM when it is not vLLM itself (``dynamo.vllm``), else ``""``.
        dp_lb: for a ``vllm serve`` command line, its data-parallel load-balancing flags ``(switches, ranks)``
            (:func:`~pdd_operator.compat.data_parallel.lb_modes`); ``((), ())`` for another entry point (only
            ``vllm serve``'s CLI checks them) or none given; ``None`` when a mode flag's value is not in the manifest.
        launcher_flags: for a ``dynamo.vllm`` worker, its own role and connector flags as parsed (``(name, value)``:
            :data:`~pdd_operator.compat.dynamo_worker_flags.WORKER_FLAGS`, ``--connector``) and whether
            ``--kv-transfer-config`` is given, judged by Dynamo release in ``cli-flag-removed``, ``cli-flag-not-yet`` and
            ``dynamo-connector-flag``; ``()`` for any other engine.
        executor: ``--distributed-executor-backend`` (``ray``, ``mp``, ...), if given.
        config_file_mappings: the flags a ``vllm serve --config`` file gives as YAML mappings where the release does
            not tell whether vLLM passes them as Python's repr or as JSON (unknown, 0.15.x).
        dp_local: the DP ranks (engine cores) the engine starts in this pod
            (:func:`~pdd_operator.compat.data_parallel.local_data_parallel`), ``None`` when not known.
        dp_first: the global DP rank of the first of those engine cores
            (:func:`~pdd_operator.compat.data_parallel.first_local_rank`), ``None`` when not known.
        dp_address: ``--data-parallel-address`` as the engine receives it (``<unknown:LWS_LEADER_ADDRESS>`` where
            it is a value not in the files), ``None`` where not given: every rank naming one address joins one
            data-parallel group there, whichever pod it runs in.
        pod_dp_ranks: the DP ranks of this engine's data-parallel group that every launch of its container starts in
            one pod, where the container's script starts several engines of one group (a ``vllm serve`` per GPU, each
            with its own ``--data-parallel-rank``: :func:`~pdd_operator.compat.manifests.pod_dp_ranks`), the sum of
            their ``dp_local``; ``None`` where the container starts this engine's ranks alone (then ``dp_local``
            counts them).
        pcp: ``--prefill-context-parallel-size`` (``-pcp``; ``None``: not a literal integer).
        dcp: ``--decode-context-parallel-size`` (``-dcp``; ``None``: not a literal integer).
        mamba_cache_mode: ``--mamba-cache-mode`` as written (``none``, ``all``, ``align``; ``None``: not given).
        mamba_cache_dtype, mamba_ssm_cache_dtype: ``--mamba-cache-dtype`` (the conv state's dtype) and
            ``--mamba-ssm-cache-dtype`` (the temporal/SSM state's) as written (``auto``, ``float32``, ``float16``,
            ``bfloat16``; ``None``: not given, vLLM's ``auto``), judged in
            :func:`~pdd_operator.compat.rules.hybrid_ssm.check_mamba_state_dtypes`.
        memlock_ulimit: ``(soft, hard)`` memlock limits the container's script sets with ``ulimit -l`` before
            this engine (:func:`~pdd_operator.vllm.script.memlock_ulimit`), or ``None``.
        spans_nodes: the arguments place ranks of this engine on other nodes
            (:func:`~pdd_operator.compat.data_parallel.spans_nodes`).
        pod_group: pods one instance of this engine spans (LeaderWorkerSet size, StormService podGroupSize);
            1 for a plain pod.
        ray_cluster: the container starts or joins a Ray cluster (``ray start``, vLLM's
            ``multi-node-serving.sh``), over which vLLM's Ray executor places ranks in other pods.
        group_worker_gpus: the GPUs each other pod of the ``pod_group`` requests where that differs from this pod's
            template (a LeaderWorkerSet's ``workerTemplate`` beside its ``leaderTemplate``, a literal count); ``None``
            where every pod is taken to hold this pod's GPUs.
        group_gpus: the GPUs of every pod of a multinode group over which the orchestrator spreads this engine's
            TP x PP x DP ranks (a Dynamo multinode service: nodeCount x its per-pod GPUs,
            :func:`~pdd_operator.compat.dynamo_resources.multinode_launch`), ``None`` when not such a group or not
            known.
        group_note: how the orchestrator spreads the ranks over that group (for messages), or why that is not
            known (then ``group_gpus`` is ``None`` and the GPU count is "not checked"); ``""`` for no such group.
        group_caveat: what some releases of that orchestrator do instead (a warning), or ``""``.
        group_engine_spread: the orchestrator spreads this engine's TP x PP ranks (not DP ranks) over the pods of
            that group (:attr:`~pdd_operator.compat.dynamo_resources.MultinodeLaunch.engine_spread`): over a Ray
            cluster wherever vLLM has no multi-node ``mp`` launch (before 0.11.1).
        group_uniform: every pod of the ``pod_group`` runs this engine's command (a LeaderWorkerSet without a
            ``leaderTemplate``), so the group starts at most ``pod_group`` x ``dp_local`` DP ranks.
        image: the container image.
        workload_kind: the kind of the object the engine was read from (``StormService``, ``Deployment``, ...;
            ``""`` for a PDDeployment's rendered roles).
        nixl_version, nixl_from: the NIXL version the engine loads and where that was read
            (:func:`pdd_operator.vllm.known_bad.nixl_version`); ``None`` / ``""`` when unknown.
        gpu_memory_utilization: ``--gpu-memory-utilization`` (fraction of each GPU's memory the engine takes;
            vLLM's default 0.9), ``None`` when not a literal number.
        kv_cache_memory_bytes: ``--kv-cache-memory-bytes`` as written (vLLM >= 0.10.2: a fixed KV cache size that
            replaces the utilization budget, v1/worker/gpu_worker.py determine_available_memory), ``None`` unset.
        cumem_flags: the flags given true that put the KV cache in vLLM's CuMemAllocator pool
            (``--enable-cumem-allocator``, ``--enable-sleep-mode``).
        extensible_kv_cache: ``--enable-extensible-kv-cache`` (True) / ``--no-enable-extensible-kv-cache`` (False),
            ``None`` where neither is given (vLLM 0.34.0 then turns it on where supported, config/vllm.py
            ``_resolve_extensible_kv_cache``) or its value is not in the manifest; judged in
            :mod:`pdd_operator.compat.rules.extensible_kv_cache`.
        num_gpu_blocks_override: ``--num-gpu-blocks-override`` as written, ``None`` unset.
        repeated_entrypoint: the image's entrypoint the container's ``args`` repeat (``args: [vllm, serve, ...]`` with
            no ``command``; :func:`~pdd_operator.vllm.entrypoint.repeated_entrypoint`), judged in the
            ``entrypoint-repeated`` rule; ``None`` for none (and for a PDDeployment's rendered roles).
        middleware: each ``--middleware`` of the argv (``module.object``), which the server imports at startup
            (:mod:`pdd_operator.vllm.middleware`; the ``middleware-module-missing`` rule).
        removed_flags: flags of the argv that vLLM removed (:func:`~pdd_operator.vllm.removed_flags.removed_flags`),
            judged by version in the ``cli-flag-removed`` rule.
        foreign_flags: flags of the argv that belong to another serving framework and that no vLLM parser read defines
            (:func:`~pdd_operator.vllm.foreign_flags.foreign_flags`), for vLLM's own entry points only (``()`` for a
            ``dynamo.vllm`` worker or a gRPC server, whose parsers differ); the ``cli-flag-unknown`` rule.
        flag_floor: ``(release, flag)``: the oldest release whose parser has every flag given
            (:func:`~pdd_operator.vllm.added_flags.flags_floor`), ``None`` when no listed flag is given.
        added_flags: the flags and short options of the argv that vLLM added in a known release
            (:func:`~pdd_operator.vllm.added_flags.added_flags`), judged by version in the ``cli-flag-not-yet`` rule.
        choice_values: ``(flag, value)`` for each flag of the argv whose values vLLM's parser takes as ``choices``
            (:data:`~pdd_operator.vllm.flag_choices.CHOICE_TABLES`), judged by version in ``engine-args-invalid``.
        parser_names: ``(flag, name)`` for the parser names the OpenAI server checks against its release's registry
            before it serves (:mod:`pdd_operator.vllm.parser_names`): ``--tool-call-parser`` with
            ``--enable-auto-tool-choice``, ``--reasoning-parser``; only for ``vllm serve`` / the api_server module
            (not ``--headless``) and not where the kind's plugin flag (``--tool-parser-plugin``) may register more
            names; judged by version in ``engine-args-invalid``.
        model_impl: ``--model-impl`` as written (``auto``, ``vllm``, ``transformers``, ``terratorch``), ``None`` unset
            (``auto``); with ``arch_overrides``, the flags that change which class serves an architecture
            (``--model-class-overrides``, ``--hf-overrides`` naming ``architectures``), judged in
            ``architecture-not-in-release``.
        lora_adapters: the LoRA adapter names ``--lora-modules`` serves (:func:`~pdd_operator.vllm.lora.adapter_names`),
            ``None`` where they cannot be read; judged in :mod:`pdd_operator.compat.rules.request_path`.
        lora_enabled: ``--enable-lora`` is given (vLLM's ``LoRAConfig`` is then built and adapters can be loaded at
            run time); judged with :attr:`lora_adapters`.
        mm_disabled: the multimodal inputs the server refuses (:func:`~pdd_operator.vllm.mm_inputs.disabled_modalities`:
            ``("*",)`` for ``--language-model-only``, else modalities limited to 0), ``None`` where not readable.
        connector_note: why the connector vLLM runs is not the ``--kv-transfer-config`` written first, or ``""``:
            ``--kv-offloading-size`` replaced it, or the flag is repeated and the last one wins
            (:mod:`pdd_operator.vllm.kv_offloading`).
        v0_fallback_flags: the flags written that may make vLLM 0.9-0.10's V1 oracle choose the V0 engine
            (:func:`~pdd_operator.vllm.v1_oracle.v0_fallback_flags`).
        connector_assumed: for a ``dynamo.vllm`` worker that names no connector and whose Dynamo release is not
            known, which default its connector was judged with and why that is an assumption
            (:func:`~pdd_operator.compat.dynamo_engine_defaults.added_connector`), or ``""``.
        connector_overwritten: for a ``dynamo.vllm`` worker whose Dynamo release replaces its ``--kv-transfer-config``
            (0.4.x: :func:`~pdd_operator.compat.dynamo_engine_defaults.overwritten_connector`), what it runs with
            instead, or ``""``; ``kv_transfer`` then holds Dynamo's config.
        dynamo_legacy_flag: the first flag of a ``dynamo.vllm`` worker that only Dynamo releases before 1.4 take and
            that was the only spelling before 1.0 (``--connector``, ``--is-prefill-worker``, ``--is-decode-worker``:
            :data:`~pdd_operator.compat.dynamo_engine_defaults.PRE_1_0_FLAGS`), or ``""``.
        aux_outputs: the flags given true that turn on an auxiliary per-request output of the engine
            (``--enable-return-routed-experts``), judged in :mod:`pdd_operator.compat.rules.aux_output`.
        moe_flags: the flags of the argv, as parsed (``(name, value)``), that vLLM allows only for some models or
            together: ``--enable-expert-parallel``, ``--enable-eplb``, ``--eplb-config`` and its dotted keys,
            ``--num-redundant-experts``, and external data-parallel load balancing (``--data-parallel-rank``,
            ``--data-parallel-external-lb``) and ``--all2all-backend``, judged in
            :mod:`pdd_operator.compat.rules.expert_parallel`.
        kv_events: ``--kv-events-config`` is given (any value: vLLM's ``kv_events_config`` is then set), or the launcher
            sets it itself (:attr:`kv_events_from`), judged in :mod:`pdd_operator.compat.rules.hma_forced`.
        kv_events_from: why ``kv_events`` holds without ``--kv-events-config`` on the command line (Dynamo's worker
            adds it, :mod:`pdd_operator.compat.dynamo_engine_defaults`), ``""`` otherwise.
        setup: what decides the values the container's script computes before this engine's launch line
            (:func:`script_setup`), ``""`` when it is no script or one whose setup may differ per pod.
    """

    role: str
    version: Version | None = None
    version_text: str | None = None
    model: str | None = None
    dtype: str | None = None
    tp: int | None = 1
    pp: int | None = 1
    dp: int | None = 1
    block_size: int | None = None
    kv_cache_dtype: str | None = None
    attention_backend: str | None = None
    attention_backend_flag: bool = False
    kv_transfer: dict = field(default_factory=dict)
    speculative: dict | None = None
    hma: bool | None = None
    prefix_caching: bool | None = None
    async_scheduling: bool | None = None
    disable_sliding_window: bool | None = None
    env: dict[str, str] = field(default_factory=dict)
    env_from: tuple[tuple[str, str], ...] = ()
    host_network: bool = False
    host_users: bool = True
    resources: dict[str, str] = field(default_factory=dict)
    capabilities: tuple[str, ...] = ()
    privileged: bool = False
    run_as_non_root: bool = False
    extra_args: tuple[str, ...] = ()
    dra_claims: tuple[str, ...] = ()
    networks: tuple[str, ...] = ()
    other_ports: tuple[int, ...] = ()
    http_port: int | None = None
    api_servers: int | None = None
    run_as_user: int | None = None
    sidecar_ports: tuple[tuple[str, int], ...] = ()
    proxies: tuple[Proxy, ...] = ()
    errors: tuple[str, ...] = ()
    malformed_options: tuple[str, ...] = ()
    malformed_places: tuple[str, ...] = ()
    missing_values: tuple[str, ...] = ()
    opaque: tuple[tuple[str, str], ...] = ()
    loose: str = ""
    wrapper: str | None = None
    kv_transfer_written: dict = field(default_factory=dict)
    ec_transfer_written: dict = field(default_factory=dict)
    kv_transfer_removed: tuple[str, ...] = ()
    attention_config_keys: tuple[str, ...] = ()
    pass_config_keys: tuple[str, ...] = ()
    scheduler: SchedulerBudget = field(default_factory=SchedulerBudget)
    #: the flags given that change the model's config.json as vLLM reads it (:data:`CONFIG_OVERRIDE_FLAGS`).
    config_overrides: tuple[str, ...] = ()
    revision: str | None = None
    pod_labels: dict[str, str] = field(default_factory=dict)
    nodes: tuple[NodeTerm, ...] | None = ((),)
    host_ports: frozenset[int] = frozenset()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    replicas: int | None = 1
    namespace: str | None = None
    container: str | None = None
    launcher: str = ""
    #: for an engine run by vLLM's gRPC server module (:data:`~pdd_operator.vllm.grpc_server.GRPC_SERVER_MODULES`,
    #: its own argument parser), the long flags its argv gives, as parsed; ``()`` for any other entry point.
    grpc_flags: tuple[str, ...] = ()
    dp_lb: tuple[tuple[str, ...], tuple[str, ...]] | None = ((), ())
    launcher_flags: tuple[tuple[str, str | bool], ...] = ()
    executor: str | None = None
    dp_local: int | None = None
    #: flags a ``--config`` file gives as a YAML mapping where the release does not tell how vLLM passes one
    #: (:func:`~pdd_operator.compat.config_files.undecided_mappings`).
    config_file_mappings: tuple[str, ...] = ()
    dp_first: int | None = 0
    dp_address: str | None = None
    pod_dp_ranks: int | None = None
    pcp: int | None = 1
    dcp: int | None = 1
    mamba_cache_mode: str | None = None
    mamba_cache_dtype: str | None = None
    mamba_ssm_cache_dtype: str | None = None
    memlock_ulimit: tuple[str | None, str | None] | None = None
    spans_nodes: bool = False
    pod_group: int = 1
    group_worker_gpus: int | None = None
    ray_cluster: bool = False
    group_gpus: int | None = None
    group_note: str = ""
    group_caveat: str = ""
    group_engine_spread: bool = False
    group_uniform: bool = False
    image: str = ""
    workload_kind: str = ""
    nixl_version: Version | None = None
    nixl_from: str = ""
    #: the container's command installs NIXL's Python package itself (``pip install`` of rixl / nixl / a wheel of
    #: theirs: :func:`pdd_operator.vllm.rocm_nixl.installs_nixl`), whatever its image ships
    installs_nixl: bool = False
    gpu_memory_utilization: float | None = 0.9
    kv_cache_memory_bytes: str | None = None
    #: the flags of the argv, as parsed (``(name, value)``), that change how much of the weights a GPU holds or how much
    #: memory the engine takes (:data:`WEIGHT_FLAGS`); ``None`` where the engine was not read from an argv (then the
    #: rules that count weights per GPU do not judge it)
    weight_flags: tuple[tuple[str, str | bool], ...] | None = None
    cumem_flags: tuple[str, ...] = ()
    extensible_kv_cache: bool | None = None
    num_gpu_blocks_override: str | None = None
    removed_flags: tuple[str, ...] = ()
    foreign_flags: tuple[str, ...] = ()
    middleware: tuple[str, ...] = ()
    repeated_entrypoint: RepeatedEntrypoint | None = None
    flag_floor: tuple[tuple[int, int, int], str] | None = None
    added_flags: tuple[str, ...] = ()
    choice_values: tuple[tuple[str, str], ...] = ()
    parser_names: tuple[tuple[str, str], ...] = ()
    model_impl: str | None = None
    arch_overrides: tuple[str, ...] = ()
    aux_outputs: tuple[str, ...] = ()
    v0_fallback_flags: tuple[str, ...] = ()
    moe_flags: tuple[tuple[str, str | bool], ...] = ()
    lora_adapters: tuple[str, ...] | None = ()
    lora_enabled: bool = False
    mm_disabled: tuple[str, ...] | None = ()
    kv_events: bool = False
    kv_events_from: str = ""
    connector_note: str = ""
    connector_assumed: str = ""
    connector_overwritten: str = ""
    dynamo_legacy_flag: str = ""
    setup: str = ""
    #: why a script's engine likely runs vLLM's CUDA platform where its image and resources do not say
    #: (:func:`pdd_operator.vllm.block_size.script_platform_hint`), else ""
    platform_hint: str = ""
    #: a script starts the engine on its host's GPUs as they are: directly or under Apptainer/Singularity (not in a
    #: docker/podman container, which gets its own devices, nor by srun or ssh), on a host the script shows GPUs of
    #: (:attr:`platform_hint`) (:func:`pdd_operator.compat.script_inputs.host_launch`)
    host_gpus: bool = False
    #: a script starts the engine in a ``docker run`` / ``podman run`` container (its image is the one that line names,
    #: :func:`pdd_operator.vllm.script.docker_run`), so fixes name that image, not a Slurm ``srun --container-image``
    script_docker: bool = False
    #: the program that starts the engine where it is not ``vllm`` / ``python -m``, as written (``vllm-rs`` or a path
    #: to it: vLLM's Rust frontend, :data:`pdd_operator.vllm.script.RUST_FRONTEND`), else ``None``
    frontend: str | None = None
    #: the names of ``--served-model-name``, as written (``()`` where the engine gives none): the server answers a
    #: request naming any of them (vllm/entrypoints/openai/models/serving.py ``is_base_model``, 0.30.0 line 50)
    served_model_names: tuple[str, ...] = ()
    #: the Hugging Face architecture the object around the engine declares for the models it serves, where the engine's
    #: own ``--model`` is filled in at run time (an OME runtime's ``spec.supportedModelFormats[].modelArchitecture``
    #: with ``$(MODEL_PATH)``: :func:`pdd_operator.compat.manifests.ome_architecture`); ``None`` where none is declared
    declared_architecture: str | None = None
    #: the host whose GPUs the container is handed by their host ordinals, for engines of separate containers that may
    #: share them (a Compose service's ``gpus``/``device_ids``, :mod:`pdd_operator.compat.compose_inputs`); ``""``
    #: where a device plugin hands each container its own GPUs (pods)
    gpu_host: str = ""
    #: the host ordinals of the container's GPUs in the order the container sees them (``device_ids``); ``None`` for
    #: every GPU of :attr:`gpu_host` in host order (``gpus: all``) or where not known (then only ``gpu_host`` is read)
    host_devices: tuple[str, ...] | None = None
    #: where the container mounts the node's RDMA device files: a ``hostPath`` volume of ``/dev/infiniband`` (or a
    #: path under it) named in its ``volumeMounts``, as llm-d's GPUDirect values and NVIDIA's network-operator samples
    #: hand a privileged pod the HCAs without a device plugin; ``""`` where none is mounted
    rdma_mount: str = ""
    #: the Hugging Face id the object around the engine says its local model path holds, where the engine serves a
    #: path an initializer fills (a KServe LLMInferenceService's ``spec.model.uri`` ``hf://org/name`` for the
    #: ``/mnt/models`` of its storage initializer: :func:`pdd_operator.compat.kserve_merge.model_source`), else ``None``
    model_source: str | None = None
    #: how :attr:`model_source` was read, or why the object names no model for the path (a ``pvc://`` or ``oci://``
    #: uri), for the pair's notes; ``""`` where nothing around the engine speaks of its model
    model_source_note: str = ""

    @property
    def served_model_name(self) -> str | None:
        """The first name of ``--served-model-name`` (``None`` where none is given): vLLM reports the first of several
        names as the model's (vllm/config/model.py ``get_served_model_name``, 0.34.0 lines 2367-2378)."""
        return self.served_model_names[0] if self.served_model_names else None

    @property
    def connector(self) -> str | None:
        return self.kv_transfer.get("kv_connector")

    @property
    def on_rocm(self) -> bool:
        """The engine runs vLLM's ROCm platform: its container asks for AMD GPUs (``amd.com/gpu``) or runs a ROCm
        image (``rocm/vllm``, ``...-rocm``)."""
        return any(k.startswith("amd.com/") for k in self.resources) or "rocm" in self.image.lower()

    @property
    def third_party_connector(self) -> str | None:
        """The module outside vLLM that the engine's connector class is loaded from (``kv_connector_module_path``:
        :func:`~pdd_operator.vllm.kv_transfer_config.third_party_module`), ``None`` where it is vLLM's own class."""
        return third_party_module(self.kv_transfer)

    @property
    def nixl(self) -> bool:
        """The engine transfers KV with vLLM's NIXL connector (directly or inside a wrapper): a class of that name
        loaded from a module outside vLLM (:attr:`third_party_connector`) is not."""
        return self.connector in NIXL_CONNECTORS and not self.third_party_connector

    @property
    def push(self) -> bool:
        """The engine pushes KV (``NixlPushConnector``, or from 0.34.0 ``NixlConnector`` with ``transfer_mode``
        push: :func:`~pdd_operator.vllm.transfer_mode.transfer_mode`)."""
        return self.transfer_mode == "push"

    @property
    def transfer_mode(self) -> str | None:
        """``"pull"``, ``"push"``, or ``None`` when not NIXL or not decidable
        (:func:`~pdd_operator.vllm.transfer_mode.transfer_mode`)."""
        return transfer_mode(self.connector, self.extra, self.version)

    @property
    def extra(self) -> dict:
        return self.kv_transfer.get("kv_connector_extra_config") or {}

    @property
    def backends(self) -> list[str]:
        """NIXL backends the engine's agent is asked for: ``kv_connector_extra_config.backends`` as written (vLLM's
        default: ``["UCX"]``), or ``["UCX"]`` on a release that does not read the key
        (:func:`pdd_operator.vllm.nixl_backends.effective`: before 0.11.0)."""
        return nixl_backends.effective(self.extra.get("backends"), self.version)

    @property
    def written_backends(self) -> list[str]:
        """``kv_connector_extra_config.backends`` as written (``["UCX"]`` where absent), whether or not read."""
        return nixl_backends.written(self.extra.get("backends"))

    @property
    def buffer_device(self) -> str | None:
        return self.kv_transfer.get("kv_buffer_device")

    @property
    def spec_method(self) -> str | None:
        return (self.speculative or {}).get("method")

    @property
    def num_spec_tokens(self) -> int | None:
        return (self.speculative or {}).get("num_speculative_tokens")

    @property
    def gpus(self) -> int | None:
        """Accelerators the container requests (``*/gpu`` resources, e.g. nvidia.com/gpu, amd.com/gpu), if a
        literal integer; ``None`` when none is requested or the count cannot be read."""
        counts = [v for k, v in self.resources.items() if k.endswith("/gpu")]
        if len(counts) != 1 or not str(counts[0]).isdigit():
            return None
        return int(counts[0])

    @property
    def kv_layout(self) -> str | None:
        """``VLLM_KV_CACHE_LAYOUT`` with the pre-0.29 aliases resolved (HND -> LBHNC, NHD -> LBNHC)."""
        value = self.env.get("VLLM_KV_CACHE_LAYOUT")
        return {"HND": "LBHNC", "NHD": "LBNHC"}.get(value, value) if value else None


@dataclass(frozen=True)
class PDPair:
    """A prefill/decode pair and what is known about its model.

    Attributes:
        source: what the pair was read from, for messages (``PDDeployment serving/llama``).
        prefill, decode: the two engines.
        model: the model's family and SSM kind.
        num_kv_heads: total KV heads, if known.
        checkpoint_dtype, checkpoint_kv_cache_dtype: from the model's config.json, its dtype and what
            ``--kv-cache-dtype auto`` becomes (:class:`~pdd_operator.vllm.model_config.ResolvedModel`); ``None`` where
            no config.json is known.
        n_groups: Mamba2 ``n_groups``, if known.
        managed: True for a PDDeployment (the operator sets the side channel and ports itself).
        shared_network: prefill and decode share one network namespace (containers of one pod).
        notes: facts the source could not provide (e.g. "vLLM version not found"), reported as warnings.
        paired_by: for engines read from manifests, how prefill and decode were joined into this pair.
        preflight: for a PDDeployment, ``spec.network.preflight.policy`` (``Warn``, ``Fail``, ``Disabled``).
        containers: for engines read from manifests, where each role's container is, as ``(path, flags key)``
            for prefill then decode: ``("Deployment/llama-prefill spec.template.spec.containers[0]", "args")``;
            the flags key is the container field holding vLLM's flags (``args`` or ``command``). Empty for a
            PDDeployment. Findings name these paths in ``fields``
            (:func:`~pdd_operator.compat.rules.base.manifest_fields`).
        either_way: the two engines both run ``kv_role`` ``kv_both`` and nothing in the manifest says which one
            prefills (a launch script of vLLM's own NIXL tests: the proxy picks the roles per request), so
            :func:`~pdd_operator.compat.engine.evaluate` judges the pair in both orientations
            (:meth:`mirrored`): an error only where both refuse it.
    """

    source: str
    prefill: RoleConfig
    decode: RoleConfig
    model: ModelTraits
    num_kv_heads: int | None = None
    n_groups: int | None = None
    checkpoint_dtype: str | None = None
    checkpoint_kv_cache_dtype: str | None = None
    #: config.json ``architectures[0]``, where known (:attr:`~pdd_operator.vllm.model_config.ResolvedModel.hf_architecture`).
    hf_architecture: str | None = None
    #: The known checkpoint whose config.json fields were read for this model, a quantized or re-published copy of
    #: it (:attr:`~pdd_operator.vllm.model_config.ResolvedModel.read_as`), and whether the name marks a quantization.
    model_read_as: str | None = None
    model_quantized: bool = False
    managed: bool = False
    shared_network: bool = False
    notes: tuple[str, ...] = ()
    paired_by: str = ""
    preflight: str | None = None
    containers: tuple[tuple[str, str], ...] = ()
    either_way: bool = False
    #: ``(role, where, config)`` of the other prefill engines in the prefill's network namespace (one pod, one
    #: script's host) and the other decode engines in the decode's, which no pair compares with these two
    #: (:func:`pdd_operator.compat.manifests.pair_engines`; the ``same-role-port-conflict`` rule)
    neighbours: tuple[tuple[str, str, RoleConfig], ...] = ()
    #: ``(where, config)`` of the encode workers of the pair's deployment and model (E/P/D disaggregation: they hand
    #: encoder outputs to the prefill and are never paired; :func:`pdd_operator.compat.manifests.encode_worker`), for
    #: the rules that compare their encoder-cache connector with the prefill's (``ec-connector-pair-mismatch``)
    encoders: tuple[tuple[str, RoleConfig], ...] = ()

    @property
    def roles(self) -> tuple[RoleConfig, RoleConfig]:
        return self.prefill, self.decode

    def mirrored(self) -> PDPair:
        """The same two engines with the roles swapped (the decode engine as prefill), ``either_way`` off."""
        return replace(self, prefill=replace(self.decode, role="prefill"), decode=replace(self.prefill, role="decode"),
                       containers=self.containers[::-1], either_way=False)

    @property
    def env_from(self) -> tuple[tuple[str, str, str], ...]:
        """``(role, name, why)`` for each variable an ``envFrom`` source not in these files may set
        (:attr:`RoleConfig.env_from`)."""
        return tuple((r.role, name, why) for r in self.roles for name, why in r.env_from)

    def env_from_unknown(self) -> PDPair:
        """The pair with every variable of :attr:`env_from` read as set to a value not in these files
        (:func:`~pdd_operator.vllm.expansion.unknown`, named in ``opaque``), the other reading of ``env``."""
        def unknown_env(r: RoleConfig) -> RoleConfig:
            return replace(r, env={**{n: unknown(n) for n, _ in r.env_from}, **r.env}, opaque=r.opaque + r.env_from,
                           env_from=())
        return replace(self, prefill=unknown_env(self.prefill), decode=unknown_env(self.decode))

    @property
    def one_container(self) -> bool:
        """Both engines are processes of one container (a script that starts both), read from a manifest."""
        return len(self.containers) == 2 and self.containers[0][0] == self.containers[1][0]

    @property
    def version(self) -> Version | None:
        """The version the rules assume: the older of the two when both are known and differ."""
        known = [r.version for r in self.roles if r.version is not None]
        if len(known) < 2:
            return None
        return min(known)

    @property
    def push(self) -> bool:
        return self.prefill.push and self.decode.push

    @property
    def hybrid_ssm(self) -> bool:
        return self.model.architecture == "hybrid-ssm"

    @property
    def mla(self) -> bool:
        return self.model.architecture in ("mla", "sparse-mla")

    @property
    def hybrid_mla(self) -> bool:
        """A hybrid SSM model whose attention layers are MLA (Kimi Linear: KDA + MLA;
        :attr:`~pdd_operator.vllm.architectures.ModelTraits.mla_attention`)."""
        return self.hybrid_ssm and self.model.mla_attention

    @property
    def page_kv_heads(self) -> int | None:
        """The KV heads the attention page per token shrinks with as TP grows (up to one per rank): 1 for a hybrid
        MLA model, whose latent is one head replicated on every rank (the MLA per-token page is TP-independent:
        nixl/base_worker.py 'Hybrid MLA+SSM (e.g. KimiLinear's KDA+MLA)', 0.27.0 l.1809, 0.32.0 l.2557, 0.34.0
        l.2953), else :attr:`num_kv_heads` (``None``: not known)."""
        return 1 if self.hybrid_mla else self.num_kv_heads

    @property
    def hma_required(self) -> bool:
        """Whether the engines run with the hybrid KV cache manager, which NIXL then has to follow.

        Hybrid SSM models: always (vLLM asserts it). Sliding-window or chunked-attention models: from
        vLLM 0.22, where HMA stays on with a NIXL connector, unless disabled on the command line; in
        0.18-0.21 only when both roles pass --no-disable-hybrid-kv-cache-manager (vllm-nixl-facts.md
        sections 1.5 and 4.2: ``_is_hma_required = not disable_hybrid_kv_cache_manager and
        any(non-FullAttentionSpec)``).
        """
        if self.model.needs_hma:
            return True
        if not self.model.sliding_window or self.version is None:
            return False
        if self.at_least((0, 22, 0)):
            return self.prefill.hma is not False and self.decode.hma is not False
        # Up to 0.21 a connector turns HMA off unless both roles ask for it (--no-disable-...).
        return self.at_least((0, 18, 0)) and self.prefill.hma is True and self.decode.hma is True

    @property
    def tps(self) -> tuple[int, int] | None:
        if self.prefill.tp is None or self.decode.tp is None:
            return None
        return self.prefill.tp, self.decode.tp

    @property
    def hetero_tp(self) -> bool:
        return self.tps is not None and self.tps[0] != self.tps[1]

    def at_least(self, version: Version) -> bool:
        return self.version is not None and self.version >= version


#: A container command that starts or joins a Ray cluster: ``ray start --head`` / ``ray start --address``, or
#: vLLM's ``examples/online_serving/multi-node-serving.sh leader|worker`` (its LWS guide), which runs them.
_RAY_CLUSTER = re.compile(r"\bray\s+start\b|multi-node-serving\.sh|--ray_cluster_size")


_SHELL_FLAGS = ("-c", "-lc", "-ec", "-exc", "-xc")
#: Prefixes of the variables the engine and its libraries read (vLLM, NIXL, UCX, NCCL, PyTorch, CUDA): a script's
#: setup does not compute with them unless it names them, so they may differ between the roles (a DS conv layout on
#: one only) without making the setups differ.
_ENGINE_ENV = ("VLLM_", "NIXL_", "UCX_", "NCCL_", "PYTORCH_", "CUDA_", "NVIDIA_")
#: Volume sources whose files may differ between pods or nodes (each pod's own emptyDir, each node's hostPath).
_PER_POD_VOLUMES = ("emptyDir", "hostPath", "ephemeral")


def script_setup(container: dict, pod_spec: dict | None, launch: Launch) -> str:
    """What decides the values an ``sh -c`` script computes before it launches ``launch`` (a loop over a model cache's
    snapshots, a command substitution): the image, the script's lines before the launch line, the ``env`` entries
    (as written: a ``valueFrom`` names its source; the engine's own :data:`_ENGINE_ENV` variables only where the
    setup names them) and ``envFrom`` sources of the container, and the source of each
    volume mounted at a path the setup names. Two engines with equal setups (in one namespace) compute the same
    values: the shell runs the same commands over the same files (POSIX Shell Command Language 2.9). ``""`` where
    there is no such script, or the setup reads a volume that may differ per pod or node (``emptyDir``,
    ``hostPath``)."""
    words = [str(x) for x in (container.get("command") or []) + (container.get("args") or [])]
    at = next((i for i, w in enumerate(words[:-1]) if w in _SHELL_FLAGS), None)
    if at is None or not launch.line or not words[0].rsplit("/", 1)[-1].endswith("sh"):
        return ""
    setup = "\n".join(words[at + 1].splitlines()[: launch.line - 1])
    if not setup.strip():
        return ""
    volumes = {v.get("name"): {k: x for k, x in v.items() if k != "name"} for v in (pod_spec or {}).get("volumes") or []}
    mounts = []
    for m in container.get("volumeMounts") or []:
        path = str(m.get("mountPath") or "")
        if path and path in setup:
            source = volumes.get(m.get("name"), {})
            if not source or any(k in source for k in _PER_POD_VOLUMES):
                return ""
            mounts.append([path, m.get("subPath"), source])
    env = [e for e in container.get("env") or [] if isinstance(e, dict)
           and (not str(e.get("name", "")).startswith(_ENGINE_ENV) or re.search(rf"\$\{{?{e.get('name')}\b", setup))]
    return json.dumps([container.get("image"), setup, env, container.get("envFrom") or [], sorted(mounts, key=str)],
                      sort_keys=True, default=str)


#: Pod annotations through which a platform attaches the pod to further networks (an RDMA NIC with its own GID and
#: address in the pod), and whether the value is Multus's comma-separated list of network names:
#: - ``k8s.v1.cni.cncf.io/networks``: Multus secondary networks (k8snetworkplumbingwg/multus-cni docs/how-to-use.md);
#: - ``v1.multus-cni.io/default-network``: Multus's replacement of the default network (same document, "Specifying a
#:   default network"; Kube-OVN's SR-IOV guide gives a mellanox.com/cx5_sriov_switchdev pod its network this way);
#: - ``k8s.volcengine.com/pod-networks``: Volcano Engine's pod networks, a JSON list of ``cniConf`` entries, as AIBrix
#:   attaches ``vke.volcengine.com/rdma`` pods (vllm-project/aibrix samples/disaggregation/vllm/1p1d.yaml and README.md:
#:   "specific to Volcano Engine Cloud");
#: - ``networking.gke.io/interfaces``: GKE multi-network, a JSON list of ``{interfaceName, network}`` that binds the
#:   pod to the node's RDMA NICs (cloud.google.com/kubernetes-engine/docs/how-to/setup-multinetwork-support-for-pods;
#:   A3 Ultra / A4 GPUDirect RDMA pods list rdma-0 ... there).
NETWORK_ATTACHMENT_ANNOTATIONS: tuple[tuple[str, bool], ...] = (
    ("k8s.v1.cni.cncf.io/networks", True),
    ("v1.multus-cni.io/default-network", False),
    ("k8s.volcengine.com/pod-networks", False),
    ("networking.gke.io/interfaces", False),
)


def pod_network_attachments(annotations: dict) -> tuple[str, ...]:
    """The network attachments a pod's annotations request (:data:`NETWORK_ATTACHMENT_ANNOTATIONS`): each Multus
    secondary network name, and ``<annotation>`` for each other attachment annotation with a value; ``()`` for
    none."""
    out: list[str] = []
    for key, is_list in NETWORK_ATTACHMENT_ANNOTATIONS:
        value = str(annotations.get(key) or "").strip()
        if not value:
            continue
        if is_list and not value.startswith("["):
            out += [n.strip() for n in value.split(",") if n.strip()]
        else:
            out.append(key)
    return tuple(out)


def rdma_mount(container: dict, pod_spec: dict) -> str:
    """The ``mountPath`` at which ``container`` mounts a ``hostPath`` volume of the node's ``/dev/infiniband`` (the
    RDMA device files: uverbs, rdma_cm), or ``""``. ``container``, ``pod_spec``: camelCase dicts as in a manifest."""
    infiniband = {str(v.get("name")) for v in pod_spec.get("volumes") or [] if isinstance(v, dict)
                  and str((v.get("hostPath") or {}).get("path") or "").rstrip("/").startswith("/dev/infiniband")}
    return next((str(m.get("mountPath") or "") for m in container.get("volumeMounts") or []
                 if isinstance(m, dict) and str(m.get("name")) in infiniband), "")


def partly_read_kv_transfer(
    flags: dict, opaque: tuple[tuple[str, str], ...], written: list[str], cenv: ContainerEnv | None,
) -> tuple[dict, tuple[tuple[str, str], ...]] | None:
    """An engine's ``--kv-transfer-config`` read as far as it is known, where it is opaque (in ``opaque``,
    :func:`~pdd_operator.vllm.expansion.opaque_value`) only because some of its values are not in the files:
    :func:`~pdd_operator.vllm.kv_transfer_config.read_partly`'s ``(config, unknown fields)``, each value's opacity
    judged as the flag's is (``written``: the container's command and args; ``cenv``: its environment). ``None``
    where the flag is known, absent, or unknown as a whole (not JSON, or its connector, module path, role or extra
    config object is unknown: the engine's KV transfer settings are then not in the files)."""
    raw = flags.get("--kv-transfer-config")
    if "--kv-transfer-config" not in dict(opaque) or not isinstance(raw, str):
        return None
    return read_partly(raw, lambda text: opaque_value(text, written, cenv))


def role_from_container(
    role: str, container: dict, pod_spec: dict | None, *, version_text: str | None, pod_meta: dict | None = None,
    launch: Launch | None = None,
) -> RoleConfig:
    """Build a :class:`RoleConfig` from a Pod's container (camelCase dicts, as in a manifest).

    ``launch``: which of the engines the container starts (:func:`~pdd_operator.vllm.args.container_launches`;
    a script may start several) this role is; ``None``: the first. Its argv gives the flags; its env (what the
    script sets for that process) overrides the container's; resources and security context come from the
    container and its pod spec.
    """
    pod_spec = pod_spec or {}
    if launch is None:
        found = [x for x in container_launches(container, image_runs_vllm=is_vllm_image(str(container.get("image") or "")))
                 if opaque_command(x) is None]  # a command held in a variable of unknown value is no engine to read
        launch = found[0] if found else Launch(())
    argv = list(launch.argv)
    serve = leading_entry(argv) == 2  # ``vllm serve`` (by any path), not ``python -m ...api_server``
    model, flags = parse_flags(argv) if argv else (None, {})
    errors = []
    written = [str(x) for x in (container.get("command") or []) + (container.get("args") or [])]
    cenv = container_env(container)
    opaque = tuple((name, why) for name, value in flags.items() if (why := opaque_value(value, written, cenv)))
    if "--model" not in flags and (why := opaque_value(model, written, cenv)):
        opaque += (("--model", why),)
    partly = partly_read_kv_transfer(flags, opaque, written, cenv)
    if partly is not None:  # only some values of its JSON are unknown: the rest is read (kv_transfer_config.read_partly)
        opaque = tuple(o for o in opaque if o[0] != "--kv-transfer-config") + tuple(
            (f"--kv-transfer-config {path}", why) for path, why in partly[1])
    known = {name: value for name, value in flags.items() if name not in dict(opaque)}
    env = _role_env(cenv, launch)
    opaque += tuple((name, _env_why(name, cenv, launch)) for name, value in env.items() if unknown_names(value))
    opaque += tuple((name, why) for name, value in env.items() if (why := placeholder_why(value)))
    env_from = tuple((name, _env_why(name, cenv, launch)) for name in READ_ENV
                     if name not in env and cenv.may_define(name))
    kv_transfer, speculative, wrapper, removed = {}, None, None, ()
    raw_kv: object = {}
    try:
        raw_kv = partly[0] if partly is not None else json_flag(known, "--kv-transfer-config") or {}
        errors.extend(kv_transfer_config_errors(raw_kv, role_required="dynamo.vllm" not in argv))
        removed = refused_fields(raw_kv) if isinstance(raw_kv, dict) else ()
        kv_transfer, wrapper = unwrap_connector(well_typed(raw_kv))
        if partly is not None:  # the copies unwrap_connector made name the unknown values again
            kv_transfer = partly_known(kv_transfer, lambda text: opaque_value(text, written, cenv))
    except ValueError as exc:
        errors.append(str(exc))
    connector_note = ""
    if (written_connectors := repeated_connectors(argv)) and len(written_connectors) > 1:
        connector_note = (f"--kv-transfer-config is given {len(written_connectors)} times ({', '.join(written_connectors)}); "
                          "vLLM's parser keeps the last one (vllm/utils/argparse_utils.py only logs 'Found duplicate keys')")
    if (offloaded := offloading_connector(known, rules_version(version_text))) is not None:
        kv_transfer, wrapper, connector_note = offloaded[0], None, offloaded[1]
    try:
        raw_ec = json_flag(known, "--ec-transfer-config") or {}
    except ValueError:  # not judged (no rule reads a malformed EC config yet)
        raw_ec = {}
    try:
        speculative = json_flag(known, "--speculative-config")
    except ValueError as exc:
        errors.append(str(exc))
    attention_backend = known.get("--attention-backend")
    attention_config: object = {}
    try:
        attention_config = json_flag(known, "--attention-config") or json_flag(known, "-ac") or {}
        attention_backend = attention_backend or attention_config.get("backend")
    except (ValueError, AttributeError) as exc:
        errors.append(str(exc))
    try:  # only its pass_config keys are read (config_fields.PASS_CONFIG); other values are not judged here
        pass_config = (json_flag(known, "--compilation-config") or json_flag(known, "-cc") or {}).get("pass_config")
    except ValueError:
        pass_config = None
    disable_hma = known.get("--disable-hybrid-kv-cache-manager")  # a str only when unknown (then opaque: None)
    disable_hma = disable_hma if isinstance(disable_hma, bool) else None
    res = container.get("resources") or {}
    resources = {k: str(v) for k, v in {**(res.get("requests") or {}), **(res.get("limits") or {})}.items()}
    sc = container.get("securityContext") or {}
    pod_sc = pod_spec.get("securityContext") or {}
    run_as_user = sc.get("runAsUser", pod_sc.get("runAsUser"))
    non_root = bool(sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))) or (run_as_user not in (None, 0))

    def text(name: str) -> str | None:
        value = flags.get(name)
        return value if isinstance(value, str) else None

    other_ports = []
    port = int_flag(flags, "--port", 8000)
    # Dynamo's worker serves no HTTP (its frontend does); nor does ``vllm serve --headless``, which starts engine cores
    # only (entrypoints/cli/serve.py run_headless, 0.9.1 lines 113-152: no API server)
    http_port = None
    # ``--uds PATH`` (0.10.1+) serves HTTP on a Unix socket instead of --port (api_server.py setup_server, 0.10.1.1
    # ``if args.uds: sock = create_server_unix_socket(args.uds)``; 0.34.0 launchers/launcher.py): no TCP port
    # nor an engine a Python program builds in its own process (vllm.LLM: no API server, IN_PROCESS_ENGINE)
    if port is not None and argv[:1] != ["dynamo.vllm"] and flags.get("--headless") is not True \
            and "--uds" not in flags and launch.wrapper[:1] != (IN_PROCESS_ENGINE,):
        other_ports.append(port)
        http_port = port
    try:
        events = json_flag(known, "--kv-events-config") or {}
    except ValueError as exc:
        errors.append(str(exc))
        events = {}
    if events.get("enable_kv_cache_events") or events.get("publisher"):
        endpoint = str(events.get("endpoint", "tcp://*:5557"))
        tail = endpoint.rsplit(":", 1)[-1]
        if tail.isdigit():
            other_ports.append(int(tail))
    # MoRIIOConnector's handshake and notify listeners (ZeroMQ, one per worker: pdd_operator.vllm.moriio_ports)
    dp_rank = int_flag(flags, "--data-parallel-rank", None)
    dp_ranks = [dp_rank] if dp_rank is not None else range(int_flag(flags, "--data-parallel-size", 1) or 1)
    other_ports += [p for p in moriio_listener_ports(raw_kv if isinstance(raw_kv, dict) else {},
                                                     int_flag(flags, "--tensor-parallel-size", 1), dp_ranks)
                    if p not in other_ports]
    annotations = (pod_meta or {}).get("annotations") or {}
    pod_labels = {str(k): str(v) for k, v in ((pod_meta or {}).get("labels") or {}).items()}
    networks = pod_network_attachments(annotations)

    version = rules_version(version_text)
    image = str(container.get("image") or "")
    command_text = " ".join(str(x) for x in (container.get("command") or []) + (container.get("args") or []))
    nixl, nixl_from = nixl_version(command_text, image, version)
    return RoleConfig(
        role=role,
        image=image, nixl_version=nixl, nixl_from=nixl_from, installs_nixl=installs_nixl(command_text),
        version=version,
        version_text=version_text,
        model=model,
        served_model_names=tuple((text("--served-model-name") or "").split()),  # nargs="+", joined by parse_flags
        frontend=launch.frontend,
        dtype=text("--dtype"),
        tp=int_flag(flags, "--tensor-parallel-size", 1),
        pp=int_flag(flags, "--pipeline-parallel-size", 1),
        dp=int_flag(flags, "--data-parallel-size", 1),
        block_size=int_flag(flags, "--block-size", None),
        kv_cache_dtype=text("--kv-cache-dtype"),
        attention_backend=attention_backend if isinstance(attention_backend, str) else None,
        attention_backend_flag=known.get("--attention-backend") not in (None, False),
        kv_transfer=kv_transfer,
        speculative=speculative,
        hma=None if disable_hma is None else not disable_hma,
        prefix_caching=flags.get("--enable-prefix-caching") if isinstance(flags.get("--enable-prefix-caching"), bool) else None,
        async_scheduling=known.get("--async-scheduling") if isinstance(known.get("--async-scheduling"), bool) else None,
        disable_sliding_window=known.get("--disable-sliding-window") if isinstance(
            known.get("--disable-sliding-window"), bool) else None,
        env=env,
        env_from=env_from,
        host_network=bool(pod_spec.get("hostNetwork")),
        host_users=pod_spec.get("hostUsers") is not False,
        resources=resources,
        capabilities=tuple((sc.get("capabilities") or {}).get("add") or ()),
        privileged=sc.get("privileged") is True,
        run_as_non_root=non_root,
        dra_claims=tuple(c.get("name", "") for c in (res.get("claims") or [])),
        networks=networks,
        other_ports=tuple(other_ports),
        http_port=http_port,
        run_as_user=run_as_user if isinstance(run_as_user, int) else None,
        api_servers=api_server_count(serve, flags, int_flag(flags, "--data-parallel-size", 1), local_data_parallel(flags),
                                     env),
        sidecar_ports=sidecar_ports(container, pod_spec),
        proxies=pod_proxies(container, pod_spec) + tuple(p for words in launch.proxies if (p := command_proxy(words))),
        errors=tuple(errors),
        malformed_options=malformed_options(argv),
        malformed_places=malformed_option_places(argv),
        missing_values=missing_values(argv),
        opaque=opaque,
        loose=(f"possibly set by ${loose}, which is not in these files and stands where flags do on its command line"
               if (loose := loose_unknown(argv)) else ""),
        setup=script_setup(container, pod_spec, launch),
        wrapper=wrapper,
        kv_transfer_written=(partly_known(well_typed(raw_kv), lambda text: opaque_value(text, written, cenv))
                             if isinstance(raw_kv, dict) else {}),
        ec_transfer_written=raw_ec,
        kv_transfer_removed=removed,
        attention_config_keys=tuple(str(k) for k in attention_config) if isinstance(attention_config, dict) else (),
        pass_config_keys=tuple(str(k) for k in pass_config) if isinstance(pass_config, dict) else (),
        scheduler=SchedulerBudget.from_flags(flags),
        config_overrides=tuple(f for f in CONFIG_OVERRIDE_FLAGS if f in flags),
        revision=text("--revision"),
        pod_labels=pod_labels,
        nodes=node_terms(pod_spec),
        rdma_mount=rdma_mount(container, pod_spec),
        host_ports=host_ports(pod_spec),
        anti_affinity=pod_affinity_terms(pod_spec, pod_labels, "podAntiAffinity"),
        pod_affinity=pod_affinity_terms(pod_spec, pod_labels, "podAffinity"),
        container=container.get("name"),
        launcher="dynamo.vllm" if argv[:1] == ["dynamo.vllm"] else "",
        grpc_flags=tuple(f for f in flags if f.startswith("--")) if argv[:1] and argv[0] in GRPC_SERVER_MODULES
        else (),
        dp_lb=lb_modes(flags) if serve else ((), ()),
        launcher_flags=tuple((f, v) for f, v in flags.items() if f in _LAUNCHER_FLAGS) if argv[:1] == ["dynamo.vllm"]
        else (),
        executor=text("--distributed-executor-backend"),
        dp_local=local_data_parallel(flags),
        config_file_mappings=tuple(str(f) for f in container.get(MAPPINGS_KEY) or ()),
        dp_first=first_local_rank(flags),
        dp_address=text("--data-parallel-address"),
        pcp=int_flag(flags, "--prefill-context-parallel-size", 1),
        dcp=int_flag(flags, "--decode-context-parallel-size", 1),
        mamba_cache_mode=text("--mamba-cache-mode"),
        mamba_cache_dtype=text("--mamba-cache-dtype"),
        mamba_ssm_cache_dtype=text("--mamba-ssm-cache-dtype"),
        memlock_ulimit=memlock_ulimit(written, launch.line),
        ray_cluster=bool(_RAY_CLUSTER.search(command_text)),
        gpu_memory_utilization=_fraction(flags.get("--gpu-memory-utilization", "0.9")),
        kv_cache_memory_bytes=(str(flags["--kv-cache-memory-bytes"])
                               if flags.get("--kv-cache-memory-bytes") not in (None, True) else None),
        spans_nodes=spans_nodes(flags),
        cumem_flags=tuple(f for f in ("--enable-cumem-allocator", "--enable-sleep-mode") if flags.get(f) is True),
        extensible_kv_cache=(v if isinstance(v := flags.get("--enable-extensible-kv-cache"), bool) else None),
        num_gpu_blocks_override=(str(flags["--num-gpu-blocks-override"])
                                 if flags.get("--num-gpu-blocks-override") not in (None, True) else None),
        removed_flags=removed_flags(flags),
        foreign_flags=(foreign_flags(flags) if argv[:1] != ["dynamo.vllm"] and not (argv[:1] and argv[0] in GRPC_SERVER_MODULES)
                       else ()),
        middleware=tuple(flag_values(argv, "--middleware")),
        flag_floor=flags_floor(dict.fromkeys(added := added_flags(flags, short_options(argv)))),
        added_flags=added,
        choice_values=tuple((f, v) for f, v in flags.items() if f in CHOICE_TABLES and isinstance(v, str)),
        parser_names=_parser_names(flags) if leading_entry(argv) in (2, 3) and flags.get("--headless") is not True
        else (),
        model_impl=text("--model-impl"),
        arch_overrides=tuple(f for f, v in flags.items() if f.startswith("--model-class-overrides")
                             or (f.startswith("--hf-overrides") and "architectures" in f"{f} {v}")),
        aux_outputs=tuple(f for f in ("--enable-return-routed-experts",) if flags.get(f) is True),
        v0_fallback_flags=v0_fallback_flags(flags),
        moe_flags=tuple((f, v) for f, v in flags.items() if f in _MOE_FLAGS or f.startswith("--eplb-config.")),
        weight_flags=tuple((f, v) for f, v in flags.items() if f in WEIGHT_FLAGS),
        lora_adapters=adapter_names(flags.get("--lora-modules")),
        lora_enabled=flags.get("--enable-lora") is True,
        mm_disabled=disabled_modalities(flags.get("--language-model-only"), flags.get("--limit-mm-per-prompt")),
        kv_events="--kv-events-config" in flags,
        connector_note=connector_note,
    )


def _parser_names(flags: dict) -> tuple[tuple[str, str], ...]:
    """The parser names of :attr:`RoleConfig.parser_names` from an OpenAI server's parsed ``flags``."""
    out = []
    for flag, (_, plugin, _) in PARSER_FLAGS.items():
        value = flags.get(flag)
        if not isinstance(value, str) or not value or flags.get(plugin) not in (None, False, ""):
            continue
        if flag == "--tool-call-parser" and flags.get("--enable-auto-tool-choice") is not True:
            continue  # validate_api_server_args checks the name only with --enable-auto-tool-choice
        out.append((flag, value))
    return tuple(out)


def _role_env(cenv: ContainerEnv, launch: Launch) -> dict[str, str]:
    """The engine's environment as the rules read it (:attr:`RoleConfig.env`), from its container's environment
    ``cenv`` and the engine's ``launch``: the container's literal ``env`` (downward-API IPs as sentinels), a variable
    set through ``valueFrom`` whose value is not in these files as :func:`~pdd_operator.vllm.expansion.unknown` (set,
    to a value nobody here can read: never vLLM's default), then what the script sets for this process
    (``launch.env``). Variables an ``envFrom`` source may set are not here but in :attr:`RoleConfig.env_from`."""
    return {**{name: unknown(name) for name in sorted(cenv.opaque)}, **cenv.values, **launch.env}


def _env_why(name: str, cenv: ContainerEnv, launch: Launch) -> str:
    """Why env variable ``name`` of an engine is unknown (:attr:`RoleConfig.opaque`): a variable of the script, a
    ``valueFrom`` source, or an ``envFrom`` source that may set it. Two engines whose reasons are equal and name an
    ``envFrom`` source read the same value (:func:`pdd_operator.compat.engine._same_unknown`)."""
    if name in launch.env:
        return "set from a variable whose value is not in these files"
    if name in cenv.opaque:
        return f"set from a valueFrom source whose value is not in these files ({cenv.source(name)})"
    return (f"possibly set by the container's envFrom {cenv.may_define(name)}, which is not in these files and may "
            "set any variable")


def _fraction(raw: str | bool) -> float | None:
    try:
        return float(str(raw))
    except ValueError:
        return None


def host_ports(pod_spec: dict) -> frozenset[int]:
    """The TCP host ports a pod spec (camelCase dict) asks the scheduler for (:attr:`RoleConfig.host_ports`):
    every container's (init containers' too, and an OME component's ``runner``) ``ports[].hostPort``, and
    ``containerPort`` where the pod uses the host network and no ``hostPort`` is written. Ports whose value is not a
    literal integer are left out."""
    host_net = bool(pod_spec.get("hostNetwork"))
    out = set()
    runner = [pod_spec["runner"]] if isinstance(pod_spec.get("runner"), dict) else []
    for c in (pod_spec.get("containers") or []) + (pod_spec.get("initContainers") or []) + runner:
        for port in (c.get("ports") or []) if isinstance(c, dict) else []:
            if not isinstance(port, dict) or str(port.get("protocol", "TCP")).upper() != "TCP":
                continue
            value = port.get("hostPort", port.get("containerPort") if host_net else None)
            if isinstance(value, int) and not isinstance(value, bool):
                out.add(value)
    return frozenset(out)


#: The flags kept in :attr:`RoleConfig.weight_flags`: what sets the memory fraction an engine takes, and what moves
#: or shrinks its weights (online quantization, CPU offload, a load format that loads none or loads them elsewhere).
WEIGHT_FLAGS = ("--gpu-memory-utilization", "--quantization", "-q", "--cpu-offload-gb", "--load-format",
                "--kv-cache-memory-bytes", "--offload-backend", "--offload-group-size", "--offload-num-in-group",
                "--offload-prefetch-step")

#: The expert-parallel flags kept in :attr:`RoleConfig.moe_flags` (besides ``--eplb-config.<key>``).
_MOE_FLAGS = ("--enable-expert-parallel", "--enable-eplb", "--eplb-config", "--num-redundant-experts",
              "--data-parallel-rank", "--data-parallel-external-lb", "--all2all-backend")


#: Flags of ``extraArgs`` that the user owns on a PDDeployment: the operator renders them only when
#: ``extraArgs`` does not (``--host``: :func:`pdd_operator.render.engine.user_bind_host`), so the
#: managed-flag rule does not see them.
USER_FLAGS = ("--host",)


def _without_user_flags(extra_args: list[str]) -> list[str]:
    """``extra_args`` without :data:`USER_FLAGS` and their values."""
    out: list[str] = []
    skip = False
    for arg in extra_args:
        if skip:
            skip = False
        elif arg in USER_FLAGS:
            skip = True
        elif arg.split("=", 1)[0] not in USER_FLAGS:
            out.append(arg)
    return out


def from_pddeployment(spec, name: str = "", namespace: str = "default", model_config: dict | None = None) -> PDPair:
    """The pair a PDDeployment spec will run, read back from the pods the operator renders for it.

    ``spec`` is a :class:`~pdd_operator.api.spec.PDDeploymentSpec`; ``model_config`` the model's
    parsed config.json, if the user supplied one. Going through the rendered pod templates means the
    rules judge exactly what would be started. Explicit ``spec.model`` fields win over config.json,
    which wins over the name tables.
    """
    version, _ = resolve_version(spec.engine.vllm_version, spec.engine.image)
    version_text = spec.engine.vllm_version or image_version_text(spec.engine.image) or (
        ".".join(map(str, version)) if version else None)
    owner = Owner(name=name or "pdd", namespace=namespace)
    roles = {}
    for role in ("prefill", "decode"):
        template = pod_template(owner, role, spec, model_config)
        pod = template["spec"]
        config = role_from_container(role, pod["containers"][0], pod, version_text=version_text,
                                     pod_meta=template["metadata"])
        extra_args = tuple(_without_user_flags(spec.role(role).extra_args))
        roles[role] = RoleConfig(**{**config.__dict__, "extra_args": extra_args,
                                    "replicas": spec.role(role).replicas})
    resolved = resolve_model(spec.model, model_config)
    if version is not None:
        notes: tuple[str, ...] = ()
    elif version_text and dev_build(version_text):
        notes = (dev_build_note(version_text) + (" (spec.engine.vllmVersion)" if spec.engine.vllm_version
                                                 else " (spec.engine.image tag)"),)
    else:
        # a launcher's or vendor's own release tag (Ray, NGC, RHAIIS), else where the release would come from
        why = unknown_tag_note(spec.engine.image) or tag_uncertainty(spec.engine.image)
        notes = (f"the vLLM version cannot be determined from image {spec.engine.image!r}",) + ((why,) if why else ())
    return PDPair(
        source=f"PDDeployment {namespace}/{name}" if name else "PDDeployment",
        prefill=roles["prefill"], decode=roles["decode"], model=resolved.traits,
        num_kv_heads=resolved.num_kv_heads, n_groups=resolved.n_groups, managed=True, notes=notes,
        checkpoint_dtype=resolved.checkpoint_dtype, checkpoint_kv_cache_dtype=resolved.checkpoint_kv_cache_dtype,
        hf_architecture=resolved.hf_architecture,
        model_read_as=resolved.read_as, model_quantized=resolved.quantized,
        preflight=str(spec.network.preflight.policy),
    )
