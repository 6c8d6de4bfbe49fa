"""Variants of what the twenty-fourth public-report set (tests/unit/data/public_reports_24) taught, with negative
controls.

- AIBrix's rebuilt vLLM images: ``aibrix/vllm-openai-aibrix-kvcache-nixl:v0.10.2-nixl-0.7.1-ucx-1.19.0`` is vLLM
  0.10.2 with AIBrix's KV cache, NIXL and UCX (the manifest of vllm-project/aibrix#1772). The version reader took only
  vLLM's own image names, so such a pair was "vLLM version unknown" and its version-bound rules (prefill TP > decode
  TP before 0.14) were never applied. It now reads the tag of ``vllm-openai-<extras>`` images under AIBrix's
  namespace (:data:`pdd_operator.vllm.versions.DERIVED_VLLM_OPENAI_NAMESPACES`).
"""

from __future__ import annotations

import pytest

from pdd_operator.vllm.versions import is_vllm_image, version_from_image
from tests.unit.test_turn2_variants import check, pd, rules

# --- AIBrix's vllm-openai-<extras> images --------------------------------------------------------------------------


@pytest.mark.parametrize(("image", "version"), [
    ("aibrix-container-registry-cn-beijing.cr.volces.com/aibrix/vllm-openai-aibrix-kvcache-nixl:"
     "v0.10.2-nixl-0.7.1-ucx-1.19.0", (0, 10, 2)),
    ("aibrix/vllm-openai-nixl:v0.11.0", (0, 11, 0)),
    ("registry.example:5000/aibrix/vllm-openai-aibrix-kvcache:v0.9.2-cu128", (0, 9, 2)),
])
def test_aibrix_rebuilt_vllm_openai_images_name_their_vllm_release(image, version):
    assert is_vllm_image(image)
    assert version_from_image(image) == version


@pytest.mark.parametrize("image", [
    "someone/vllm-openai-custom:v0.10.2",          # another namespace's rebuild: its tag is its own
    "aibrix/vllm-openai-aibrix-kvcache-nixl:latest",  # no release in the tag
    "aibrix/gateway-plugins:v0.5.0",                # AIBrix's own components version themselves
    "aibrix/vllm-openaiX:v0.10.2",                  # not a vllm-openai-<extras> name
])
def test_other_images_stay_unknown(image):
    assert version_from_image(image) is None


def test_a_prefill_tp_above_decode_tp_on_an_aibrix_image_is_refused_for_its_release(tmp_path, capsys):
    image = "aibrix/vllm-openai-aibrix-kvcache-nixl:v0.11.0-nixl-0.7.1-ucx-1.19.0"
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    prefill, decode = pd("llama", ["--kv-transfer-config", kv, "--tensor-parallel-size", "2"],
                         ["--kv-transfer-config", kv], model="meta-llama/Llama-3.1-8B-Instruct", image=image)
    prefill["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    code, out = check(tmp_path, capsys, prefill, decode)
    assert code == 1 and "hetero-tp-p-gt-d-unsupported" in rules(out, "error")
    assert "vllm-version-unknown" not in rules(out)


def test_the_same_pair_on_a_release_that_reads_from_a_larger_prefill_tp_passes(tmp_path, capsys):
    image = "aibrix/vllm-openai-aibrix-kvcache-nixl:v0.20.1-nixl-0.8.0"
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    prefill, decode = pd("llama", ["--kv-transfer-config", kv, "--tensor-parallel-size", "2"],
                         ["--kv-transfer-config", kv], model="meta-llama/Llama-3.1-8B-Instruct", image=image)
    prefill["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    code, out = check(tmp_path, capsys, prefill, decode)
    assert code == 0 and not rules(out, "error") and "vllm-version-unknown" not in rules(out)
