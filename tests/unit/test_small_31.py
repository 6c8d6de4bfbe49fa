"""Small faults noticed by issue 9's helpers (round 31), each a kind with variants that fail without its fix."""

from __future__ import annotations

import pytest

from pdd_operator.compat.script_inputs import script_engines
from pdd_operator.vllm.versions import image_version_text, version_from_image

KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'


# --- 1. four-part vLLM releases (0.10.1.1) are named as vLLM numbers them ------------------------------------------------


@pytest.mark.parametrize(("pin", "text"), [("0.10.1.1", "0.10.1.1"), ("0.10.1", "0.10.1"), ("0.11.0", "0.11.0")])
def test_a_script_s_pip_pin_keeps_a_four_part_release(pin, text):
    script = (f"#!/bin/bash\npip install vllm=={pin}\nvllm serve m --port 8100 --kv-transfer-config '{KV_P}' &\n"
              f"vllm serve m --port 8200 --kv-transfer-config '{KV_D}' &\n")
    engines, _ = script_engines("run.sh", script)
    assert [e.config.version_text for e in engines] == [text, text], engines


@pytest.mark.parametrize(("image", "text", "version"), [
    ("vllm/vllm-openai:v0.10.1.1", "0.10.1.1", (0, 10, 1)),
    ("docker.io/vllm/vllm-openai:v0.10.1.1-cu128", "0.10.1.1", (0, 10, 1)),
    ("vllm/vllm-openai:v0.10.1", None, (0, 10, 1)),
    ("vllm/vllm-openai:v0.9.0.1", None, (0, 9, 0)),  # no vLLM release of that number
])
def test_an_image_tag_names_a_four_part_release_as_vllm_numbers_it(image, text, version):
    assert image_version_text(image) == text
    assert version_from_image(image) == version


# --- 2. vllm-version-mismatch cites the vLLM code it rests on ------------------------------------------------------------


def test_the_version_mismatch_rule_cites_vllm_s_files_and_releases_not_the_seed():
    import pdd_operator.compat.rules  # noqa: F401  (registers the rules)
    from pdd_operator.compat.rules.base import REGISTRY
    (rule,) = [r for r in REGISTRY if r.id == "vllm-version-mismatch"]
    assert "seed" not in rule.source, rule.source
    for cited in ("nixl_connector.py 0.13.0 line 178", "nixl/metadata.py 0.20.0 line 105", "nixl_handshake_wire"):
        assert cited in rule.source, (cited, rule.source)
