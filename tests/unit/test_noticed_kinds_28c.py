"""What the helpers of session 28 noticed (third round), fixed as kinds, with negative controls.

2. A vLLM connector name in another case (``NIXLConnector``) on an engine whose vLLM release is unknown was read as
   a connector without NIXL (``kv-connector-mixed``: "no KV moves") while vLLM's factory looks names up exactly in
   every release: ``kv-connector-unregistered`` is judged on any release (``Rule.any_release``).
"""

from __future__ import annotations

import pytest

from tests.unit.test_turn2_variants import KV, POD_IP, check, pd, rules

# --- 2. a miscased connector name on an unknown release --------------------------------------------------------------

UNKNOWN_IMAGES = ("registry.example.com/team/vllm:latest", "ghcr.io/acme/serving:2025-06", "vllm/vllm-openai:latest")


@pytest.mark.parametrize("image", UNKNOWN_IMAGES)
@pytest.mark.parametrize(("role", "name"), [("decode", "NIXLConnector"), ("prefill", "nixlconnector")])
def test_a_miscased_name_is_unregistered_on_an_unknown_release(tmp_path, capsys, image, role, name):
    bad = KV.replace("NixlConnector", name)
    p_kv, d_kv = (bad, KV) if role == "prefill" else (KV, bad)
    docs = pd("case", ["--kv-transfer-config", p_kv], ["--kv-transfer-config", d_kv], image=image, env=[POD_IP])
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-connector-unregistered" in rules(out, "error"), out
    assert "kv-connector-mixed" not in rules(out), out


@pytest.mark.parametrize("image", UNKNOWN_IMAGES[:2])
def test_both_roles_miscased_on_an_unknown_release_are_refused(tmp_path, capsys, image):
    bad = KV.replace("NixlConnector", "NIXLConnector")
    docs = pd("case", ["--kv-transfer-config", bad], ["--kv-transfer-config", bad], image=image, env=[POD_IP])
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-connector-unregistered" in rules(out, "error"), out


def test_a_connector_without_nixl_on_an_unknown_release_is_still_mixed(tmp_path, capsys):
    """Control: a real connector without NIXL beside NIXL is kv-connector-mixed, not a registry finding."""
    other = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
    docs = pd("case", ["--kv-transfer-config", KV], ["--kv-transfer-config", other], image=UNKNOWN_IMAGES[0],
              env=[POD_IP])
    code, out = check(tmp_path, capsys, *docs)
    assert "kv-connector-mixed" in rules(out, "error") and "kv-connector-unregistered" not in rules(out), out


@pytest.mark.parametrize("image", UNKNOWN_IMAGES[:2])
def test_the_renamed_storage_connector_is_not_judged_on_an_unknown_release(tmp_path, capsys, image):
    """Control: SharedStorageConnector vs ExampleConnector depends on the release; unknown, it is not an error."""
    kv = '{"kv_connector":"SharedStorageConnector","kv_role":"kv_both"}'
    docs = pd("case", ["--kv-transfer-config", kv], ["--kv-transfer-config", kv], image=image, env=[POD_IP])
    code, out = check(tmp_path, capsys, *docs)
    assert "kv-connector-unregistered" not in rules(out, "error"), out


def test_vllms_spelling_on_an_unknown_release_is_not_refused(tmp_path, capsys):
    docs = pd("case", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV], image=UNKNOWN_IMAGES[0],
              env=[POD_IP])
    code, out = check(tmp_path, capsys, *docs)
    assert "kv-connector-unregistered" not in rules(out), out
