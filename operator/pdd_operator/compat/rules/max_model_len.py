"""An engine's ``--max-model-len`` against the longest context its model allows.

vLLM refuses, at config time and on every release from 0.9.0 to 0.34.0, a ``--max-model-len`` above the length it
derives from the model's config.json (:mod:`pdd_operator.vllm.max_model_len`), unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``
is set. A user who copies one role's launch line and raises its context for long chats on one role only starts a
prefill or a decode that never serves.

The check is one engine's own (``Rule.one_engine``: ModelConfig is built from that engine's argv and model config
alone) and holds on every release (``Rule.any_release``: the derivation of :mod:`pdd_operator.vllm.max_model_len` is
the same from 0.9.0 to 0.34.0, and 0.6.2 refused a longer length the same way: vllm/config.py
``_get_and_verify_max_len`` lines 1661-1785), so it also judges an engine whose pair the KV rules do not describe (a platform
plugin's connector, an unknown image) and an engine with no counterpart in the files.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.expansion import unknown_names

#: vLLM's reading of ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` (vllm/envs.py 0.28.0 lines 1087-1094: the stripped, lower-cased
#: value in ``("1", "true")``; 0.9.0 and 0.11.0 read it the same way).
_ALLOW = ("1", "true")


def _allowed(r: RoleConfig) -> bool | None:
    """Whether the engine's environment sets ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` on; ``None`` where its value is not in
    these files (an unknown value, or an ``envFrom`` source not given that may set it)."""
    raw = r.env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN")
    if raw is None:  # an envFrom source not in these files may set it (RoleConfig.env_from)
        return None if any(name == "VLLM_ALLOW_LONG_MAX_MODEL_LEN" for name, _ in r.env_from) else False
    if unknown_names(raw) or "$" in raw:
        return None
    return raw.strip().lower() in _ALLOW


@rule(
    id="max-model-len-exceeds-model", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm/config/model.py _get_and_verify_max_len (vllm/config.py 0.9.0 lines 3150-3280; config/model.py 0.11.0 "
            "lines 1763-1915, 0.23.0 lines 2112-2250, 0.28.0 lines 2328-2466): ValueError 'User-specified max_model_len "
            "(N) is greater than the derived max_model_len' unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set; the derived "
            "length from the config's length keys and RoPE scaling (transformers_utils/model_arch_config_convertor.py "
            "0.28.0 lines 388-420); called from VllmConfig.__post_init__ through ModelConfig's own construction, before "
            "any platform, worker or connector code (the same on a platform plugin: tpu_inference's TPU platform, "
            "vllm/platforms/tpu.py 0.23.0 lines 9-15)"),
    without_connector=True, one_engine=True, any_release=True,
    example="--max-model-len 65536 for Qwen/Qwen3-0.6B (max_position_embeddings 40960) on the decode",
)
def check_max_model_len(pair: PDPair) -> list[Violation]:
    """Each engine's ``--max-model-len`` is at most the context its model's config.json allows.

    Judged where the model's config.json was read (``--model-config``, a ConfigMap, or the table of public
    checkpoints; :attr:`~pdd_operator.vllm.architectures.ModelTraits.context_limit`), the value is a literal number,
    no flag rewrites the config vLLM reads (:data:`~pdd_operator.vllm.max_model_len.CONFIG_OVERRIDE_FLAGS`) and
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is not set; where that variable's value is not in the files, or the table's copy
    of config.json may have been trimmed (it names no dtype: :attr:`~pdd_operator.vllm.max_model_len.ContextLimit.whole`),
    a warning. Where the table's copy lacks the field the length comes from
    (:attr:`~pdd_operator.vllm.architectures.ModelTraits.context_missing`), a warning that says the length was not
    checked and which field is missing (:func:`_not_checked`)."""
    limit = pair.model.context_limit
    if limit is None:
        return _not_checked(pair)
    out: list[Violation] = []
    for r in pair.roles:
        asked = r.scheduler.max_model_len
        if asked is None or r.config_overrides or not limit.refuses(asked):
            continue
        allowed = _allowed(r)
        if allowed:
            continue
        allows = f" or model_max_length {limit.model_max_length}" if limit.model_max_length else ""
        message = (f"{r.role}: --max-model-len {asked} is longer than the {limit.derived} tokens vLLM derives from the "
                   f"model's config.json ({limit.key}{allows}): vLLM "
                   "raises 'User-specified max_model_len ... is greater than the derived max_model_len' while building "
                   f"its config, so the {r.role} engine never starts.")
        fix = fix_for(pair, f"Lower spec.model.maxModelLen (or --max-model-len in spec.{r.role}.extraArgs) to at most "
                      f"{limit.derived}.",
                      f"Lower --max-model-len on the {r.role} container to at most {limit.derived} (or, knowing the "
                      "model degrades past its trained length, set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1).")
        if allowed is None:
            out.append((message.replace("so the", "unless VLLM_ALLOW_LONG_MAX_MODEL_LEN, whose value is not in these "
                                        "files, is 1 or true, so the"), fix, "warning"))
        elif not limit.whole:
            out.append((message.replace("config.json (", "config.json as the table of public copies holds it (a copy "
                                        "that may have been trimmed of a key allowing more: ", 1), fix, "warning"))
        else:
            out.append((message, fix))
    return out


def _not_checked(pair: PDPair) -> list[Violation]:
    """A warning that the length was not checked, for each engine with a literal ``--max-model-len`` (and no flag
    rewriting the config vLLM reads, nor ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` on) whose model was read from the table of
    public checkpoints' copy of its config.json, where that copy lacks the field vLLM derives the length from
    (:attr:`~pdd_operator.vllm.architectures.ModelTraits.context_missing`: an instruct release or a quantized copy
    takes its base's geometry but not its context length, and no public copy of its own gave one). vLLM reads the
    checkpoint's own file, which has a length: the value may be refused or not, so the rule says which field it
    lacked instead of passing. Never an error (the field is missing here, not in the checkpoint), and a warning
    rather than "not checked": the rest of the pair is judged, and a deployment that sets a length its model allows
    is not held back by the table's gap. A quantized or re-published copy read as its base (``pair.model_read_as``)
    is left to model-read-as-base, which already warns that the base's fields were used and names the length too
    (:func:`~pdd_operator.compat.rules.architecture.check_model_read_as_base`)."""
    missing = pair.model.context_missing
    if not missing or pair.model_read_as is not None:  # a copy read as its base: model-read-as-base says it
        return []
    out: list[Violation] = []
    for r in pair.roles:
        asked = r.scheduler.max_model_len
        if asked is None or r.config_overrides or _allowed(r):
            continue
        out.append((f"{r.role}: --max-model-len {asked} is not checked against the model's context length: the "
                    f"public copy of its config.json in the table of known checkpoints has no {missing}, from which "
                    "vLLM derives the longest length it accepts ('User-specified max_model_len ... is greater than the derived "
                    "max_model_len' past it).",
                    fix_for(pair, "Set spec.model.configMapRef to the model's config.json to check spec.model.maxModelLen "
                            "against it.",
                            "Pass the model's config.json (pdd check --model-config) to check --max-model-len "
                            "against it."),
                    "warning"))
    return out
