"""``--kv-cache-dtype``: a value the engine's vLLM release accepts."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.expansion import unknown_names
from pdd_operator.vllm.kv_cache_dtypes import ADDED, OLDEST_READ, PLUGIN_DTYPES_SINCE, accepted
from pdd_operator.vllm.versions import fmt, rules_version


@rule(
    id="kv-cache-dtype-unknown", family="engine-args", severity="error",
    fields=("spec.kvCache.dtype", "spec.prefill.extraArgs", "spec.decode.extraArgs"), since=OLDEST_READ,
    source=("vllm/config/cache.py CacheDType Literal (vllm/config.py before 0.10.1.1) -> argparse choices "
            "(vllm/engine/arg_utils.py) up to 0.32.0: 'invalid choice'; from 0.33.0 CacheConfig._validate_cache_dtype "
            "'Invalid kv_cache_dtype' unless a platform plugin registers the value (KV_CACHE_DTYPES); read per "
            "release 0.9.0-0.34.0 (pdd_operator.vllm.kv_cache_dtypes: turboquant_* and nvfp4 from 0.20.0, "
            "nvfp4_4over6 0.28.0, nvfp4_ds_mla 0.30.0, ultraquant_4bit 0.32.0, octave_* 0.33.0)"),
    without_connector=True, one_engine=True, needs=("--kv-cache-dtype",),
    example="--kv-cache-dtype turboquant_k8v4 on vllm/vllm-openai:v0.19.1 (added in 0.20.0)",
)
def check_kv_cache_dtype_value(pair: PDPair) -> list[Violation]:
    """Each engine's ``--kv-cache-dtype`` is one its release accepts.

    Per role, on its own release: a value the release's ``CacheDType`` lacks stops the server before it serves
    (argparse's "invalid choice" up to 0.32.0; from 0.33.0 the config's "Invalid kv_cache_dtype", an error for a
    value in-tree vLLM adds later and a warning for a value no release has, which a platform plugin may register).
    An engine whose release the files do not name, a release not read, or a templated value is not judged.
    """
    out: list[Violation] = []
    for r in pair.roles:
        value = r.kv_cache_dtype
        if not value or unknown_names(value) or r.version_text is None or rules_version(r.version_text) != r.version:
            continue
        verdict = accepted(value, r.version)
        plugin = r.version is not None and r.version >= PLUGIN_DTYPES_SINCE
        if verdict is not False and not (verdict is None and plugin and value not in ADDED):
            continue
        later = ADDED.get(value)
        since = f" (vLLM adds it in {fmt(later[1])})" if later and r.version < later[1] else ""
        where = f"vLLM {fmt(r.version)}"
        how = ("its config refuses it ('Invalid kv_cache_dtype') while the engine builds its configuration" if plugin
               else "its parser refuses it ('argument --kv-cache-dtype: invalid choice')")
        fix = fix_for(pair, f"Set spec.kvCache.dtype to a value {where} accepts, or use a vLLM release that has "
                            f"{value}.",
                      f"Give the {r.role} container a --kv-cache-dtype {where} accepts (auto, fp8, ...), or use a "
                      f"vLLM image whose release has {value}.")
        if verdict is None:
            out.append((f"{r.role}: --kv-cache-dtype {value} is not a KV cache dtype of any vLLM release read (up to "
                        f"{fmt(r.version)}); {how} unless a platform plugin in the image registers it.", fix,
                        "warning"))
            continue
        out.append((f"{r.role}: --kv-cache-dtype {value} is not a KV cache dtype {where} has{since}; {how} and the "
                    f"{r.role} server never starts.", fix))
    return out
