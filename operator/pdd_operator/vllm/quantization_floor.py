"""The lowest NVIDIA compute capability on which vLLM loads a model's weights, where the quantization says it.

vLLM refuses a quantized model on a GPU below the method's minimum capability when it builds its config
(``VllmConfig._get_quantization_config``: ``if capability < quant_config.get_min_capability(): raise ValueError(
"The quantization method ... is not supported for the current GPU. Minimum capability: ...")``, vllm/config/vllm.py
0.18.0 line 509, 0.20.1 line 535, 0.23.0 line 620, 0.24.0 line 623, 0.28.0 line 774, 0.34.0 line 892).

FP8 weights, however stored, need compute capability 7.5 or newer in every release read (0.16.0-0.34.0):

- ``quant_method: fp8`` checkpoints and ``--quantization fp8`` (online): ``Fp8Config.get_min_capability`` is 75
  (model_executor/layers/quantization/fp8.py, every release from 0.16.0 to 0.34.0);
- ``fbgemm_fp8``: 80 (fbgemm_fp8.py, same releases); ``ModelOptFp8Config``: 89 in 0.16.0, 80 in 0.28.0 and 0.30.0
  (modelopt.py);
- ``compressed-tensors`` FP8: the container says 70, but each layer's scheme is checked again
  (``CompressedTensorsConfig._check_scheme_supported``, compressed_tensors.py 0.18.0 line 330, 0.20.1 line 341,
  0.34.0 line 392): ``CompressedTensorsW8A8Fp8`` needs 89 and falls back to ``CompressedTensorsW8A16Fp8``, which
  needs 75 (schemes/compressed_tensors_w8a16_fp8.py, 0.18.0 to 0.34.0).

So a V100 (7.0) never runs an FP8 model. Only that floor is claimed: other methods (AWQ, GPTQ, bitsandbytes, NVFP4,
Quark) and models whose quantization the name does not show are not judged (``None``).
"""

from __future__ import annotations

import re

#: The compute capability below which no FP8-weight model loads (see the module docstring).
FP8_WEIGHTS_MIN_CAPABILITY: tuple[int, int] = (7, 5)
#: ``--quantization`` values that put FP8 weights on the GPU (online FP8, FBGEMM FP8, ModelOpt FP8).
FP8_QUANTIZATION_FLAGS = frozenset({"fp8", "fbgemm_fp8", "modelopt"})
#: A Hugging Face repository name that marks FP8 weights: an ``FP8`` (or ``FP8A16``) token delimited by ``-``, ``_``
#: or ``.`` (``Qwen/Qwen3-14B-FP8``, ``RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic``, ``...-FP8-block``).
_FP8_NAME = re.compile(r"(?:^|[-_.])fp8(?:a16)?(?=$|[-_.])", re.I)


def min_capability(model: str | None, quantization: str | bool | None) -> tuple[int, int] | None:
    """The lowest compute capability ``(major, minor)`` on which vLLM loads this model's weights, where known here:
    :data:`FP8_WEIGHTS_MIN_CAPABILITY` for FP8 weights (``quantization``, the engine's ``--quantization`` value, is
    one of :data:`FP8_QUANTIZATION_FLAGS`, or no other method is given and the repository part of ``model`` carries
    an FP8 token); else ``None`` (no floor claimed). Pure."""
    if isinstance(quantization, str) and quantization.strip():
        return FP8_WEIGHTS_MIN_CAPABILITY if quantization.strip().lower() in FP8_QUANTIZATION_FLAGS else None
    repo = (model or "").rstrip("/").rpartition("/")[2]
    return FP8_WEIGHTS_MIN_CAPABILITY if _FP8_NAME.search(repo) else None
