"""One reading of an image's Dynamo release (issue 9): ``dynamo_release`` (compat/dynamo_engine_defaults.py).

The worker's default connector (``added_connector``) took its release from any ``ai-dynamo`` image tag through
``parse_version``, so a preview (``vllm-runtime:1.0.0-rc1``, ``:0.9.0-dev``, ``:1.3.0-dev.1``) or an unread ``.postN``
(``:0.6.1.post1``) was judged as the final release it precedes or extends: ``1.0.0-rc1`` as 1.0.0 (no connector, an
error), ``0.9.0-dev`` as 0.9.0 (NixlConnector, nothing said). Such an image names no release read: the worker is
judged with the pre-1.0 default and says so (``dynamo-connector-assumed``), as for ``latest``, a digest or a custom
image; the block size, KV events and side-channel port read the same definition.
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.dynamo_engine_defaults import dynamo_release
from tests.unit.test_leftovers_32 import ASSUMED, RUNTIME, _graph
from tests.unit.test_turn2_variants import check, rules

DIGEST = "nvcr.io/nvidia/ai-dynamo/vllm-runtime@sha256:" + "0" * 64
PREVIEWS = [f"{RUNTIME}1.0.0-rc1", f"{RUNTIME}0.9.0-dev", f"{RUNTIME}1.3.0-dev.1", f"{RUNTIME}1.4.0-kimi-k3-dev.1",
            f"{RUNTIME}0.6.1.post1", f"{RUNTIME}1.0.0rc1"]
NOT_A_RELEASE = [*PREVIEWS, f"{RUNTIME}latest", DIGEST, "nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.9.1",
                 "nvcr.io/nvidia/ai-dynamo/dynamo:1.4.1-ci-cb301ba93943-vllm-runtime"]


@pytest.mark.parametrize("image", NOT_A_RELEASE)
def test_no_release_is_read_from_a_preview_or_another_image(image):
    assert dynamo_release(image) is None


@pytest.mark.parametrize(("image", "release"), [
    (f"{RUNTIME}0.9.1", (0, 9, 1)), (f"{RUNTIME}1.0.1-efa-amd64", (1, 0, 1)), (f"{RUNTIME}1.3.0.post1", (1, 3, 0)),
    (f"{RUNTIME}1.0.1@sha256:" + "0" * 64, (1, 0, 1)),
])
def test_a_final_release_is_read(image, release):
    assert dynamo_release(image) == release


@pytest.mark.parametrize("image", [*PREVIEWS, f"{RUNTIME}latest", DIGEST])
def test_a_preview_worker_is_judged_with_the_pre_1_0_default_and_says_so(tmp_path, capsys, image):
    # Before: 1.0.0-rc1 read as 1.0.0 (no connector: kv-connector-missing, exit 1); 0.9.0-dev as 0.9.0 (NIXL, silent).
    code, out = check(tmp_path, capsys, _graph(image, "v1alpha1"))
    assert code == 0 and ASSUMED in rules(out, "warning") and not rules(out, "error"), out
    said = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == ASSUMED)
    assert "Dynamo release is not known from its image" in said and image in said, out


@pytest.mark.parametrize(("image", "missing"), [(f"{RUNTIME}0.9.1", False), (f"{RUNTIME}0.8.1.post3", False),
                                                (f"{RUNTIME}1.0.0", True), (f"{RUNTIME}1.1.0-cuda13", True)])
def test_a_final_release_says_nothing_assumed(tmp_path, capsys, image, missing):
    code, out = check(tmp_path, capsys, _graph(image, "v1alpha1"))
    assert ASSUMED not in rules(out) and ("kv-connector-missing" in rules(out, "error")) is missing, out


# --- the defaults a worker of unknown release may add: said where they decide a rule ---------------------------------

CUSTOM = "my.io/team/dynamo-vllm:custom"
HMA_RULE = "hma-explicit-forced-off"


def _hma_graph(image: str, *extra: str) -> dict:
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    return _graph(image, "v1beta1", ("--kv-transfer-config", kv, "--no-disable-hybrid-kv-cache-manager", *extra))


@pytest.mark.parametrize("image", [CUSTOM, f"{RUNTIME}latest", f"{RUNTIME}1.1.0-rc1"])
def test_an_explicit_hma_on_a_worker_whose_events_are_unknown_is_not_checked(tmp_path, capsys, image):
    # Dynamo 0.4-1.0 set kv_events_config itself (vLLM 0.13-0.19 then refuse the explicit HMA), 1.1+ do not.
    # Before: nothing said, exit 0.
    code, out = check(tmp_path, capsys, _hma_graph(image), extra=("--vllm-version", "0.19.0"))
    assert code == 3 and not rules(out, "error"), out
    assert any(f"{HMA_RULE} cannot be decided" in n["reason"] and "Dynamo release of" in n["reason"]
               for n in out["notChecked"]), out


@pytest.mark.parametrize(("image", "extra", "vllm", "refused"), [
    (f"{RUNTIME}1.1.0", (), "0.19.0", False),                                # a release read: adds no events
    (CUSTOM, ("--no-enable-prefix-caching",), "0.19.0", False),              # no events whatever the release
    (CUSTOM, ("--kv-events-config", '{"enable_kv_cache_events":true}'), "0.19.0", True),  # the user's own: refused
    (CUSTOM, (), "0.20.0", False),                                           # 0.20 keeps HMA with KV events
])
def test_an_explicit_hma_controls(tmp_path, capsys, image, extra, vllm, refused):
    code, out = check(tmp_path, capsys, _hma_graph(image, *extra), extra=("--vllm-version", vllm))
    assert (HMA_RULE in rules(out, "error")) is refused, out
    assert not any(HMA_RULE in n["reason"] for n in out["notChecked"]), out
