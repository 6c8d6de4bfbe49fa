"""``--disable-sliding-window`` (``disable_sliding_window`` of ``EngineArgs``): what it does to a sliding-window model's
KV cache, and so to the P/D rules that follow the window (HMA on or off, its NIXL clipping).

What vLLM does with it, in every release read (0.9.0 wheel, 0.10.1.1 sdist ``vllm/config/__init__.py``, 0.11.1 and
0.14.0 sdists and the 0.32.0 wheel ``vllm/config/model.py`` ``ModelConfig.__post_init__``): after
``get_and_verify_max_len`` has capped ``max_model_len`` to the window, ``if self.disable_sliding_window:
self.hf_text_config.sliding_window = None``. Every layer that takes its window from that field then runs full
attention and gets a ``FullAttentionSpec``: config-driven windows through ``cache_config.sliding_window`` (Mistral-7B
v0.1, Phi-3 / Phi-3.5 / Phi-4-mini) and the per-layer windows that read ``config.sliding_window`` (gemma2.py,
gemma3.py: ``config.sliding_window if is_sliding else None``; gpt_oss.py: ``config.sliding_window if layer_idx % 2
== 0``; 0.32.0). Windows held in other fields stay: Llama 4's chunked local attention (``attention_chunk_size``),
MiMo-V2-Flash's SWA layers (mimo_v2.py ``sliding_window_size``). DeepSeek-V4's compressed attention reads
``config.sliding_window`` for a window it needs, so what the flag does there is not judged.

The flag is not a factor of NIXL's compatibility hash (nixl/metadata.py ``compute_nixl_compatibility_hash``,
../shared/docs/vllm-nixl-facts.md section 1.2: no sliding-window factor in any release) and no handshake compares it.

So: both roles passing it run a sliding-window model as a full-attention one (:func:`without_disabled_window`: the
sliding-window / HMA rules then judge a full-attention model); one role passing it is
``sliding-window-disabled-one-role`` (a warning: nothing in vLLM's code refuses it; with HMA on the roles' KV cache
groups differ, with HMA off the decode attends over tokens the prefill's windowed layers never saw).
"""

from __future__ import annotations

import re
from dataclasses import replace

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.known_models import known_config
from pdd_operator.vllm.sliding_window import has_sliding_window

FLAG = "--disable-sliding-window"
#: Families whose every window comes from ``config.sliding_window`` (cleared by the flag), by Hugging Face id.
_CLEARED_NAMES = re.compile(r"gemma-?[23](?![\d.]*n)|gpt-oss|mistral-7b(-instruct)?-v0\.1|phi-3|phi-4-mini", re.I)
#: Families with windows held elsewhere (kept), or whose code needs the window (DeepSeek-V4: not judged).
_OTHER_NAMES = re.compile(r"llama-?4|mimo-v2|deepseek-v4|gemma-?4|command-a|command-r7b", re.I)
#: Model types whose windows are held outside ``sliding_window`` (Llama 4's ``attention_chunk_size`` is checked as a
#: field for any type; Gemma 2's printed configs carry ``sliding_window_size`` as an alias of ``sliding_window``).
_OTHER_TYPES = ("mimo_v2", "deepseek_v4", "llama4")


def window_cleared(model_name: str | None) -> bool | None:
    """Whether ``--disable-sliding-window`` leaves model ``model_name`` (a Hugging Face id) without any windowed layer
    (see the module docstring): ``True`` when every window it has comes from ``config.sliding_window``, ``False`` when
    some window is held in another field (or the model's code needs the window), ``None`` when not known (a local
    path, a fine-tune, a family not listed). Reads the known-checkpoint table first, then the family's name."""
    name = (model_name or "").strip()
    if _OTHER_NAMES.search(name):
        return False
    found = known_config(name)
    if found is not None:
        config = found[0]
        parts = [config, *(config[k] for k in ("text_config", "llm_config", "language_config")
                           if isinstance(config.get(k), dict))]
        types = [str(part.get("model_type") or "") for part in parts]
        if any(part.get("attention_chunk_size") for part in parts) or any(t.startswith(_OTHER_TYPES) for t in types):
            return False
        return True if any(has_sliding_window(part, str(config.get("model_type") or "")) for part in parts) else None
    return True if _CLEARED_NAMES.search(name) else None


def _disabled(pair: PDPair) -> tuple[bool, bool]:
    return pair.prefill.disable_sliding_window is True, pair.decode.disable_sliding_window is True


def without_disabled_window(pair: PDPair) -> PDPair:
    """``pair`` with its model read as full-attention where both roles pass ``--disable-sliding-window`` and the flag
    clears every window of the model (:func:`window_cleared`, or an architecture whose window, if any, comes from
    config.json: :attr:`~pdd_operator.vllm.architectures.ModelTraits.window_depends`), else ``pair`` unchanged.
    Pure."""
    if pair.model.sliding_window and all(_disabled(pair)) and window_cleared(pair.prefill.model or pair.decode.model):
        return replace(pair, model=replace(pair.model, sliding_window=False))
    if pair.model.window_depends and all(_disabled(pair)):
        # an architecture whose every window comes from config.sliding_window (ModelTraits.window_depends): cleared
        return replace(pair, model=replace(pair.model, window_depends=False))
    return pair


@rule(
    id="sliding-window-disabled-one-role", family="hma", severity="warning",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm/config/model.py ModelConfig.__post_init__ (0.11.1-0.32.0; vllm/config/__init__.py 0.10.1.1): "
            "disable_sliding_window sets hf_text_config.sliding_window = None, so that role's windowed layers run "
            "full attention (FullAttentionSpec); not a factor of compute_nixl_compatibility_hash, no handshake check"),
    example="--disable-sliding-window on the decode of a google/gemma-2-9b-it pair only",
)
def check_sliding_window_one_role(pair: PDPair) -> list[Violation]:
    """``--disable-sliding-window`` on both roles or neither, for a model with sliding-window layers: the roles then
    give those layers the same KV cache spec."""
    disabled = _disabled(pair)
    if not pair.model.sliding_window or disabled[0] == disabled[1]:
        return []
    model = pair.prefill.model or pair.decode.model
    if window_cleared(model) is False:
        return []
    on, off = ("prefill", "decode") if disabled[0] else ("decode", "prefill")
    effect = (f"with the hybrid KV cache manager on, the roles' KV cache groups differ (the {off} keeps "
              "sliding-window groups, whose blocks NIXL clips to the window, the " + on + " has one full-attention "
              "group), which no handshake check compares" if pair.hma_required else
              "with the hybrid KV cache manager off both KV caches have the full-attention layout and the KV "
              "transfers, but the decode then attends over the whole prompt in layers where the prefill attended "
              "over the window only")
    return [(
        f"{on}: {FLAG} makes vLLM drop the model's sliding window on the {on} only (its layers that read "
        f"config.sliding_window run full attention); {effect}. vLLM does not refuse it, and the two roles no longer "
        "run the same model.",
        fix_for(pair, f"Pass {FLAG} in both spec.prefill.extraArgs and spec.decode.extraArgs, or in neither.",
                f"Pass {FLAG} to both the prefill and the decode container, or to neither."),
    )]
