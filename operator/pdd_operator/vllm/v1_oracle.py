"""What makes vLLM 0.9.x-0.10.x's ``EngineArgs._is_v1_supported_oracle`` answer with the V0 engine where
``VLLM_USE_V1`` is unset: the flags it tests (engine/arg_utils.py 0.9.2 lines 1306-1505; ``_raise_or_fallback``
raises instead under ``VLLM_USE_V1=1``).
"""

from __future__ import annotations

#: Flags whose non-default value the oracle answers with V0 (--load-format sharded_state, --logits-processor-pattern,
#: --preemption-mode, --disable-async-output-proc, --num-scheduler-steps, --scheduler-delay-factor,
#: --guided-decoding-backend, --enable-prompt-adapter, --enable-prompt-embeds, --max-num-partial-prefills,
#: --otlp-traces-endpoint / --collect-detailed-traces: 0.9.2 lines 1312-1345, 1385-1420) or may (--kv-cache-dtype on
#: some attention backends, lines 1366-1384; a speculative method other than ngram / medusa / eagle, lines 1426-1444).
V0_FALLBACK_FLAGS = frozenset({
    "--load-format", "--logits-processor-pattern", "--preemption-mode", "--disable-async-output-proc",
    "--num-scheduler-steps", "--scheduler-delay-factor", "--guided-decoding-backend", "--enable-prompt-adapter",
    "--enable-prompt-embeds", "--max-num-partial-prefills", "--otlp-traces-endpoint", "--collect-detailed-traces",
    "--kv-cache-dtype", "--speculative-config", "--speculative-model"})


def v0_fallback_flags(flags: dict) -> tuple[str, ...]:
    """The :data:`V0_FALLBACK_FLAGS` among a parsed argv's ``flags`` (flag -> value), sorted."""
    return tuple(sorted(f for f in flags if f in V0_FALLBACK_FLAGS))
