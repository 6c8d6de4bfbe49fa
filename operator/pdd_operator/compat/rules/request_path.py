"""Requests one role serves and the other refuses: the request path of a P/D pair, not its KV transfer.

A P/D proxy sends each request, with its ``model`` and its inputs, to the prefill and to the decode (vLLM's toy
proxy, llm-d's routing sidecar, Dynamo's frontend), so a request only one role accepts fails.

LoRA. Read per release: nothing of LoRA enters the NIXL handshake. The compatibility hash's factors are the vLLM and
connector versions, model, dtype, KV heads, head size, layers, attention backend, cache dtype, HMA state, the
EAGLE/MTP settings and the transfer mode (nixl/metadata.py ``compute_nixl_compatibility_hash``, 0.34.0 lines
149-215; v1/nixl_connector.py 0.13.0-0.19.1), and the KV cache shape does not depend on ``--enable-lora`` or
``--max-lora-rank`` (LoRA changes the projection weights, not the cache's layout), so ``--enable-lora`` or a
different ``--max-lora-rank`` on one role fails nothing. What breaks is a request: a P/D proxy sends the same
``model`` to the prefill and to the decode (vLLM's toy proxy, llm-d's routing sidecar), and a server that does not
serve that adapter answers 404 (:mod:`pdd_operator.vllm.lora`).
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.mm_inputs import ALL


@rule(
    id="lora-adapters-differ", family="model-mismatch", severity="warning",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm serve/engine/serving.py _check_model (0.34.0 lines 49-84; openai/engine/serving.py 0.20.0 line "
            "428, openai/serving_engine.py 0.11.0 line 485): a request naming an adapter the server does not serve "
            "gets 404 'The model ... does not exist'; --lora-modules names (entrypoints cli_args LoRAParserAction); "
            "nixl/metadata.py compute_nixl_compatibility_hash hashes no LoRA setting (0.34.0 lines 149-215)"),
    example="--enable-lora --lora-modules sql=/adapters/sql on the decode only",
)
def check_lora_adapters(pair: PDPair) -> list[Violation]:
    """Prefill and decode serve the same LoRA adapter names (``--lora-modules``).

    A warning, per adapter name served by one role only: requests naming it fail on the other role (404) while
    requests for the base model pass, and a ``VLLM_ALLOW_RUNTIME_LORA_UPDATING`` resolver may load it there at run
    time. Names that cannot be read (templated) are not judged.
    """
    p, d = pair.prefill.lora_adapters, pair.decode.lora_adapters
    if p is None or d is None or set(p) == set(d):
        return []
    out: list[Violation] = []
    for only, other, names in (("prefill", "decode", sorted(set(p) - set(d))),
                               ("decode", "prefill", sorted(set(d) - set(p)))):
        if not names:
            continue
        runtime = any(str(r.env.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "")).lower() in ("1", "true")
                      for r in pair.roles if r.role == other)
        out.append((
            f"LoRA adapter{'s' if len(names) > 1 else ''} {', '.join(names)} {'are' if len(names) > 1 else 'is'} "
            f"served by the {only} only (--lora-modules): the P/D proxy sends a request's model name to both roles, "
            f"and the {other} answers a request naming {'them' if len(names) > 1 else 'it'} with 404 ('The model ... "
            "does not exist'); requests for the base model are not affected"
            + (f" (the {other} sets VLLM_ALLOW_RUNTIME_LORA_UPDATING, so a resolver may load it at run time)"
               if runtime else "") + ". The KV transfer itself does not compare LoRA settings.",
            fix_for(pair, "Give spec.prefill.extraArgs and spec.decode.extraArgs the same --lora-modules.",
                    f"Give the prefill and decode containers the same --lora-modules (and --enable-lora), so both "
                    f"serve {', '.join(names)}."),
        ))
    return out


@rule(
    id="mm-inputs-differ", family="model-mismatch", severity="warning",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm/config/multimodal.py MultiModalConfig.language_model_only ('disables all multimodal inputs by "
            "setting all modality limits to 0', 0.34.0 lines 303-305; in the 0.20.0-0.34.0 sdists) and "
            "limit_per_prompt; a request over a modality's limit is refused by input processing; neither enters "
            "nixl/metadata.py compute_nixl_compatibility_hash (0.34.0 lines 149-215) nor the language model's KV "
            "cache; 0.34.0 VllmConfig keeps a language-model-only KV consumer text-only (vllm.py lines 2940-2955)"),
    example="--language-model-only on the decode of a Qwen2.5-VL pair only",
)
def check_mm_inputs(pair: PDPair) -> list[Violation]:
    """Prefill and decode accept the same multimodal inputs (``--language-model-only``, ``--limit-mm-per-prompt``
    limits of 0).

    A warning: the KV transfer does not compare them (text requests pass), but a request with an image (or another
    modality) that one role refuses fails there. Flags that cannot be read are not judged.
    """
    p, d = pair.prefill.mm_disabled, pair.decode.mm_disabled
    if p is None or d is None or set(p) == set(d):
        return []
    out: list[Violation] = []
    for off, r, other in ((p, pair.prefill, pair.decode), (d, pair.decode, pair.prefill)):
        if not off or set(off) <= set(other.mm_disabled or ()) or ALL in (other.mm_disabled or ()):
            continue
        what = ("every multimodal input (--language-model-only)" if ALL in off else
                f"{', '.join(m for m in off if m not in (other.mm_disabled or ()))} inputs (--limit-mm-per-prompt 0)")
        out.append((
            f"The {r.role} refuses {what} and the {other.role} does not: a request carrying such an input is "
            f"accepted by the {other.role} and refused by the {r.role} (over the modality's limit), so it fails; "
            "text-only requests pass, and the KV transfer does not compare these settings.",
            fix_for(pair, "Give spec.prefill.extraArgs and spec.decode.extraArgs the same --language-model-only and "
                          "--limit-mm-per-prompt.",
                    "Give the prefill and decode containers the same --language-model-only and --limit-mm-per-prompt "
                    "(or route multimodal requests to neither)."),
        ))
    return out
