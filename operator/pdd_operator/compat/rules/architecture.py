"""The model architecture x capability matrix (vLLM docs/features/nixl_connector_compatibility.md, from 0.20.0;
seed 000 section 1) and where vLLM's code overrides it."""

from __future__ import annotations

from pdd_operator.compat.matrix import DOC, Capability, Cell, cell, overridden
from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.compat.rules.block_size import _block_pair
from pdd_operator.vllm.dtype import KV_AUTO_FROM_CHECKPOINT_SINCE
from pdd_operator.vllm.expansion import unknown_names
from pdd_operator.vllm.versions import fmt

_SEED = (f"{DOC}, 'Model Architecture x Capability' table (l.50-58 in 0.20.0-0.34.0; no such page in 0.19.0) "
         "and its footnotes, as of 0.31.0-0.32.0, with the cells vLLM's code overrides (compat.matrix "
         "CODE_OVERRIDES); secondary: seed 000 section 1")


_V020 = (0, 20, 0)


def _capabilities_used(pair: PDPair) -> list[Capability]:
    used = [Capability.BASIC]
    if any(r.speculative for r in pair.roles):
        used.append(Capability.SPEC_DECODE)
    if pair.hetero_tp:
        used.append(Capability.HETERO_TP)
    if pair.model.sliding_window:
        used.append(Capability.SLIDING_WINDOW)
    if any(r.buffer_device == "cpu" for r in pair.roles) and any(r.resources.get("nvidia.com/gpu") for r in pair.roles):
        used.append(Capability.HOST_BUFFER)
    if _block_pair(pair) is not None:
        used.append(Capability.HETERO_BLOCK)
    if any(r.kv_layout and r.kv_layout.startswith("B") for r in pair.roles):
        used.append(Capability.CROSS_LAYER)
    return used


def _matrix_cells(pair: PDPair, wanted: set[Cell]) -> list[tuple[Capability, Cell]]:
    arch = pair.model.architecture
    if arch is None:
        return []
    return [
        (cap, cell(arch, cap)) for cap in _capabilities_used(pair)
        if cell(arch, cap) in wanted and not overridden(arch, cap, pair.version)
    ]

@rule(
    id="architecture-unknown", family="architecture", severity="warning",
    fields=("spec.model.architecture", "spec.model.hfArchitecture", "spec.model.name"),
    source=_SEED,
)
def check_architecture_known(pair: PDPair) -> list[Violation]:
    """The model's architecture family is known."""
    if pair.model.architecture is not None:
        return []
    hidden = unknown_names(pair.prefill.model) or unknown_names(pair.decode.model)
    if hidden:
        return [(
            f"The model name comes from environment variable {hidden[0]}, whose value (valueFrom, a ConfigMap or "
            "Secret, or the image's environment) is not in these files, so the model and its architecture are "
            "unknown and the architecture rules (heterogeneous TP, block size, pipeline parallel, hybrid SSM) "
            "were not evaluated.",
            f"Give {hidden[0]} a literal value in the container's env, or pass --model-config with the model's "
            "config.json.",
        )]
    source = pair.prefill.model_source_note if pair.prefill.model_source_note == pair.decode.model_source_note else ""
    return [(
        f"The architecture of model {pair.prefill.model!r} is not known"
        + (f" ({source})" if source else "")  # the orchestrator's model field, or why it names no model
        + ", so the architecture rules (heterogeneous TP, block size, pipeline parallel, hybrid SSM) were not all "
        "evaluated.",
        "Set spec.model.architecture (and ssmKind for hybrid SSM models) or spec.model.hfArchitecture.",
    )]


@rule(
    id="model-read-as-base", family="architecture", severity="warning",
    fields=("spec.model.name", "spec.model.numKvHeads"),
    source=("pdd_operator.vllm.known_models.derived_config; quantization keeps the attention geometry (vllm "
            "get_total_num_kv_heads reads num_key_value_heads and never quantization_config: 0.9.0 config.py "
            "l.1120, 0.20.0 config/model.py l.1215, 0.34.0 l.1679); --kv-cache-dtype auto becomes a ModelOpt "
            "checkpoint's kv_cache_quant_algo / "
            "kv_cache_scheme (vllm utils/torch_utils.py resolve_kv_cache_dtype_string, called from "
            "engine/arg_utils.py create_engine_config: 0.14.0 l.301, 0.20.0 l.343, 0.34.0 l.518; absent in 0.13.0)"),
    example="model: RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic (read as meta-llama/Llama-3.3-70B-Instruct)",
)
def check_model_read_as_base(pair: PDPair) -> list[Violation]:
    """A quantized or re-published copy of a known checkpoint is judged with its base's KV heads and architecture.

    A ``--max-model-len`` is then not checked (the base's context length is not the copy's), which the warning says."""
    base = pair.model_read_as
    if base is None:
        return []
    heads = f"{pair.num_kv_heads} KV heads, " if pair.num_kv_heads is not None else ""
    kind = ("a quantized copy" if pair.model_quantized
            else "a re-release (instruct, thinking, dated) or a copy published under another organisation")
    message = (f"Model {pair.prefill.model!r} is not in the table of known checkpoints; it is read as {base} ({kind} "
               f"named after it): the rules use {base}'s {heads}layers, head size and architecture, which "
               "quantization and re-publishing keep.")
    roles = (pair.prefill.kv_cache_dtype or "auto", pair.decode.kv_cache_dtype or "auto")
    if pair.model_quantized and "auto" in roles and roles[0] != roles[1] and (
            pair.version is None or pair.at_least(KV_AUTO_FROM_CHECKPOINT_SINCE)):
        message += (" Whether its quantization also quantizes the KV cache is not known from the base: from vLLM "
                    f"{fmt(KV_AUTO_FROM_CHECKPOINT_SINCE)} --kv-cache-dtype auto becomes the checkpoint's KV cache "
                    "quantization (a ModelOpt config.json with kv_cache_quant_algo FP8 makes it fp8_e4m3), so a role "
                    "left at auto may hold an fp8 KV cache.")
    asked = sorted({r.scheduler.max_model_len for r in pair.roles if r.scheduler.max_model_len is not None})
    if asked and pair.model.context_missing:  # the base's context length is not the copy's (known_models._NOT_DERIVED)
        message += (f" Its context length is not taken from the base ({pair.model.context_missing} not read), so "
                    f"--max-model-len {', '.join(map(str, asked))} was not checked against it.")
    return [(message, "Give the checkpoint's own config.json (pdd check --model-config) to judge it by its own "
                      "fields, or set the KV heads and architecture explicitly.")]


@rule(
    id="architecture-unsupported", family="architecture", severity="error",
    fields=("spec.model.architecture",),
    source=_SEED,
    example="model: {hfArchitecture: WhisperForConditionalGeneration}",
    needs=("--speculative-config",),
)
def check_matrix_unsupported(pair: PDPair) -> list[Violation]:
    """No feature used is a 'no' cell of the matrix."""
    return [
        (f"{pair.model.architecture} models do not support {cap} with NixlConnector (compatibility matrix: no).",
         "Serve this model without P/D disaggregation." if cap == Capability.BASIC else f"Do not use {cap} with this model.")
        for cap, _ in _matrix_cells(pair, {Cell.NO})
    ]


@rule(
    id="architecture-unverified", family="architecture", severity="warning",
    fields=("spec.model.architecture",),
    source=_SEED,
    needs=("--speculative-config",),
)
def check_matrix_unverified(pair: PDPair) -> list[Violation]:
    """No feature used is an 'unknown' or 'in progress' cell."""
    return [
        (f"{cap} for {pair.model.architecture} models is '{value}' in the compatibility matrix: not verified "
         "to work with NixlConnector.", "Test this combination before production traffic, or avoid the feature.")
        for cap, value in _matrix_cells(pair, {Cell.UNKNOWN, Cell.IN_PROGRESS})
    ]


@rule(
    id="matrix-overridden-by-code", family="architecture", severity="warning",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
    source=(f"{DOC} footnote 5 (hybrid SSM heterogeneous TP: 'in progress' in 0.20.0-0.32.0, l.55 and l.68 in "
            "0.20.0, l.70 in 0.28.0-0.32.0; 'partial' from 0.33.0) against vLLM nixl add_remote_agent, which "
            "takes it (0.20-0.32); secondary: seed 000 footnote (e)"),
    since=_V020,
)
def check_hybrid_hetero_tp_matrix(pair: PDPair) -> list[Violation]:
    """Says where the check follows vLLM's code instead of the matrix (hybrid SSM heterogeneous TP)."""
    if not (pair.hybrid_ssm and pair.hetero_tp and pair.at_least((0, 20, 0))):
        return []
    if pair.at_least((0, 33, 0)):
        return []
    return [(
        f"The compatibility matrix of vLLM {fmt(pair.version)} still calls hybrid SSM heterogeneous TP 'in "
        "progress', but this version's code supports it (3-read conv transfer; Mamba2 from 0.20, GDN from 0.22, "
        "Mamba1 from 0.25). The check follows the code.",
        "No change needed; validate output quality once, as the upstream docs do not yet cover this.",
    )]
