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
serve that adapter answers 404 (:mod:`pdd_operator.vllm.lora`). ``--enable-lora`` with run-time loading
(``VLLM_ALLOW_RUNTIME_LORA_UPDATING``: ``/v1/load_lora_adapter``, a resolver, Dynamo's sidecar) on one role only is
the same fault for the adapters loaded so: only that role can load them.

Served model names. A server answers a request whose ``model`` is one of its ``--served-model-name`` names (the model
as written where none is given) and 404 otherwise (``_check_model``; vLLM's Rust frontend alike, 0.34.0
rust/src/server/src/error.rs line 66). The NIXL hash reads ``model_config.model``, the checkpoint, not the served name
(nixl/metadata.py 0.30.0 line 182), so names that differ fail requests, not the transfer.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.expansion import unknown_names
from pdd_operator.vllm.mm_inputs import ALL
from pdd_operator.vllm.versions import Version

#: The first release whose ``_check_model`` reads ``VLLM_SKIP_MODEL_NAME_VALIDATION`` (envs.py 0.21.0 line 260;
#: not in the 0.20.x sdists).
SKIP_NAME_CHECK_FROM: Version = (0, 21, 0)


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
    """Prefill and decode serve the same LoRA adapter names (``--lora-modules``, and adapters loaded at run time).

    A warning, per adapter name served by one role only: requests naming it fail on the other role (404) while
    requests for the base model pass, and a ``VLLM_ALLOW_RUNTIME_LORA_UPDATING`` resolver may load it there at run
    time. Names that cannot be read (templated) are not judged. Where the names agree, one role loading adapters at
    run time (``--enable-lora`` with ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``) and the other not is warned the same way.
    """
    p, d = pair.prefill.lora_adapters, pair.decode.lora_adapters
    if p is None or d is None:
        return []
    if set(p) == set(d):
        return _lora_enabled_one_role(pair)
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


def _runtime_lora(r: RoleConfig) -> bool:
    """The engine loads LoRA adapters at run time: ``--enable-lora`` with ``VLLM_ALLOW_RUNTIME_LORA_UPDATING`` set,
    which registers ``/v1/load_lora_adapter`` and lets a LoRA resolver load a requested adapter (vllm
    entrypoints/serve/lora/api_router.py 0.34.0 line 30, serve/engine/serving.py lines 61-68, envs.py lines
    1236-1245)."""
    return r.lora_enabled and str(r.env.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "")).strip().lower() in ("1", "true")


def _lora_enabled_one_role(pair: PDPair) -> list[Violation]:
    """LoRA adapters loaded at run time on one role only, in a pair whose ``--lora-modules`` agree (none, mostly):
    adapters loaded through vLLM's ``/v1/load_lora_adapter``, a LoRA resolver or a launcher's lifecycle API
    (Dynamo's ``/v1/loras``) exist on the role that enables LoRA only, so a request naming one fails on the other
    (404). ``--enable-lora`` on one role without run-time loading serves no adapter by name: nothing is said."""
    on = [r for r in pair.roles if _runtime_lora(r)]
    if len({r.role for r in on}) != 1 or len({r.role for r in pair.roles}) != 2:
        return []
    only = on[0].role
    other = "decode" if only == "prefill" else "prefill"
    return [(
        f"Only the {only} enables LoRA (--enable-lora) and loads adapters at run time (VLLM_ALLOW_RUNTIME_LORA_"
        f"UPDATING): an adapter loaded so exists there only, and "
        f"the {other}, which builds no LoRA support, answers a request naming one with 404 ('The model ... does not "
        "exist'), so every adapter request fails in P/D; requests for the base model are not affected. The KV "
        "transfer itself does not compare LoRA settings.",
        fix_for(pair, "Give spec.prefill.extraArgs and spec.decode.extraArgs the same --enable-lora and LoRA flags.",
                f"Give the {other} container the same --enable-lora (and --max-loras, --max-lora-rank) as the {only}, "
                "and load each adapter on both."),
    )]


@rule(
    id="served-model-name-differs", family="model-mismatch", severity="warning",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm entrypoints/serve/engine/serving.py OpenAIServing._check_model (0.30.0 lines 40-75, 0.34.0 lines "
            "49-78; openai/serving_engine.py 0.11.0 line 485): a request whose model is not a served name gets 404 'The "
            "model ... does not exist', unless VLLM_SKIP_MODEL_NAME_VALIDATION (envs.py from 0.21.0); served names "
            "from --served-model-name, else the model as written (config/model.py get_served_model_name); "
            "nixl/metadata.py compute_nixl_compatibility_hash hashes model_config.model (0.30.0 line 182), not the "
            "served name"),
    example="--served-model-name qwen2.5-vl-3b on the decode of a vllm serve Qwen/Qwen2.5-VL-3B-Instruct pair only",
)
def check_served_model_names(pair: PDPair) -> list[Violation]:
    """Prefill and decode answer to a common model name (``--served-model-name``, else the model as written).

    A warning where a role gives ``--served-model-name`` and the two roles share no name: a P/D proxy sends a
    request's ``model`` to both, and the role that does not serve that name answers 404. Engines whose launcher is
    not vLLM's server (``dynamo.vllm``) are not judged, nor a role whose name cannot be read or that skips the
    check (``VLLM_SKIP_MODEL_NAME_VALIDATION``, read from vLLM 0.21.0, set or of a value not in the files).
    """
    roles = {r.role: r for r in pair.roles}
    if set(roles) != {"prefill", "decode"} or any(r.launcher for r in pair.roles):
        return []
    if not any(r.served_model_names for r in pair.roles):
        return []
    names = {role: set(r.served_model_names or (r.model,)) for role, r in roles.items()}
    if any(None in n or any(unknown_names(str(x)) for x in n) for n in names.values()):
        return []
    if names["prefill"] & names["decode"]:
        return []
    skip = [str(r.env.get("VLLM_SKIP_MODEL_NAME_VALIDATION", "")) for r in pair.roles
            if r.version is None or r.version >= SKIP_NAME_CHECK_FROM]
    if any(v.strip().lower() in ("1", "true") or unknown_names(v) for v in skip):  # set, or set from a Secret
        return []
    p, d = (", ".join(sorted(names[r])) for r in ("prefill", "decode"))
    return [(
        f"The prefill answers to the model name {p} and the decode to {d}, none in common (--served-model-name, "
        "else the model as written): the P/D proxy sends a request's model to both roles, and the role that does not "
        "serve that name answers 404 ('The model ... does not exist'), so every request fails on one of them. The KV "
        "transfer itself does not compare served names.",
        fix_for(pair, "Give spec.prefill.extraArgs and spec.decode.extraArgs the same --served-model-name.",
                "Give the prefill and decode containers the same --served-model-name (or none on both)."),
    )]


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
