"""The scheduler's token budget as an engine's flags set it, and what vLLM refuses about it at startup.

vLLM's ``SchedulerConfig.verify_max_model_len`` (``vllm/config/scheduler.py``, read in the 0.11.1, 0.12.0, 0.13.0,
0.14.0, 0.18.0, 0.24.0 and 0.32.0 sources; called from ``__post_init__`` with the model's ``max_model_len``) raises
``ValueError`` when

- chunked prefill is off and ``max_num_batched_tokens < max_model_len`` ("max_num_batched_tokens (N) is smaller than
  max_model_len (M). This effectively limits the maximum sequence length ..."), or
- ``max_num_batched_tokens < max_num_seqs`` ("must be greater than or equal to max_num_seqs"), chunked or not.

``EngineArgs`` (``vllm/engine/arg_utils.py``, same releases; up to 0.11.0 it forced chunked prefill on) keeps an
explicit ``--no-enable-chunked-prefill`` (it only warns that the model "does not officially support disabling chunked
prefill"), and raises the default budget to ``max_model_len`` only when the user gave no ``--max-num-batched-tokens``;
so both refusals need explicit flags.
``--max-model-len`` absent (or ``-1`` / ``auto``) means the model's own context length, which a manifest does not
hold: :attr:`SchedulerBudget.max_model_len` is then ``None``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: First release whose ``SchedulerConfig`` refuses ``max_num_batched_tokens < max_num_seqs`` with both flags explicit:
#: read in 0.9.0 and 0.9.2 (``vllm/config.py`` ``SchedulerConfig._verify_args``), 0.10.0, 0.10.1.1, 0.10.2 and 0.11.0
#: (``vllm/config/scheduler.py`` ``_verify_args``, a pydantic ``model_validator``), 0.11.1 on (``verify_max_model_len``).
#: V1's ``EngineArgs._set_default_args(_v1)`` of 0.9.0-0.11.0 fills either flag only when it is None (0.10.1+: the
#: default ``max_num_seqs`` is capped at the batch budget), so explicit values reach the check unchanged. 0.9.0 is
#: the oldest release with a NixlConnector (:data:`~pdd_operator.vllm.versions.OLDEST_KNOWN`).
SEQS_REFUSED_SINCE = (0, 9, 0)

_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kKmMgG])")
_MULTIPLIER = {"k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}


def human_int(value: object) -> int | None:
    """An integer flag value as vLLM's ``human_readable_int`` reads it (``8192``, ``32k`` = 32,000, ``32K`` = 32,768;
    vllm/utils/argparse_utils.py, 0.32.0), or ``None`` for anything else (absent, ``-1``, ``auto``, a value not in
    the manifest)."""
    if isinstance(value, bool) or value is None:
        return None
    text = str(value).strip()
    if text.isdecimal():  # not isdigit(): superscripts such as '¹' are digits int() refuses (as vLLM's parser does)
        return int(text)
    match = _HUMAN.fullmatch(text)
    if not match:
        return None
    number, suffix = match.groups()
    return int(float(number) * _MULTIPLIER[suffix])


@dataclass(frozen=True)
class SchedulerBudget:
    """One engine's scheduler flags. ``chunked_prefill``: ``False`` only for an explicit
    ``--no-enable-chunked-prefill`` (or ``--enable-chunked-prefill=false``), else ``None`` (vLLM's default, on for
    generative models). The token counts are the explicit flag values, ``None`` when absent or not literal."""

    chunked_prefill: bool | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None

    @classmethod
    def from_flags(cls, flags: dict[str, str | bool]) -> SchedulerBudget:
        chunked = flags.get("--enable-chunked-prefill")
        return cls(chunked_prefill=chunked if isinstance(chunked, bool) else None,
                   max_num_batched_tokens=human_int(flags.get("--max-num-batched-tokens")),
                   max_num_seqs=human_int(flags.get("--max-num-seqs")),
                   max_model_len=human_int(flags.get("--max-model-len")))

    @property
    def whole_prompts(self) -> bool:
        """Chunked prefill is off and the batch budget is set: every prompt must fit in one step."""
        return self.chunked_prefill is False and self.max_num_batched_tokens is not None

    def refusals(self, whole_prompts_kept: bool = True) -> list[str]:
        """What ``SchedulerConfig.verify_max_model_len`` raises for these flags, as sentences; ``[]`` when nothing
        the flags alone settle (see :attr:`context_unknown`).

        ``whole_prompts_kept``: the release keeps an explicit ``--no-enable-chunked-prefill`` (0.11.1 on); before, V1
        forces chunked prefill on for generating models and only the ``max_num_seqs`` refusal holds
        (:data:`SEQS_REFUSED_SINCE`)."""
        out = []
        n = self.max_num_batched_tokens
        if whole_prompts_kept and self.whole_prompts and self.max_model_len is not None and n < self.max_model_len:
            out.append(f"chunked prefill is off and --max-num-batched-tokens {n} is below --max-model-len "
                       f"{self.max_model_len}: vLLM raises 'max_num_batched_tokens ({n}) is smaller than max_model_len "
                       f"({self.max_model_len})' at startup")
        if n is not None and self.max_num_seqs is not None and n < self.max_num_seqs:
            out.append(f"--max-num-batched-tokens {n} is below --max-num-seqs {self.max_num_seqs}: vLLM raises "
                       f"'max_num_batched_tokens ({n}) must be greater than or equal to max_num_seqs "
                       f"({self.max_num_seqs})' at startup")
        return out

    @property
    def context_unknown(self) -> bool:
        """Chunked prefill is off with a batch budget but no literal ``--max-model-len``: whether the model's own
        context length exceeds the budget (and vLLM refuses to start) is not in the manifest."""
        return self.whole_prompts and self.max_model_len is None
