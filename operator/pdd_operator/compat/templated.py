"""What an engine whose command line KServe's templates supply still shows in the manifest, and what vLLM refuses
from that alone.

A KServe ``LLMInferenceService`` ``main`` container without ``command`` runs the command of KServe's
LLMInferenceServiceConfig templates, which are not in the user's files (:func:`~pdd_operator.compat.manifests.
_kserve_templated` reports such an engine "not checked"). Three things of it are still the user's own: the
container's image, its env, and the part of the engine line KServe appends from the user. KServe's templates
(kserve/kserve config/llmisvcconfig/config-llm-template.yaml, config-llm-prefill-template.yaml: ``exec vllm serve
/mnt/models --served-model-name ... --port 8000 ${ACCESS_LOG_ARGS} ${SHUTDOWN_TIMEOUT_ARGS} ${KV_TRANSFER_ARGS} ...
${VLLM_ADDITIONAL_ARGS} $@``) append the container's ``VLLM_ADDITIONAL_ARGS`` env and its ``args`` to
``vllm serve`` and add none of the flags judged here. A startup refusal that depends only on those three is
therefore a promise whatever else the template adds; everything else stays "not checked".

The same holds between the two roles of a P/D service for what the template never sets (:data:`TEMPLATE_FREE_RULES`):
the side-channel host (the templates' env is ``HOME``, ``VLLM_LOGGING_LEVEL`` and ``HF_HUB_CACHE``, and KServe's
llmisvc controller injects no NIXL variable), the KV cache dtype and the block size (no template passes
``--kv-cache-dtype`` or ``--block-size``; ``${KV_TRANSFER_ARGS}`` is an offloading ``--kv-transfer-config`` added
only where the user gives none), the image (the container's own field: the template's image applies only where
the container names none) and the P/D connector (no template of kserve v0.15.0-v0.20.0 or the current tree names
NixlConnector or any P/D connector; from v0.20.0 ``${KV_TRANSFER_ARGS}`` renders an OffloadingConnector from the
role's ``kvCacheOffloading`` and "" where that field is unset, pkg/controller/v1alpha2/llmisvc/config_merge.go
``kvTransferConfig`` l.641-648 of v0.20.0). A pair fault in those values alone (:func:`templated_pair_findings`)
fails the pair whatever the template adds, as it does for an engine line written in full. A pair whose user parts
name no connector at all runs without one on every released template (kserve#5987); kserve#6027, merged after
v0.20.0, makes the templates inject NixlConnector, and the cluster's KServe release is not in the files, so that
pair gets a ``kv-connector-missing`` warning beside its "not checked".
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

from pdd_operator.api.status import Finding
from pdd_operator.compat.rules import RULES_BY_ID
from pdd_operator.compat.rules.early_nixl import use_v1_zero_fault
from pdd_operator.compat.rules.memory import (
    CUMEM_ALLOCATOR_FLAG_SINCE,
    CUMEM_FLAGS,
    EXPANDABLE_SEGMENTS_REFUSED_SINCE,
    expandable_segments_fault,
)
from pdd_operator.vllm.args import container_env, env_values
from pdd_operator.vllm.expansion import unknown_names
from pdd_operator.vllm.flags import parse_flags
from pdd_operator.vllm.versions import Version, fmt, version_from_image

if TYPE_CHECKING:
    from pdd_operator.compat.pair import PDPair

#: The env variable whose value KServe's templates append to ``vllm serve`` (the templates above).
ADDITIONAL_ARGS_ENV = "VLLM_ADDITIONAL_ARGS"


def user_engine_args(container: dict) -> list[str]:
    """The part of a KServe-templated engine's ``vllm serve`` line the container itself gives: its
    ``VLLM_ADDITIONAL_ARGS`` env value (split as bash splits an unquoted expansion inside ``eval``, i.e. with
    shell quoting) followed by its ``args``. ``[]`` when neither is set; a value that does not split (an
    unbalanced quote) gives ``[]`` for that part."""
    env = env_values(container.get("env"))
    try:
        extra = shlex.split(env.get(ADDITIONAL_ARGS_ENV, ""))
    except ValueError:
        extra = []
    return [*extra, *(str(a) for a in container.get("args") or [])]


#: The model path KServe's templates serve (``vllm serve /mnt/models``; the storage initializer or modelcar puts the
#: checkpoint there), every release of kserve config/llmisvcconfig read (v0.15 to the current tree).
TEMPLATE_MODEL_PATH = "/mnt/models"

#: The pair rules a KServe-templated P/D service is judged on from its user part alone: they read only the
#: side-channel host env, ``--kv-cache-dtype``, ``--block-size``, the KV connector and the image's vLLM release,
#: none of which KServe's templates (config-llm-template.yaml, config-llm-prefill-template.yaml, the
#: -worker-data-parallel ones: kserve v0.15-current, red-hat-data-services rhoai-3.4 to rhoai-3.6) set, while the
#: user's ``VLLM_ADDITIONAL_ARGS`` come last on the template's ``vllm serve`` line. ``vllm-version-mismatch`` reads
#: the versions of images both containers name (an image left to the template is an unknown release, which that
#: rule never judges); ``kv-connector-missing`` a role whose user part names no connector while the other's names
#: NixlConnector (:func:`templated_pair_findings` says when).
TEMPLATE_FREE_RULES = ("side-channel-host-not-routable", "kv-cache-dtype-mismatch", "block-size-direction",
                       "vllm-version-mismatch", "kv-connector-missing")


def template_engine(container: dict, served: str | None) -> dict | None:
    """The container as KServe's template runs it, for reading the user's part: ``command`` becomes ``vllm serve
    /mnt/models [--served-model-name SERVED] <VLLM_ADDITIONAL_ARGS> <args>`` (:func:`user_engine_args`), the rest
    of the container (image, env, envFrom, resources) as written. ``served``: the service's ``spec.model.name``,
    which the templates pass as ``--served-model-name``. ``None`` where the user part cannot be read: a
    ``VLLM_ADDITIONAL_ARGS`` from a Secret, ConfigMap or ``envFrom`` not in the files."""
    if unknown_names(container_env(container).kube(ADDITIONAL_ARGS_ENV)):
        return None
    served_flags = ["--served-model-name", served] if served else []
    line = ["vllm", "serve", TEMPLATE_MODEL_PATH, *served_flags, *user_engine_args(container)]
    return {**container, "command": line, "args": []}


def templated_pair_findings(pair: PDPair, offloading: frozenset[str] = frozenset()) -> tuple[Finding, ...]:
    """The findings of :data:`TEMPLATE_FREE_RULES` for a KServe-templated P/D ``pair`` built from
    :func:`template_engine` lines (errors first); where neither role names a KV connector and neither sets
    ``kvCacheOffloading``, the ``kv-connector-missing`` warning of :func:`_no_connector_warning` (no released KServe
    template adds one); ``()`` where no role names vLLM's NixlConnector in its user part,
    where one names another connector, where a role that names none is in ``offloading`` (the roles whose
    ``kvCacheOffloading`` is set: the template then adds an OffloadingConnector line this check does not read), or
    where no such rule finds anything. A role with NixlConnector against one that names no connector and is not
    in ``offloading`` runs with no KV connector whatever KServe's template adds (the module docstring): the decode
    recomputes every prompt (``kv-connector-missing``). Each rule
    is the one definition the engine evaluation runs (:func:`~pdd_operator.compat.engine.evaluate`), an unknown
    version judged as it judges one: an error only where every release fails the pair (a prefill without a
    side-channel host, fp8 KV against bf16), a warning where some releases do (a prefill ``--block-size 32`` against
    the decode's default, 16 up to 0.33.0 and 64 from 0.34.0: vllm/config/cache.py ``DEFAULT_BLOCK_SIZE`` line
    185). The rest of the engines stays "not checked"."""
    from pdd_operator.compat.engine import evaluate  # engine -> llmd_values -> manifests -> this module

    connectors = {r.role: r.connector for r in pair.roles}
    if all(c is None for c in connectors.values()) and not offloading:
        return (_no_connector_warning(pair),)
    if "NixlConnector" not in connectors.values() or any(
            c not in (None, "NixlConnector") or (c is None and role in offloading) for role, c in connectors.items()):
        return ()
    rules = tuple(RULES_BY_ID[r] for r in TEMPLATE_FREE_RULES)
    report = evaluate(pair, rules)
    return tuple(f for f in report.findings if f.rule in TEMPLATE_FREE_RULES)


#: The kserve/kserve change that makes the P/D templates give each engine a NixlConnector where the user gives no
#: ``--kv-transfer-config`` (kv_producer on prefill, kv_consumer on decode; user config > OffloadingConnector > NIXL).
#: Merged after v0.20.0, the newest tag read: no released template up to it names a P/D connector.
KSERVE_NIXL_TEMPLATES_CHANGE = "kserve#6027"


def _no_connector_warning(pair: PDPair) -> Finding:
    """``kv-connector-missing`` as a warning for a KServe-templated P/D pair whose user parts name no KV connector
    and set no ``kvCacheOffloading``: KServe's prefill/decode templates of every tag up to v0.20.0 add none
    (config/llmisvcconfig/config-llm-prefill-template.yaml and config-llm-decode-template.yaml, v0.15.0-v0.20.0:
    ``${KV_TRANSFER_ARGS}`` renders only an OffloadingConnector from ``kvCacheOffloading``, config_merge.go
    ``kvTransferConfig`` l.641-682 of v0.20.0; the routing sidecar's ``--kv-connector=nixlv2`` only sends
    ``kv_transfer_params``, which vLLM without a connector ignores: kserve#5987), so the decode recomputes every
    prompt while every request succeeds; :data:`KSERVE_NIXL_TEMPLATES_CHANGE` (after v0.20.0) injects NixlConnector
    on both roles. Which KServe the cluster runs is not in the manifest: a warning, not a refusal."""
    rule = RULES_BY_ID["kv-connector-missing"]
    roles = " and ".join(r.role for r in pair.roles)
    return Finding(
        rule=rule.id, severity="warning",
        fields=["spec.prefill.template.containers(main).args", "spec.template.containers(main).args",
                f"spec.prefill.template.containers(main).env[{ADDITIONAL_ARGS_ENV}]",
                f"spec.template.containers(main).env[{ADDITIONAL_ARGS_ENV}]"],
        message=(f"The {roles} engines name no KV connector (no --kv-transfer-config in their args or "
                 f"{ADDITIONAL_ARGS_ENV}) and KServe's prefill/decode templates of every release up to v0.20.0 add "
                 "none (only an OffloadingConnector from kvCacheOffloading): the routing sidecar's nixlv2 handoff "
                 "then finds no connector ('Got kv_transfer_params, but no KVConnector found'), so the decode "
                 "recomputes every prompt while every request succeeds. KServe builds with "
                 f"{KSERVE_NIXL_TEMPLATES_CHANGE} inject NixlConnector on both roles; the KServe release the cluster "
                 "runs is not in these files."),
        fix=(f"Add --kv-transfer-config '{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_producer\"}}' to "
             f"the prefill main container's args (or {ADDITIONAL_ARGS_ENV}) and kv_consumer to the decode's, or run a "
             f"KServe release with {KSERVE_NIXL_TEMPLATES_CHANGE}."),
        source=(f"{rule.source}; kserve config/llmisvcconfig/config-llm-prefill-template.yaml and "
                "config-llm-decode-template.yaml v0.15.0-v0.20.0 (no P/D connector), "
                "pkg/controller/v1alpha2/llmisvc/config_merge.go kvTransferConfig (v0.20.0 l.641-682); "
                f"{KSERVE_NIXL_TEMPLATES_CHANGE}"),
    )


def _connector(flags: dict) -> str | None:
    """The ``kv_connector`` of a parsed ``--kv-transfer-config``, or ``None`` (absent or not JSON)."""
    raw = flags.get("--kv-transfer-config")
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    connector = value.get("kv_connector") if isinstance(value, dict) else None
    return connector if isinstance(connector, str) and connector else None


def templated_findings(container: dict, where: str) -> tuple[Finding, ...]:
    """The startup refusals of a KServe-templated engine container (``where``: its place, for the finding's
    fields) that its image, env and user args alone prove; ``()`` for none.

    ``nixl-needs-v1-engine``: the env sets ``VLLM_USE_V1=0`` and the image's release is 0.11.0, whose OpenAI server
    asserts the variable whatever the template adds (:func:`_use_v1_findings`).

    ``expandable-segments-with-nixl``: the user args name a KV connector and
    :func:`~pdd_operator.compat.rules.memory.expandable_segments_fault` (the rule's one definition) finds the
    image's pinned release refusing the env's ``PYTORCH_CUDA_ALLOC_CONF`` at startup (from
    :data:`~pdd_operator.compat.rules.memory.EXPANDABLE_SEGMENTS_REFUSED_SINCE`) without a cumem flag in the user
    args. An unknown or older version (whose fault comes later, and on RDMA only), or a connector only the
    template might add, proves nothing here: the engine stays "not checked"; so does a ``VLLM_ADDITIONAL_ARGS`` whose
    value is not in the files (a Secret or ConfigMap absent from them, an unread ``envFrom``), which may hold the
    cumem flag.
    """
    version = version_from_image(str(container.get("image") or ""))
    return (*_use_v1_findings(container, where, version), *_expandable_findings(container, where, version))


def _use_v1_findings(container: dict, where: str, version: Version | None) -> tuple[Finding, ...]:
    """``nixl-needs-v1-engine`` where the container's env sets ``VLLM_USE_V1=0`` on an image of a release whose
    ``vllm serve`` then exits (:func:`~pdd_operator.compat.rules.early_nixl.use_v1_zero_fault`: 0.11.0), whatever
    the template adds; ``()`` otherwise (a value not in the files proves nothing)."""
    env = container_env(container)
    if unknown_names(env.kube("VLLM_USE_V1")):
        return ()
    fault = use_v1_zero_fault(version, env_values(container.get("env")).get("VLLM_USE_V1"))
    if fault is None:
        return ()
    rule = RULES_BY_ID["nixl-needs-v1-engine"]
    return (Finding(
        rule=rule.id, severity="error", fields=[f"{where}.env[VLLM_USE_V1]", f"{where}.image"],
        message=f"{fault}; KServe's template runs vllm serve, so this engine never starts.",
        fix="Remove VLLM_USE_V1 from the container's env (vLLM 0.11 runs only the V1 engine), or use an image of "
            "vLLM 0.11.1 or later, which ignores it.",
        source=f"{rule.source}; KServe config/llmisvcconfig templates run vllm serve",
    ),)


def _expandable_findings(container: dict, where: str, version: Version | None) -> tuple[Finding, ...]:
    """``expandable-segments-with-nixl`` as :func:`templated_findings` describes it; ``()`` for none."""
    if version is None or version < EXPANDABLE_SEGMENTS_REFUSED_SINCE:
        return ()
    if unknown_names(container_env(container).kube(ADDITIONAL_ARGS_ENV)):
        return ()  # its flags come from a Secret, ConfigMap or envFrom not in the files: a cumem flag may be there
    _, flags = parse_flags(["vllm", "serve", "/mnt/models", *user_engine_args(container)])
    connector = _connector(flags)
    cumem = [f for f in CUMEM_FLAGS if flags.get(f) is True]
    alloc_conf = env_values(container.get("env")).get("PYTORCH_CUDA_ALLOC_CONF")
    if connector is None or expandable_segments_fault(version, alloc_conf, cumem, rdma=None) is None:
        return ()
    rule = RULES_BY_ID["expandable-segments-with-nixl"]
    return (Finding(
        rule=rule.id, severity="error",
        fields=[f"{where}.env[PYTORCH_CUDA_ALLOC_CONF]", f"{where}.env[{ADDITIONAL_ARGS_ENV}]", f"{where}.image"],
        message=(f"vLLM {fmt(version)} refuses to start this engine: PYTORCH_CUDA_ALLOC_CONF enables "
                 f"expandable_segments while its {ADDITIONAL_ARGS_ENV}/args configure the KV connector {connector} "
                 "and KServe's template adds neither --enable-cumem-allocator nor --enable-sleep-mode ('KV connector ... "
                 "is incompatible with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True unless enable_cumem_allocator "
                 "is also enabled'; 0.21 names enable_sleep_mode)."),
        fix="Remove expandable_segments:True from PYTORCH_CUDA_ALLOC_CONF, or add "
            f"{'--enable-cumem-allocator' if version >= CUMEM_ALLOCATOR_FLAG_SINCE else '--enable-sleep-mode'} to "
            f"{ADDITIONAL_ARGS_ENV}.",
        source=(f"{rule.source}; KServe config/llmisvcconfig templates append {ADDITIONAL_ARGS_ENV} and the "
                "container's args to vllm serve"),
    ),)


def own_line_without_connector(role: str, where: str, templated_role: str) -> Finding:
    """``kv-connector-missing`` as an error for the ``role`` engine of a KServe P/D service (``spec.prefill`` set)
    whose ``main`` container (at ``where``) runs a command of its own that names no KV connector, while the
    ``templated_role`` engine's line is left to KServe's well-known template. A container's own ``command`` replaces
    the template's in KServe's strategic merge (:mod:`~pdd_operator.compat.kserve_merge`), so no template of any
    KServe release, :data:`KSERVE_NIXL_TEMPLATES_CHANGE` included (it edits the template's script), gives this
    engine a connector: vLLM creates none (``kv_transfer_config`` None: v1/core/sched/scheduler.py
    ``self.connector = None``, 0.11.0 l.84-85) and ignores the routing sidecar's ``kv_transfer_params`` ('Got
    kv_transfer_params, but no KVConnector found'), so no KV moves between the roles whatever the other one runs."""
    rule = RULES_BY_ID["kv-connector-missing"]
    return Finding(
        rule=rule.id, severity="error", fields=[f"{where}.command", f"{where}.args"],
        message=(f"The {role} engine runs its own command ({where}), which names no KV connector "
                 "(no --kv-transfer-config): KServe keeps a container's own command over its templates, so no "
                 f"KServe release gives it one, and the {templated_role} engine (KServe's template) cannot move KV "
                 f"to or from it: the {role} side of this prefill/decode service never transfers KV ('Got "
                 "kv_transfer_params, but no KVConnector found')."),
        fix=(f"Add --kv-transfer-config '{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}}' to the "
             f"{role} engine's args (and the same connector to the {templated_role} engine's {ADDITIONAL_ARGS_ENV} "
             "or an explicit command)."),
        source=(f"{rule.source}; kserve pkg/controller/v1alpha1/llmisvc/config_merge.go (v0.16.0 mergeSpecs "
                "l.315-352: strategic merge, a container's command replaced whole); "
                f"{KSERVE_NIXL_TEMPLATES_CHANGE} changes only the templates' scripts"),
    )
