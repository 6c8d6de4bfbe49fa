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
"""

from __future__ import annotations

import json
import shlex

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
