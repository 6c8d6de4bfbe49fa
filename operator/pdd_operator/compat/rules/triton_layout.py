"""TRITON_ATTN's KV cache under NIXL heterogeneous TP: laid out NHD while the connector splits heads as HND.

The NIXL connector asks for the HND layout (``NixlConnector.get_required_kvcache_layout`` returns ``"HND"`` for a
non-MLA model; 0.19.1 sdist nixl_connector.py lines 373-390), and its worker takes the layout it splits by from
``get_kv_cache_layout()`` (line 1214), i.e. that same ``"HND"``: under heterogeneous TP it reads or writes each
block's head slice as a byte range of an HND block (``add_remote_agent``, lines 1926-2024). The worker compares only
the layouts the two sides *report* (``_validate_remote_agent_handshake``, lines 2096-2117), so nothing refuses.
But ``TritonAttentionBackend.get_kv_cache_stride_order`` ignores the layout and returns the NHD order
``(0, 1, 2, 3, 4)`` in the 0.14.0, 0.16.0, 0.17.0, 0.18.0 and 0.19.1 sdists (v1/attention/backends/triton_attn.py,
0.19.1 lines 306-316), and 0.11.1 and 0.13.0 have no such method (the model runner then allocates the logical NHD
shape: v1/worker/gpu_model_runner.py, 0.11.1 lines 4832-4835, 0.13.0 lines 5189-5192), so a TRITON_ATTN engine's
cache is NHD in memory and the head slices carry other heads' data: wrong output, no error (vllm#35444, gsm8k 0.0
with TP 1 -> 2 on ROCm; the same class of bug as vllm#37703 / vllm#37333). From 0.20.0 the backend follows
``get_kv_cache_layout()`` (0.20.0 lines 332-350; 0.21.0, 0.22.0, 0.24.0, 0.25.0 and 0.28.0 read alike).

Not judged here: the backend vLLM picks by default (ROCm's priority list changed across releases; on CUDA
TRITON_ATTN is not the first choice), so only a backend named on the command line (or ``VLLM_ATTENTION_BACKEND``
where vLLM still reads it) is reported.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.compat.rules.kv_layout import default_layout
from pdd_operator.vllm.versions import Version, fmt

#: The first release whose TRITON_ATTN lays its cache out as ``get_kv_cache_layout()`` says (0.20.0 sdist).
TRITON_FOLLOWS_LAYOUT_SINCE: Version = (0, 20, 0)
#: ``VLLM_ATTENTION_BACKEND`` is no longer in envs.py from 0.18.0 (compat/rules/must_match.py _BACKEND_FLAG_SINCE).
_BACKEND_ENV_UNTIL: Version = (0, 18, 0)


def _named_backend(pair: PDPair, r: RoleConfig) -> str | None:
    named = r.attention_backend
    if not named and (pair.version is None or pair.version < _BACKEND_ENV_UNTIL):
        named = r.env.get("VLLM_ATTENTION_BACKEND")
    return named.upper() if isinstance(named, str) else None


@rule(
    id="triton-attn-hetero-tp-layout", family="hetero-tp", severity="warning",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.prefill.tensorParallelSize",
            "spec.decode.tensorParallelSize"),
    source=("vllm#35444; v1/attention/backends/triton_attn.py get_kv_cache_stride_order returns NHD whatever the "
            "layout (0.14.0-0.19.1 sdists; none before 0.14: the logical NHD shape), follows get_kv_cache_layout() "
            "from 0.20.0; nixl_connector.py get_required_kvcache_layout 'HND' and the head-sliced hetero-TP "
            "descriptors (0.19.1 lines 373-390, 1926-2024), which compare only the reported layouts"),
    needs=("--attention-backend", "--attention-config", "VLLM_ATTENTION_BACKEND", "VLLM_KV_CACHE_LAYOUT"),
    example="prefill: {tensorParallelSize: 1}, decode: {tensorParallelSize: 2}, extraArgs: [--attention-backend, "
            "TRITON_ATTN], vLLM 0.19.1",
)
def check_triton_hetero_tp_layout(pair: PDPair) -> list[Violation]:
    """A TRITON_ATTN engine under heterogeneous TP before vLLM 0.20.0 transfers the wrong heads (a warning).

    Per pair: TPs differ, the model is not MLA (its cache has no head dimension to split), a role names TRITON_ATTN,
    and the layout it reports is HND (``VLLM_KV_CACHE_LAYOUT`` unset or HND; with NHD both the report and the
    memory are NHD). A release before 0.20.0 or an unknown one is reported; vLLM raises nothing, the output is wrong.
    """
    if not pair.hetero_tp or pair.mla:
        return []
    if pair.version is not None and pair.version >= TRITON_FOLLOWS_LAYOUT_SINCE:
        return []
    roles = [r for r in pair.roles if _named_backend(pair, r) == "TRITON_ATTN" and default_layout(pair, r)[0] == "LBHNC"]
    if not roles:
        return []
    p, d = pair.tps or (None, None)
    when = (f"vLLM {fmt(pair.version)}" if pair.version is not None
            else f"vLLM before {fmt(TRITON_FOLLOWS_LAYOUT_SINCE)} (this release is not known)")
    who = " and ".join(r.role for r in roles)
    return [(
        f"{who}: TRITON_ATTN with prefill TP {p} and decode TP {d}: on {when} the Triton backend keeps its KV cache "
        "NHD in memory while the NIXL connector, told HND, moves each block's head slice as an HND byte range, so "
        "decode attends over other heads' keys and values: wrong output, no error (vllm#35444).",
        f"Use vLLM >= {fmt(TRITON_FOLLOWS_LAYOUT_SINCE)}, another attention backend (FLASH_ATTN on CUDA), or equal "
        "tensorParallelSize on both roles.",
    )]
