"""Engine arguments: the argv can be read, and a PDDeployment's extraArgs do not override what the operator renders."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule

_MANAGED_FLAGS = {
    "--tensor-parallel-size": "tensorParallelSize", "-tp": "tensorParallelSize",
    "--pipeline-parallel-size": "pipelineParallelSize", "-pp": "pipelineParallelSize",
    "--block-size": "blockSize", "--gpu-memory-utilization": "gpuMemoryUtilization",
    "--kv-transfer-config": "spec.kvTransfer", "--kv-cache-dtype": "spec.kvCache.dtype",
    "--dtype": "spec.model.dtype", "--model": "spec.model.name", "--max-model-len": "spec.model.maxModelLen",
    "--revision": "spec.model.revision", "--served-model-name": "spec.model.servedModelName",
    "--trust-remote-code": "spec.model.trustRemoteCode", "--speculative-config": "spec.speculative",
    "--port": "spec.port", "--host": "(the operator's)",
    "--disable-hybrid-kv-cache-manager": "(set by the operator for the model)",
    "--no-disable-hybrid-kv-cache-manager": "(set by the operator for the model)",
}

@rule(
    id="engine-args-invalid", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source="vLLM argument parser",
)
def check_engine_args(pair: PDPair) -> list[Violation]:
    """The engine arguments can be read."""
    return [(f"{r.role}: {err}.", "Fix the engine arguments.") for r in pair.roles for err in r.errors]


@rule(
    id="extra-args-managed-flag", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source="PDDeployment API",
)
def check_extra_args(pair: PDPair) -> list[Violation]:
    """extraArgs do not set flags the operator renders."""
    if not pair.managed:
        return []
    out = []
    for r in pair.roles:
        for arg in r.extra_args:
            flag = arg.split("=", 1)[0]
            if flag in _MANAGED_FLAGS:
                out.append((
                    f"{r.role}: extraArgs sets {flag}, which the operator renders from the spec; a second value "
                    "overrides it on one role only and can break what must match between prefill and decode.",
                    f"Remove {flag} from extraArgs and set {_MANAGED_FLAGS[flag]} instead.",
                ))
    return out
