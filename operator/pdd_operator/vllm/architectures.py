"""Model architecture knowledge: Hugging Face ``architectures`` names -> matrix rows.

The compatibility matrix (seed 000, section 1) is per architecture family; users name models by
their Hugging Face id or by the ``architectures`` entry of config.json. These tables map the
well-known ones to a family and, for hybrid SSM models, to the SSM kind vLLM's NIXL conv transfer
handles (``ssm_conv_transfer_utils.derive_mamba_conv_split``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pdd_operator.api.spec import Architecture, SSMKind
from pdd_operator.vllm.max_model_len import ContextLimit
from pdd_operator.vllm.model_registry import registry_family, registry_since, registry_sliding
from pdd_operator.vllm.sliding_window import window_depends


@dataclass(frozen=True)
class ModelTraits:
    """What the rules need to know about a model: its family and, if hybrid SSM, the SSM kind; ``head_size``
    (the attention head dimension, vLLM's ``model_config.get_head_size()``) where known."""

    architecture: Architecture | None
    ssm_kind: SSMKind | None = None
    source: str = "unknown"
    sliding_window: bool = False
    head_size: int | None = None
    #: the first vLLM release whose model registry has the architecture (``None``: 0.18.0 or older, or not known):
    #: older engines refuse the model at startup, so a pair of unknown version runs this release or a later one.
    served_since: tuple[int, int, int] | None = None
    #: config.json ``num_attention_heads`` (of the text config), where known: vLLM refuses a TP that does not divide it.
    num_heads: int | None = None
    #: config.json ``attention_chunk_size`` (Llama 4's chunked local attention; vLLM's ``model_config.attention_chunk_size``),
    #: where known: vLLM turns the hybrid KV cache manager off for it in some setups.
    attention_chunk_size: int | None = None
    #: routed experts per MoE layer from config.json (0: the config names none, a model without experts), where a
    #: config.json is known: vLLM refuses expert parallelism for a model without experts.
    num_experts: int | None = None
    #: a block-quantized FP8 checkpoint's ``(expert intermediate size, hidden size, block_n, block_k)`` from config.json,
    #: where known (:func:`pdd_operator.vllm.fp8_block.moe_block_refusal`).
    fp8_moe_shape: tuple[int, int, int, int] | None = None
    #: the first release whose routed experts of that checkpoint are FP8 (DeepSeek V4 ``expert_dtype: fp8``); ``None``:
    #: every release.
    fp8_moe_since: tuple[int, ...] | None = None
    #: a hybrid SSM model whose full-attention layers are MLA (Kimi Linear's KDA + MLA; :data:`HYBRID_MLA_MODEL_TYPES`):
    #: its attention page per token is one latent, replicated on every TP rank, so it never shrinks with TP.
    mla_attention: bool = False
    #: whether vLLM windows some attention layer depends on a config.json that was not read: the architecture takes
    #: its window from config.json (:func:`~pdd_operator.vllm.sliding_window.window_depends`: Mistral v0.1 windows
    #: every layer, v0.3 none) and neither a config.json nor the table of public checkpoints told it. ``False`` where
    #: a config.json was read, and for architectures that never window or window by their code
    #: (``sliding_window``). The rules judge such a model both ways (compat/engine.py ``_unknown_window``).
    window_depends: bool = False
    #: a multimodal checkpoint whose config.json was read and whose language model has plain attention (per-head K/V:
    #: no MLA latent, no SSM layers, not encoder-decoder; :func:`~pdd_operator.vllm.model_config.facts_from_config`
    #: tests those before it calls a model multimodal). ``False`` where only the name or a declared family tells it.
    plain_language_model: bool = False
    #: the longest ``--max-model-len`` vLLM accepts for the model, from a config.json that was read (its own or the
    #: table's; :class:`~pdd_operator.vllm.max_model_len.ContextLimit`), ``None`` where none was.
    context_limit: ContextLimit | None = None
    #: where a table copy of the model's config.json was read (:mod:`~pdd_operator.vllm.known_models`) but no
    #: :attr:`context_limit` could be derived from it, the field it lacks (``max_position_embeddings``: no length key
    #: at all, dropped from an ``also`` id, a sibling or a quantized copy; ``rope_scaling``: a RoPE entry not read
    #: here), else ``""``. The max-model-len rule then warns that it did not check the length instead of passing.
    context_missing: str = ""

    @property
    def kv_family(self) -> Architecture | None:
        """The family whose KV cache the engine holds: :attr:`architecture`, but :attr:`Architecture.DENSE` for a
        multimodal checkpoint with :attr:`plain_language_model`. Only the language model's layers hold KV cache: the
        vision encoder's attention (``MMEncoderAttention``, "attention without any cache",
        model_executor/layers/attention/mm_encoder_attention.py 0.30.0 lines 219-220) is no ``AttentionLayerBase``,
        so the backend that decides the block size is the language model's (``Platform._find_non_ssm_backend``,
        platforms/interface.py 0.30.0 lines 589-606)."""
        if self.architecture == Architecture.MULTIMODAL and self.plain_language_model:
            return Architecture.DENSE
        return self.architecture

    @property
    def needs_hma(self) -> bool:
        """True when vLLM always needs the hybrid KV cache manager (HMA): models with SSM layers.

        Sliding-window or chunked-attention models use HMA too, but only where vLLM keeps it on with a
        KV connector (0.22+); :attr:`pdd_operator.compat.pair.PDPair.hma_required` decides that.
        """
        return self.architecture == Architecture.HYBRID_SSM


A, S = Architecture, SSMKind

#: config.json ``architectures[0]`` -> (family, SSM kind).
#: Hybrid SSM models whose full-attention layers are MLA, by config.json ``model_type`` and architecture: vLLM's
#: ``is_deepseek_mla`` lists ``kimi_linear`` (transformers_utils/model_arch_config_convertor.py l.193 of 0.14.0, l.234
#: of 0.22.0, l.275 of 0.27.0, l.333 of 0.32.0, l.313 of 0.34.0), so ``use_mla`` is true beside its KDA (GDN-kind)
#: layers; ``KimiLinearForCausalLM`` is registered from 0.11.1 (models/registry.py; vllm.models.kimi_k3 in 0.32.0),
#: Kimi K3's text model is ``kimi_linear``. ``glm5_next`` (GLM-5.3-Flash, KDA + MLA) is in the same list from 0.30.0
#: (l.324 of 0.30.0, l.327 of 0.32.0, l.307 of 0.34.0; models/registry.py 0.32.0 l.121 and l.423).
HYBRID_MLA_MODEL_TYPES = frozenset({"kimi_linear", "glm5_next", "glm5_next_text"})
HYBRID_MLA_ARCHITECTURES = frozenset({"KimiLinearForCausalLM", "KimiK3ForConditionalGeneration",
                                      "KimiK31ForConditionalGeneration", "Glm5NextForCausalLM",
                                      "Glm5NextForConditionalGeneration"})

HF_ARCHITECTURES: dict[str, tuple[Architecture, SSMKind | None]] = {
    # hybrid attention + state-space
    "NemotronHForCausalLM": (A.HYBRID_SSM, S.MAMBA2),
    "FalconH1ForCausalLM": (A.HYBRID_SSM, S.MAMBA2),
    "Mamba2ForCausalLM": (A.HYBRID_SSM, S.MAMBA2),
    "BambaForCausalLM": (A.HYBRID_SSM, S.MAMBA2),
    "GraniteMoeHybridForCausalLM": (A.HYBRID_SSM, S.MAMBA2),
    "Zamba2ForCausalLM": (A.HYBRID_SSM, S.MAMBA2),
    "JambaForCausalLM": (A.HYBRID_SSM, S.MAMBA1),
    "MambaForCausalLM": (A.HYBRID_SSM, S.MAMBA1),
    "Qwen3NextForCausalLM": (A.HYBRID_SSM, S.GDN),
    "Qwen3_5ForCausalLM": (A.HYBRID_SSM, S.GDN),
    "Qwen3_5MoeForCausalLM": (A.HYBRID_SSM, S.GDN),
    "Qwen3_5ForConditionalGeneration": (A.HYBRID_SSM, S.GDN),
    "Qwen3_5MoeForConditionalGeneration": (A.HYBRID_SSM, S.GDN),
    "KimiLinearForCausalLM": (A.HYBRID_SSM, S.GDN),
    # MiniMax-Text-01 / MiniMax-M1: lightning (linear) attention layers beside softmax attention, a hybrid
    # (vllm minimax_text_01.py, IsHybrid; registry.py of 0.10-0.2x, gone by 0.32) whose state is none of the
    # SSM kinds the NIXL conv transfer knows, so its kind stays unknown (ssm-kind-unknown).
    "MiniMaxText01ForCausalLM": (A.HYBRID_SSM, None),
    "MiniMaxM1ForCausalLM": (A.HYBRID_SSM, None),
    "MiniMaxForCausalLM": (A.HYBRID_SSM, None),
    # MLA
    "DeepseekV2ForCausalLM": (A.MLA, None),
    "DeepseekV3ForCausalLM": (A.MLA, None),
    "KimiK2ForCausalLM": (A.MLA, None),
    # Kimi K2.5: a DeepSeek-V3 (MLA) text model with a vision tower (vllm kimi_k25.py).
    "KimiK25ForConditionalGeneration": (A.MLA, None),
    # GLM-4.7-Flash: MLA attention (vllm glm4_moe_lite.py, MLA layers of deepseek_v2).
    "Glm4MoeLiteForCausalLM": (A.MLA, None),
    "DeepseekV32ForCausalLM": (A.SPARSE_MLA, None),
    # GLM-5 / 5.2 (glm_moe_dsa): the DeepSeek-V3.2 DSA code under another name (vllm/models/deepseek_v32/__init__.py
    # 0.32.0: "GLM-5.2 (glm_moe_dsa) reuses the CUDA DSA module"; registry.py GlmMoeDsaForCausalLM).
    "GlmMoeDsaForCausalLM": (A.SPARSE_MLA, None),
    # DeepSeek-V4: sparse MLA with compressed KV and a sliding-window branch (vllm/models/deepseek_v4/
    # sparse_mla.py, compressor.py, attention.py window_size = config.sliding_window; vLLM 0.32).
    "DeepseekV4ForCausalLM": (A.SPARSE_MLA, None),
    "DeepseekV4ForConditionalGeneration": (A.SPARSE_MLA, None),
    # MoE
    "MixtralForCausalLM": (A.MOE, None),
    "Qwen2MoeForCausalLM": (A.MOE, None),
    "Qwen3MoeForCausalLM": (A.MOE, None),
    "GptOssForCausalLM": (A.MOE, None),
    "DbrxForCausalLM": (A.MOE, None),
    "Llama4ForCausalLM": (A.MOE, None),
    # GLM-4.5 / 4.6 (vllm glm4_moe.py: grouped-query attention, MoE MLP) and MiniMax-M2 (minimax_m2.py).
    "Glm4MoeForCausalLM": (A.MOE, None),
    "MiniMaxM2ForCausalLM": (A.MOE, None),
    # dense
    "LlamaForCausalLM": (A.DENSE, None),
    "MistralForCausalLM": (A.DENSE, None),
    "Qwen2ForCausalLM": (A.DENSE, None),
    "Qwen3ForCausalLM": (A.DENSE, None),
    "GemmaForCausalLM": (A.DENSE, None),
    "Gemma2ForCausalLM": (A.DENSE, None),
    "Gemma3ForCausalLM": (A.DENSE, None),
    "Phi3ForCausalLM": (A.DENSE, None),
    "GraniteForCausalLM": (A.DENSE, None),
    # Plain decoder families of vLLM's model registry (vllm/model_executor/models/registry.py: opt.py, gpt2.py,
    # gpt_j.py, gpt_neox.py, falcon.py, bloom.py, starcoder2.py, gpt_bigcode.py, phi.py): per-head K/V attention
    # over every layer, no MLA latent, no Mamba or linear-attention state.
    "OPTForCausalLM": (A.DENSE, None),
    "GPT2LMHeadModel": (A.DENSE, None),
    "GPTJForCausalLM": (A.DENSE, None),
    "GPTNeoXForCausalLM": (A.DENSE, None),
    "FalconForCausalLM": (A.DENSE, None),
    "RWForCausalLM": (A.DENSE, None),
    "BloomForCausalLM": (A.DENSE, None),
    "Starcoder2ForCausalLM": (A.DENSE, None),
    "GPTBigCodeForCausalLM": (A.DENSE, None),
    "PhiForCausalLM": (A.DENSE, None),
    # multimodal
    "LlavaForConditionalGeneration": (A.MULTIMODAL, None),
    "LlavaNextForConditionalGeneration": (A.MULTIMODAL, None),
    "Qwen2VLForConditionalGeneration": (A.MULTIMODAL, None),
    "Qwen2_5_VLForConditionalGeneration": (A.MULTIMODAL, None),
    "Gemma3ForConditionalGeneration": (A.MULTIMODAL, None),
    "Llama4ForConditionalGeneration": (A.MULTIMODAL, None),
    # encoder-decoder
    "T5ForConditionalGeneration": (A.ENCODER_DECODER, None),
    "BartForConditionalGeneration": (A.ENCODER_DECODER, None),
    "WhisperForConditionalGeneration": (A.ENCODER_DECODER, None),
    "MllamaForConditionalGeneration": (A.ENCODER_DECODER, None),
}

#: Architectures with sliding-window or chunked attention layers (vLLM gives them a non-full
#: attention KV spec, so the hybrid KV cache manager manages them when it is on).
SLIDING_WINDOW_ARCHITECTURES = {
    "Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration", "GptOssForCausalLM",
    "Llama4ForCausalLM", "Llama4ForConditionalGeneration", "Cohere2ForCausalLM",
    "DeepseekV4ForCausalLM", "DeepseekV4ForConditionalGeneration",
}
_SLIDING_NAMES = re.compile(r"gemma-?[23]|gpt-oss|llama-?4|command-a|command-r7b|deepseek-v4", re.I)

#: Hugging Face model ids -> their config.json ``architectures[0]``, for families the registry table
#: (:mod:`pdd_operator.vllm.model_registry`) classifies, tried when no architecture is given.
MODEL_NAME_ARCHITECTURES: list[tuple[re.Pattern[str], str]] = [
    # Kimi Linear (moonshotai/Kimi-Linear-48B-A3B-*): KDA linear attention + MLA (HYBRID_MLA_ARCHITECTURES).
    (re.compile(r"kimi-linear", re.I), "KimiLinearForCausalLM"),
    # GLM-5.3-Flash: KDA (GDN-kind state) + MLA hybrid (vllm/models/glm5next/__init__.py 0.32.0 names it).
    (re.compile(r"glm-?5\.3-flash", re.I), "Glm5NextForConditionalGeneration"),
    # GLM-5 / 5.1 / 5.2: glm_moe_dsa, DeepSeek-V3.2's sparse MLA code (vllm/models/deepseek_v32/__init__.py 0.32.0).
    (re.compile(r"glm-?5(\.[0-2])?(?![.\d])(?!-flash)", re.I), "GlmMoeDsaForCausalLM"),
    # MiMo-V2-Flash: MoE with sliding-window and global attention layers (mimo_v2.py, sliding_window_size).
    (re.compile(r"mimo-v2-flash", re.I), "MiMoV2FlashForCausalLM"),
    # Kimi-K3 and K3.1 (moonshotai): KDA + MLA hybrid MoE, multimodal. vLLM names the class of each in its registry
    # (KimiK3ForConditionalGeneration from 0.27.0, KimiK31ForConditionalGeneration from 0.34.0: vllm/models/kimi_k3,
    # registry.py _MULTIMODAL_MODELS) and picks Kimi-K3's tokenizer mode by that name (vllm/config/model.py 0.27.0
    # lines 653-654). Its drafts (Kimi-K3-DSpark, -MTP) are other models and are not matched.
    (re.compile(r"kimi-k3\.1(?![\d])(?!-(dspark|mtp|eagle))", re.I), "KimiK31ForConditionalGeneration"),
    (re.compile(r"kimi-k3(?![.\d])(?!-(dspark|mtp|eagle))", re.I), "KimiK3ForConditionalGeneration"),
]


def architecture_name(hf_architecture: str | None, model_name: str | None) -> str | None:
    """The config.json ``architectures[0]`` name of a model: ``hf_architecture`` where given, else the one
    :data:`MODEL_NAME_ARCHITECTURES` gives for the model id or path (``/models/Kimi-K3`` ->
    ``KimiK3ForConditionalGeneration``), else ``None``."""
    if hf_architecture:
        return hf_architecture
    return next((hf for pattern, hf in MODEL_NAME_ARCHITECTURES if pattern.search(model_name or "")), None)

#: Patterns over Hugging Face model ids for well-known families, tried when no architecture is given.
MODEL_NAME_PATTERNS: list[tuple[re.Pattern[str], Architecture, SSMKind | None]] = [
    # Nemotron 3 / 3.5 Nano, Super and Ultra are NemotronH (Mamba2 + attention + MoE): vllm#43508 runs
    # nvidia/Nemotron-3-Ultra-550B-A55B-RL as "NemotronH SSM-Hybrid"; NeMo Gym's Nemotron-3.5-Super configs set the
    # Mamba cache flags.
    (re.compile(r"nemotron-(h|3(\.\d+)?-(nano|super|ultra)|nano-\d|.*-h-)", re.I), A.HYBRID_SSM, S.MAMBA2),
    (re.compile(r"falcon-h1", re.I), A.HYBRID_SSM, S.MAMBA2),
    (re.compile(r"granite-4\.\d+-h", re.I), A.HYBRID_SSM, S.MAMBA2),
    (re.compile(r"jamba", re.I), A.HYBRID_SSM, S.MAMBA1),
    # Qwen3.6 keeps Qwen3.5's Gated DeltaNet + gated attention layout (vllm#54387: "3x Gated DeltaNet + 1x Gated
    # Attention"; vllm#44831).
    (re.compile(r"qwen3(\.[56]|-next)", re.I), A.HYBRID_SSM, S.GDN),
    (re.compile(r"minimax-(m1|text-01)", re.I), A.HYBRID_SSM, None),
    (re.compile(r"deepseek-v(3\.2|4)", re.I), A.SPARSE_MLA, None),
    (re.compile(r"glm-4\.7-flash", re.I), A.MLA, None),
    (re.compile(r"deepseek-(v2|v3|r1)", re.I), A.MLA, None),
    (re.compile(r"kimi-k2", re.I), A.MLA, None),
    # Qwen MoE names of the releases whose layout is known (Qwen2-57B-A14B, Qwen3-30B-A3B, Qwen3-Coder-480B-A35B);
    # Qwen3.5 / 3.6 are hybrid (above) and a later version (Qwen3.8, vllm 1Cat-vLLM#555: its checkpoint fails the NIXL
    # Mamba conv-layout assert) is not guessed from an older one's layout.
    (re.compile(r"mixtral|qwen(1\.5|2|3)-.*a\d+b|gpt-oss|glm-4\.[5-7]|minimax-m2|llama-?4", re.I), A.MOE, None),
    (re.compile(r"llava|-vl-|vision", re.I), A.MULTIMODAL, None),
    (re.compile(r"(^|/)(t5|flan-t5|bart|whisper)", re.I), A.ENCODER_DECODER, None),
    (re.compile(r"(^|/)(opt-\d|distilgpt2|gpt2|gpt-j|gpt-neox|pythia|bloom|starcoder2?|santacoder|falcon-?(\d|40b|7b|180b|rw)"
                r"|phi-?[1-4])", re.I), A.DENSE, None),
    # Dense Qwen: Qwen, Qwen1.5, Qwen2, Qwen2.5, Qwen3 and QwQ (Qwen2ForCausalLM / Qwen3ForCausalLM); a version the
    # table does not know (Qwen3.7, Qwen3.8, Qwen4) stays unknown: Qwen3.5 turned hybrid (Gated DeltaNet) under the
    # same name stem.
    (re.compile(r"llama|mistral|gemma|qwen(1\.5|2(\.5)?|3)?(?![./\d])|qwq|phi-", re.I), A.DENSE, None),
]

#: config.json ``model_type`` -> family, for a config whose ``architectures`` entry is not in
#: :data:`HF_ARCHITECTURES` (transformers' model types of the plain decoder families above).
MODEL_TYPES: dict[str, Architecture] = {
    **{t: A.DENSE for t in ("opt", "gpt2", "gptj", "gpt_neox", "falcon", "bloom", "starcoder2", "gpt_bigcode", "phi",
                            "phi3", "llama", "mistral", "qwen2", "qwen3", "granite", "gemma")},
    **{t: A.MOE for t in ("mixtral", "qwen2_moe", "qwen3_moe", "dbrx")},
}

#: Head sizes of Hugging Face model ids whose config.json the checker does not need to be given: each checkpoint's
#: ``hidden_size / num_attention_heads`` (OPT: facebook/opt-* configs; GPT-2: ``n_embd / n_head``).
_HEAD_SIZES: list[tuple[re.Pattern[str], int]] = [
    (re.compile(r"(^|/)opt-(125m|350m|1\.3b)\b", re.I), 64),
    (re.compile(r"(^|/)opt-2\.7b\b", re.I), 80),
    (re.compile(r"(^|/)opt-(6\.7b|13b|30b|66b)\b", re.I), 128),
    (re.compile(r"(^|/)(distilgpt2|gpt2(-medium|-large|-xl)?)$", re.I), 64),
]


def head_size_of(model_name: str) -> int | None:
    """The attention head size of a well-known Hugging Face model id (:data:`_HEAD_SIZES`), else ``None``."""
    return next((size for pattern, size in _HEAD_SIZES if pattern.search(model_name or "")), None)


def traits(
    architecture: str | None, ssm_kind: str | None, hf_architecture: str | None, model_name: str
) -> ModelTraits:
    """Return the model's family and SSM kind.

    Precedence: the explicit ``architecture``/``ssmKind`` fields, then ``hfArchitecture`` through
    :data:`HF_ARCHITECTURES`, then through vLLM's own model registry
    (:mod:`pdd_operator.vllm.model_registry`), then the model id through :data:`MODEL_NAME_ARCHITECTURES`
    (to an ``architectures`` name, looked up as above) and :data:`MODEL_NAME_PATTERNS`. An explicit field
    always wins; a missing SSM kind is filled in from the tables when they agree on the family. The window:
    ``sliding_window`` for architectures (or, without one, names) windowed by their code, ``window_depends`` for
    those whose config.json decides (:func:`~pdd_operator.vllm.sliding_window.window_depends`); no config.json is
    read here, :func:`~pdd_operator.vllm.model_config.resolve_model` settles both from one.
    """
    explicit_arch = Architecture(architecture) if architecture else None
    explicit_kind = SSMKind(ssm_kind) if ssm_kind else None
    derived: tuple[Architecture, SSMKind | None] | None = None
    source = "unknown"
    hf_architecture = architecture_name(hf_architecture, model_name)
    if hf_architecture and hf_architecture in HF_ARCHITECTURES:
        derived, source = HF_ARCHITECTURES[hf_architecture], f"hfArchitecture {hf_architecture}"
    elif registry_family(hf_architecture) is not None:
        derived, source = registry_family(hf_architecture), f"hfArchitecture {hf_architecture} (vLLM model registry)"
    else:
        for pattern, arch, kind in MODEL_NAME_PATTERNS:
            if pattern.search(model_name):
                derived, source = (arch, kind), f"model name {model_name!r}"
                break
    sliding = (hf_architecture in SLIDING_WINDOW_ARCHITECTURES or registry_sliding(hf_architecture) if hf_architecture
               else bool(_SLIDING_NAMES.search(model_name)))
    depends = not sliding and window_depends(hf_architecture, model_name)
    if explicit_arch is not None:
        kind = explicit_kind
        if kind is None and derived is not None and derived[0] == explicit_arch:
            kind = derived[1]
        return ModelTraits(explicit_arch, kind, "spec.model.architecture", sliding, head_size_of(model_name),
                           registry_since(hf_architecture),
                           mla_attention=explicit_arch == Architecture.HYBRID_SSM
                           and hf_architecture in HYBRID_MLA_ARCHITECTURES, window_depends=depends)
    if derived is not None:
        return ModelTraits(derived[0], explicit_kind or derived[1], source, sliding, head_size_of(model_name),
                           registry_since(hf_architecture),
                           mla_attention=derived[0] == Architecture.HYBRID_SSM
                           and hf_architecture in HYBRID_MLA_ARCHITECTURES, window_depends=depends)
    return ModelTraits(None, explicit_kind, "unknown", sliding, head_size_of(model_name))
