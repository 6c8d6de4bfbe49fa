"""Flags ``vllm serve``'s parser stopped defining, read release by release in vLLM's sdists.

Each flag below is one that ``vllm/engine/arg_utils.py`` of a release read defines (``parser.add_argument("--x", ...)``)
and that no later release read defines anywhere in its ``vllm`` package: no ``"--x"`` literal, no ``x:`` field of
``EngineArgs`` or of the frontend's ``FrontendArgs`` (``vllm/entrypoints/openai/cli_args.py``, whose flags are the
field names), and no later flag of which it is a prefix (``FlexibleArgumentParser`` keeps argparse's prefix
matching, so such a flag would still be accepted as the longer one). From the first release read without it, the
parser stops with ``unrecognized arguments`` and the server never starts.

Releases read (sdists, ``vllm/engine/arg_utils.py``, ``vllm/entrypoints/openai/cli_args.py``, ``vllm/entrypoints/cli``):
:data:`RELEASES_READ`. A flag's removal is dated by the first release read without it; an unread release between the
last one with it and that one (0.15.x) is not judged. The patch releases 0.11.2, 0.14.1, 0.17.1, 0.18.1, 0.22.1,
0.25.1 and 0.27.1 were read for both tables (``--swap-space``: still in 0.17.1, gone in 0.18.0).
"""

from __future__ import annotations

from pdd_operator.vllm.versions import Version

#: The vLLM releases whose parsers were read for :data:`READ_REMOVALS`.
RELEASES_READ: tuple[Version, ...] = (
    (0, 10, 1), (0, 10, 2), (0, 11, 0), (0, 11, 1), (0, 11, 2), (0, 12, 0), (0, 13, 0), (0, 14, 0), (0, 14, 1),
    (0, 16, 0), (0, 17, 0), (0, 17, 1), (0, 18, 0), (0, 18, 1), (0, 19, 0), (0, 19, 1), (0, 20, 0), (0, 20, 1),
    (0, 20, 2), (0, 21, 0), (0, 22, 0), (0, 22, 1), (0, 23, 0), (0, 24, 0), (0, 25, 0), (0, 25, 1), (0, 26, 0),
    (0, 27, 0), (0, 27, 1), (0, 28, 0), (0, 29, 0), (0, 30, 0), (0, 31, 0), (0, 32, 0), (0, 33, 0), (0, 34, 0),
)

_STRUCTURED = "--structured-outputs-config '{\"backend\": ...}' and its fields"
_EPLB = "--eplb-config '{...}' (num_redundant_experts, window_size, step_interval, log_balancedness)"

#: Long flag -> (last release read that defines it, first release read that does not, what to use instead).
READ_REMOVALS: dict[str, tuple[Version, Version, str]] = {
    "--scheduler-delay-factor": ((0, 10, 2), (0, 11, 0), "no replacement: a V0 scheduler option"),
    "--enable-prompt-adapter": ((0, 10, 1), (0, 10, 2), "no replacement: prompt adapters left with the V0 engine"),
    "--override-neuron-config": ((0, 10, 1), (0, 10, 2), "no replacement in vLLM itself"),
    "--max-seq-len-to-capture": ((0, 10, 2), (0, 11, 0),
                                 "CUDA graph sizes come from --compilation-config (max_cudagraph_capture_size)"),
    "--preemption-mode": ((0, 10, 2), (0, 11, 0), "no replacement: the V1 engine preempts by recomputation"),
    "--disable-async-output-proc": ((0, 10, 2), (0, 11, 0), "no replacement: a V0 option"),
    "--enable-lora-bias": ((0, 11, 0), (0, 11, 1), "no replacement: LoRA bias support was dropped"),
    "--rope-scaling": ((0, 11, 0), (0, 11, 1), "set RoPE parameters through --hf-overrides"),
    "--rope-theta": ((0, 11, 0), (0, 11, 1), "set RoPE parameters through --hf-overrides"),
    "--guided-decoding-backend": ((0, 11, 2), (0, 12, 0), _STRUCTURED),
    "--guided-decoding-disable-fallback": ((0, 11, 2), (0, 12, 0), _STRUCTURED),
    "--guided-decoding-disable-any-whitespace": ((0, 11, 2), (0, 12, 0), _STRUCTURED),
    "--guided-decoding-disable-additional-properties": ((0, 11, 2), (0, 12, 0), _STRUCTURED),
    "--override-pooler-config": ((0, 11, 2), (0, 12, 0), "--pooler-config"),
    "--lora-extra-vocab-size": ((0, 11, 2), (0, 12, 0), "no replacement"),
    "--num-redundant-experts": ((0, 11, 2), (0, 12, 0), _EPLB),
    "--eplb-window-size": ((0, 11, 2), (0, 12, 0), _EPLB),
    "--eplb-step-interval": ((0, 11, 2), (0, 12, 0), _EPLB),
    "--eplb-log-balancedness": ((0, 11, 2), (0, 12, 0), _EPLB),
    "--num-lookahead-slots": ((0, 11, 2), (0, 12, 0), "no replacement: a V0 option"),
    "--cuda-graph-sizes": ((0, 12, 0), (0, 13, 0), "--compilation-config '{\"cudagraph_capture_sizes\": [...]}'"),
    "--enable-multimodal-encoder-data-parallel": ((0, 12, 0), (0, 13, 0), "--mm-encoder-tp-mode data"),
    "--disable-mm-preprocessor-cache": ((0, 12, 0), (0, 13, 0), "--mm-processor-cache-gb 0"),
    "--logits-processor-pattern": ((0, 16, 0), (0, 17, 0), "--logits-processors"),
    "--swap-space": ((0, 17, 1), (0, 18, 0), "no CPU swap space any more; KV offloading has its own flags"),
    "--max-num-partial-prefills": ((0, 26, 0), (0, 27, 0), "no replacement"),
    "--max-long-partial-prefills": ((0, 26, 0), (0, 27, 0), "no replacement"),
    "--override-attention-dtype": ((0, 27, 1), (0, 28, 0), "no replacement"),
    "--calculate-kv-scales": ((0, 27, 1), (0, 28, 0),
                              "the KV cache scales come from the checkpoint (or their defaults)"),
    "--enable-bf16x3-router-gemm": ((0, 29, 0), (0, 30, 0), "no replacement"),
    "--enable-mamba-fine-grained-prefix-cache": ((0, 30, 0), (0, 31, 0), "no replacement"),
}
