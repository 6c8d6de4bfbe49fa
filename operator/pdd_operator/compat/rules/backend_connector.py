"""Attention backends that refuse a KV connector: an engine with a KV connector that names one on the command line.

From vLLM 0.23.0 ``AttentionBackend.validate_configuration`` (v1/attention/backend.py) adds "KV connector not supported"
for a backend whose ``supports_kv_connector()`` is False while the engine has a KV transfer config
(v1/attention/selector.py: ``use_kv_connector = kv_transfer_config.is_kv_transfer_instance``), and the platform raises
``ValueError("Selected backend ... is not valid for this configuration. Reason: [...]")`` for a backend named with
``--attention-backend`` (platforms/rocm.py ``get_attn_backend_cls``). Read in the sdists 0.22.0 (no such method),
0.23.0, 0.25.0, 0.27.0, 0.29.0, 0.30.0, 0.31.0, 0.33.0 and 0.34.0; the base class returns True and only these refuse:

- ``ROCM_ATTN`` (rocm_attn.py: "uses (2, num_blocks, ...) KV cache layout which is incompatible with KV connectors that
  require blocks-first layout"): every release from 0.23.0;
- ``ROCM_AITER_UNIFIED_ATTN``: derives from ROCM_ATTN's class and inherits its False until 0.30.0 overrides it
  (vllm#53695, "It's a block first layout so should be safe to enable").
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.versions import Version, fmt

#: The first release whose backends answer ``supports_kv_connector`` (absent from 0.22.0, present in 0.23.0).
KV_CONNECTOR_CHECK_SINCE: Version = (0, 23, 0)
#: Backends that refuse a KV connector: name -> the first release that accepts one again (``None``: none read does).
REFUSING_BACKENDS: dict[str, Version | None] = {"ROCM_ATTN": None, "ROCM_AITER_UNIFIED_ATTN": (0, 30, 0)}


def refuses_kv_connector(backend: str, version: Version) -> bool:
    """vLLM ``version``'s backend ``backend`` (an ``--attention-backend`` name, any case) refuses an engine with a
    KV connector."""
    name = backend.upper()
    if name not in REFUSING_BACKENDS or version < KV_CONNECTOR_CHECK_SINCE:
        return False
    until = REFUSING_BACKENDS[name]
    return until is None or version < until


@rule(
    id="attention-backend-kv-connector", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm v1/attention/backend.py validate_configuration ('KV connector not supported' where "
            "supports_kv_connector() is False, 0.23.0+), rocm_attn.py (False), rocm_aiter_unified_attn.py (inherits "
            "False to 0.29.x, True from 0.30.0, vllm#53695), platforms/rocm.py get_attn_backend_cls (a selected "
            "backend that is not valid raises ValueError); read in 0.22.0, 0.23.0, 0.25.0, 0.29.0, 0.30.0, 0.33.0, "
            "0.34.0"),
    needs=("--attention-backend", "--attention-config"),
    example="--attention-backend ROCM_ATTN with NixlConnector on vllm/vllm-openai-rocm:v0.33.0",
)
def check_backend_accepts_kv_connector(pair: PDPair) -> list[Violation]:
    """An attention backend named on the command line of an engine with a KV connector accepts KV connectors
    (ROCM_ATTN never does from vLLM 0.23.0, ROCM_AITER_UNIFIED_ATTN only from 0.30.0)."""
    out: list[Violation] = []
    for r in pair.roles:
        if not r.attention_backend or not r.connector or r.attention_backend.upper() not in REFUSING_BACKENDS:
            continue
        name = r.attention_backend.upper()
        if r.version is not None and not refuses_kv_connector(name, r.version):
            continue
        until = REFUSING_BACKENDS[name]
        span = f"from {fmt(KV_CONNECTOR_CHECK_SINCE)}" + (f" until {fmt(until)}" if until else "")
        message = (f"{r.role}: --attention-backend {name} with the KV connector {r.connector}: {name}'s "
                   f"supports_kv_connector() is False in vLLM {span}, so vLLM refuses the selection ('Selected "
                   "backend ... is not valid for this configuration. Reason: [\"KV connector not supported\"]') and the "
                   f"{r.role} engine stops at startup.")
        fix = fix_for(pair, f"Drop the backend from spec.{r.role}.extraArgs (vLLM then picks one that accepts KV "
                            "connectors)" + (f" or use vLLM {fmt(until)} or later" if until else "") + ".",
                      f"Drop --attention-backend {name} from the {r.role} container (vLLM then picks a backend that "
                      "accepts KV connectors)" + (f", or run vLLM {fmt(until)} or later" if until else "")
                      + "; name the same backend on both roles.")
        if r.version is None:
            out.append((message + f" The version here is not known (the refusal holds {span}).", fix, "warning"))
        else:
            out.append((message, fix))
    return out
