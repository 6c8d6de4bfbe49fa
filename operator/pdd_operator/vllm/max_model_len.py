"""The longest context vLLM lets an engine ask for with ``--max-model-len``, from the model's config.json.

vLLM derives a model's maximum length from its (text) config and refuses a longer ``--max-model-len`` at config time,
before any GPU is touched (``_get_and_verify_max_len``: vllm/config.py 0.9.0 lines 3150-3280, vllm/config/model.py
0.11.0 lines 1763-1915, 0.23.0 lines 2112-2250, 0.28.0 lines 2328-2466, 0.34.0 around line 2705; the key scan in
vllm/transformers_utils/model_arch_config_convertor.py ``derive_max_model_len_and_key`` from 0.16.0, lines 388-420 in
0.28.0), the same way on every release from 0.9.0 to 0.34.0:

1. the derived length is the smallest of the config's ``max_position_embeddings``, ``n_positions``, ``max_seq_len``,
   ``seq_length``, ``model_max_length``, ``max_target_positions``, ``max_sequence_length``, ``max_seq_length`` and
   ``seq_len``, and a ``model_max_length`` replaces it outright (Command-R / Cohere);
2. RoPE scaling (``rope_scaling``, or ``rope_parameters`` from 0.2x) multiplies it by ``factor`` unless the type is
   ``su``, ``longrope`` or ``llama3``; for ``yarn`` the base is ``original_max_position_embeddings``; Gemma 3's configs
   are skipped (already scaled);
3. a user ``max_model_len`` above the derived length raises ``ValueError`` ("User-specified max_model_len (N) is
   greater than the derived max_model_len ...") unless the config's ``model_max_length`` allows it or
   ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is set (then only a warning).

Steps that only lower the derived length (a tokenizer_config ``model_max_length``, ``--disable-sliding-window``) are
left out: a length refused without them is refused with them too.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The config.json keys vLLM takes the smallest of (``possible_keys``, in its order).
LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
               "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")

#: Engine flags that change the config vLLM derives the length from: ``--hf-overrides`` (any config field),
#: ``--rope-scaling`` / ``--rope-theta`` (0.9.x-0.10.x arg_utils.py, folded into the config's RoPE settings) and
#: ``--hf-config-path`` (another config.json). With one of them the length is not judged from the model's own config.
CONFIG_OVERRIDE_FLAGS = ("--hf-overrides", "--rope-scaling", "--rope-theta", "--hf-config-path")

#: RoPE types whose ``factor`` vLLM does not apply to the derived length.
_UNSCALED_ROPE = ("su", "longrope", "llama3")


@dataclass(frozen=True)
class ContextLimit:
    """A model's longest context as vLLM derives it from config.json.

    Attributes:
        derived: the derived maximum length, in tokens (after RoPE scaling).
        key: the config.json key it comes from (``max_position_embeddings``, ...).
        model_max_length: the config's own ``model_max_length``, which lets a user length up to it pass; ``None``
            when the config names none.
        whole: the config.json read is the checkpoint's whole file (given by the user, or a table copy that names
            its dtype); ``False`` for a table copy that may have been trimmed, where a key that allows a longer length
            (``model_max_length``, RoPE scaling) may have been cut: a refusal is then not certain.
    """

    derived: int
    key: str
    model_max_length: int | None = None
    whole: bool = True

    def refuses(self, requested: int) -> bool:
        """Whether vLLM refuses ``--max-model-len requested`` (in tokens) for this model, without
        ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``."""
        return requested > self.derived and (self.model_max_length is None or requested > self.model_max_length)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def context_limit(text: dict, model_type: str = "") -> ContextLimit | None:
    """The :class:`ContextLimit` of a model from its text config ``text`` (config.json, or its ``text_config`` for a
    multimodal checkpoint, as vLLM reads ``hf_text_config``) and ``model_type``; ``None`` where the config names no
    length key or its RoPE settings are not ones read here (a scaling entry without ``rope_type``/``type``, a yarn
    entry without ``original_max_position_embeddings``)."""
    derived, key = float("inf"), ""
    for name in LENGTH_KEYS:
        value = _number(text.get(name))
        if value is not None and value < derived:
            derived, key = value, name
    model_max_length = _number(text.get("model_max_length"))
    if model_max_length is not None:
        derived, key = model_max_length, "model_max_length"
    if derived == float("inf"):
        return None
    rope = text.get("rope_parameters") or text.get("rope_scaling")
    if isinstance(rope, dict) and rope and "gemma3" not in model_type:
        entries = list(rope.values()) if all(isinstance(v, dict) for v in rope.values()) else [rope]
        factor = 1.0
        for entry in entries:
            kind = entry.get("rope_type", entry.get("type"))
            if not isinstance(kind, str):
                return None
            if kind in _UNSCALED_ROPE:
                continue
            if entry.get("factor") is not None:
                factor = _number(entry.get("factor")) or 1.0
            if kind == "yarn":
                original = _number(entry.get("original_max_position_embeddings"))
                if original is None:
                    return None
                derived = original
        derived *= factor
    elif rope is not None and not isinstance(rope, dict):
        return None
    return ContextLimit(int(derived), key, int(model_max_length) if model_max_length is not None else None)
