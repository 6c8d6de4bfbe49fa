"""Issue 9 (helper E, entry 32): kinds the last round left.

1. A container without ``command`` whose ``args`` (a model, flags) go to a vLLM image whose ENTRYPOINT was not read
   (AMD's ``rocm/vllm``, ``intel/vllm``, ``vllm/vllm-tpu``, any ``<org>/vllm``): the checker read it as ``vllm serve
   ARGS`` and judged the engine. vLLM's Dockerfile.rocm ``final`` stage and Dockerfile.tpu set ``CMD ["/bin/bash"]``
   and no ENTRYPOINT of their own (a base image's, not read), so the engine may never start: it is now "not checked:
   entrypoint of IMAGE unknown, give command" (pdd_operator/vllm/entrypoint.py entrypoint_unread).
"""

from __future__ import annotations

import pytest

from pdd_operator.vllm.entrypoint import entrypoint_unread
from tests.unit.test_entrypoint_29 import _compose, _compose_check, _pair
from tests.unit.test_turn2_variants import check

UNREAD_IMAGES = ["rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909", "rocm/vllm:rocm7.0.0_vllm_0.11.1_20251103",
                 "intel/vllm:0.10.2-xpu", "vllm/vllm-tpu:nightly", "my.io/team/vllm:0.11.0",
                 "vllm/vllm-openai-rocm:v0.32.0-base"]


def _not_checked(out: dict) -> list[str]:
    return [n["reason"] for n in out.get("notChecked", [])]


# --- 1. args only on a vLLM image whose ENTRYPOINT was not read ---------------------------------------------------


@pytest.mark.parametrize("image", UNREAD_IMAGES)
def test_args_only_on_an_unread_vllm_entrypoint_are_not_checked(tmp_path, capsys, image):
    # Before: read as 'vllm serve MODEL ...' and judged (rocm/vllm 0.10.1: INCOMPATIBLE, exit 1).
    code, out = check(tmp_path, capsys, *_pair([], image))
    reasons = _not_checked(out)
    assert code != 0 and not out["results"], out
    assert len(reasons) == 2 and all(f"entrypoint of {image} unknown, give command" in r for r in reasons), out


@pytest.mark.parametrize("image", ["rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909", "vllm/vllm-tpu:nightly"])
def test_compose_command_on_an_unread_vllm_entrypoint_is_not_checked(tmp_path, capsys, image):
    doc = _compose({"image": image, "command": ["Qwen/Qwen3-8B", "--kv-transfer-config", "KV"]})
    code, out = _compose_check(tmp_path, capsys, doc)
    assert code != 0 and not out["results"], out
    assert any(f"entrypoint of {image} unknown" in r for r in _not_checked(out)), out


@pytest.mark.parametrize(("lead", "command", "image"), [
    ([], None, "vllm/vllm-openai:v0.11.0"), ([], None, "vllm/vllm-openai-rocm:v0.32.0"),
    ([], None, "lmcache/vllm-openai:v0.3.3"),  # named as vLLM's OpenAI image: read as it
    ([], ["vllm", "serve"], "rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909"),  # a command: read
    (["vllm", "serve"], None, "rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909"),  # args that start the engine themselves
])
def test_controls_are_read(tmp_path, capsys, lead, command, image):
    code, out = check(tmp_path, capsys, *_pair(lead, image, command))
    assert out["results"] and not any("give command" in r for r in _not_checked(out)), out


@pytest.mark.parametrize(("image", "unread"), [
    *((i, True) for i in UNREAD_IMAGES),
    ("vllm/vllm-openai:v0.32.0", False), ("vllm/vllm-openai-rocm:v0.32.0", False), ("aibrix/vllm-openai:v0.9.2", False),
    ("my.io/team/engine:1", False),  # not a vLLM image: its own 'not checked' when the args carry P/D settings
])
def test_entrypoint_unread(image, unread):
    assert entrypoint_unread(image) is unread
