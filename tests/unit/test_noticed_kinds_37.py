"""What the helper who built set 37 noticed, fixed as kinds, with negative controls.

1. The vLLM release in custom image tags (``.../dsv3-uccl-nixl:vllm-0.21.0``, ``.../engine-vllm:v0.11.2-ray2.53.0``)
   was read as unknown (:func:`pdd_operator.vllm.versions.custom_tag_version`); numbers that are not vLLM's stay so.
2. NixlConnector under an explicit ``--no-disable-hybrid-kv-cache-manager`` on 0.13-0.17: the connector factory
   refuses it (not ``SupportsHMA`` before 0.18.0), judged where the release is known, never where it is unknown.
3. Dynamo's worker of 0.9.x-1.0.x sets ``kv_events_config`` itself on a non-decode worker with prefix caching
   (and a block size of 16): vLLM 0.13-0.19 must then turn HMA off (:mod:`pdd_operator.compat.dynamo_engine_defaults`).
4. ``pdd rules`` lists ``hma-explicit-forced-off`` as ``>= 0.13.0``, and a pair of unknown release with no trigger
   is not made "not checked" by it.
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.dynamo_engine_defaults import added_block_size, added_kv_events, dynamo_release
from pdd_operator.compat.rules import RULES_BY_ID
from pdd_operator.vllm.versions import custom_tag_version, image_version_text, resolve_version
from tests.unit.test_turn2_variants import check, pd, rules

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
HMA = "--no-disable-hybrid-kv-cache-manager"
EVENTS = '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557"}'
FORCED = "hma-explicit-forced-off"
MODEL = "openai/gpt-oss-20b"

# --- 1. custom image tags -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("image", "version"), [
    # a vllm token right before the release, any repository (shapes from public manifests and scripts)
    ("ghcr.io/acme/dsv3-uccl-nixl:vllm-0.21.0", (0, 21, 0)),
    ("registry.example.com/team/serving:vllm0.20.1", (0, 20, 1)),
    ("123456789012.dkr.ecr.us-west-2.amazonaws.com/x-platform-model-workers:vllm-v0.19.0-20260411", (0, 19, 0)),
    ("quay.io/someone/vllm:vllm-v0.18.0-tt-v1.2.5", (0, 18, 0)),
    ("harbor.local/infer/sandbox-runtime:vllm-v0.22.1-hijack-v5", (0, 22, 1)),
    ("example.io/pd/base:cu128-vllm-v0.11.0", (0, 11, 0)),
    ("example.io/pd/base:vllm_0.16.0_py312", (0, 16, 0)),
    # a repository that says vllm, with a tag that starts with a listed release
    ("docker.io/neutree/engine-vllm:v0.11.2-ray2.53.0", (0, 11, 2)),
    ("dualspark-vllm:v0.25.1-nccl-2.30.4", (0, 25, 1)),
    ("localhost:5000/my-vllm-image:v0.20.2-cu129", (0, 20, 2)),
    ("myregistry.azurecr.io/llm/vllm-custom:0.19.1", (0, 19, 1)),
    ("someone/vllm-openai-custom:v0.10.2", (0, 10, 2)),
    # vLLM's own names, read as before
    ("repo/vllm:v0.11.0-cu128", (0, 11, 0)),
    ("myreg.io/team/vllm-nixl:0.18.0-ubuntu22.04", (0, 18, 0)),
])
def test_custom_tags_that_name_the_vllm_release_are_read(image, version):
    assert resolve_version(None, image) == (version, "image tag")


def test_the_source_of_a_custom_tag_version_says_where_it_came_from():
    assert custom_tag_version("ghcr.io/acme/dsv3-uccl-nixl:vllm-0.21.0") == (
        "0.21.0", "0.21.0 (from the image tag vllm-0.21.0)")
    # a candidate is read as a candidate (judged with the rules of the release before it, warned)
    assert image_version_text("ghcr.io/acme/pd:vllm-0.21.0rc1") == "0.21.0rc1"
    assert resolve_version(None, "ghcr.io/acme/pd:vllm-0.21.0rc1")[0] == (0, 20, 2)


@pytest.mark.parametrize("image", [
    "repo/vllm:nightly-3f2a9c1b",                    # a nightly of a commit
    "ghcr.io/acme/pd:vllm-0.20.2.dev3",              # a development build
    "rocm/atom-dev:vllm-v0.22.0-nightly_20260712",   # a nightly on top of a release
    "oscar-vllm:v0.25.0-dev",                        # a dev build on top of a release
    "rocm/pytorch-private:vllm-v0.14.0_amd_dev_aiter_nixl",  # AMD's dev build
    "example.io/app:cuda12.8",                       # a CUDA version
    "example.io/my-vllm:12.8.1-cudnn",               # a CUDA version in a vllm-named repository
    "example.io/app:2025.01.01",                     # a date
    "example.io/vllm-pd:20250101",                   # a date in a vllm-named repository
    "example.io/my-vllm:0.3.2",                      # a team's own version, no vLLM release
    "reg/tt-vllm:v0.77.0-rc1-prstack-plugin",        # another project's version
    "ghcr.io/inferops/nano-vllm:v0.1.0",             # another engine
    "kubeagi/arcadia-fastchat-worker:vllm-v0.1.0",   # before any release these rules know
    "example.io/pd:vllm-0.9.0.1",                    # a four-part build number
    "example.io/pd:build-0.21.0",                    # a number with no vllm token, in a repository not named vllm
    "vllm/vllm-router:v0.1.9",                       # vLLM's router versions itself
    "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.7",   # Dynamo's release, not vLLM's (unlisted; 1.4.0 is listed: vLLM 0.26.0)
    "quay.io/ascend/vllm-ascend:v0.11.0rc0",         # a platform plugin's release
    "lmcache/vllm-openai:v0.3.3",                    # LMCache's release
    "nielsrolf/ow-vllm:v0.11",                       # two parts only
])
def test_numbers_that_are_not_the_vllm_release_stay_unknown(image):
    assert resolve_version(None, image)[0] is None, image


def _pair(image, extra, p_extra=None):
    return pd("m", ["--kv-transfer-config", KV, *(extra if p_extra is None else p_extra)],
              ["--kv-transfer-config", KV, *extra], model=MODEL, image=image)


@pytest.mark.parametrize("image", ["ghcr.io/acme/dsv3-uccl-nixl:vllm-0.18.0", "acme/engine-vllm:v0.19.1-efa"])
def test_a_pair_on_a_custom_tag_is_judged_for_its_release(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_pair(image, [HMA, "--kv-events-config", EVENTS]))
    assert code == 1 and FORCED in rules(out, "error"), out
    assert out["results"][0]["vllmVersion"] in ("0.18.0", "0.19.1")
    assert "(from the image tag " in out["results"][0]["pairedBy"]


def test_a_pair_on_a_custom_tag_of_a_release_that_keeps_hma_passes(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("ghcr.io/acme/dsv3-uccl-nixl:vllm-0.20.0",
                                               [HMA, "--kv-events-config", EVENTS]))
    assert FORCED not in rules(out) and "vllm-version-unknown" not in rules(out), out
    assert out["results"][0]["vllmVersion"] == "0.20.0"


# --- 2. NixlConnector is not SupportsHMA before 0.18.0 ---------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.13.0", "0.14.1", "0.16.0", "0.17.1"])
def test_explicit_hma_with_nixl_before_018_is_refused(tmp_path, capsys, version):
    code, out = check(tmp_path, capsys, *_pair(f"vllm/vllm-openai:v{version}", [HMA]))
    assert code == 1 and FORCED in rules(out, "error"), out
    message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == FORCED)
    assert "does not support HMA" in message


def test_explicit_hma_on_prefill_only_names_prefill(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.16.0", [], p_extra=[HMA]))
    found = [f for r in out["results"] for f in r["findings"] if f["rule"] == FORCED]
    assert code == 1 and len(found) == 1 and found[0]["message"].startswith("prefill:"), out


@pytest.mark.parametrize(("image", "extra"), [
    ("vllm/vllm-openai:v0.18.0", [HMA]),                            # SupportsHMA from 0.18.0
    ("vllm/vllm-openai:v0.21.0", [HMA]),
    ("vllm/vllm-openai:v0.12.0", [HMA]),                            # 0.12 overrides the flag silently
    ("vllm/vllm-openai:v0.16.0", ["--disable-hybrid-kv-cache-manager"]),  # HMA off, as the factory asks
    ("vllm/vllm-openai:v0.16.0", []),                               # the connector turns HMA off by default
])
def test_nixl_where_the_factory_accepts_is_no_finding(tmp_path, capsys, image, extra):
    _, out = check(tmp_path, capsys, *_pair(image, extra))
    assert FORCED not in rules(out), out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:latest", "repo/vllm:nightly-3f2a9c1b",
                                   "vllm/vllm-openai@sha256:" + "a" * 64])
def test_explicit_hma_with_nixl_of_unknown_release_is_not_refused_nor_unchecked(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_pair(image, [HMA]))
    assert code == 0 and FORCED not in rules(out) and not out["notChecked"], out
    assert "vllm-version-unknown" in rules(out, "warning")


def test_the_version_given_to_pdd_check_is_judged(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:latest", [HMA]), extra=["--vllm-version", "0.17.0"])
    assert code == 1 and FORCED in rules(out, "error"), out


# --- 3. what dynamo.vllm adds to the engine args -----------------------------------------------------------------


def _dgd(tag, prefill_extra=(), decode_extra=(), decode_flag=("--disaggregation-mode", "decode"),
         prefill_flag=("--disaggregation-mode", "prefill")):
    def component(name, flag, extra):
        args = ["-m", "dynamo.vllm", "--model", MODEL, *flag, "--kv-transfer-config", KV, *extra]
        return {"name": name, "type": name, "podTemplate": {"spec": {"containers": [
            {"name": "main", "image": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{tag}", "command": ["python3"],
             "args": args}]}}}
    return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"components": [component("prefill", prefill_flag, prefill_extra),
                                    component("decode", decode_flag, decode_extra)]}}


@pytest.mark.parametrize("tag", ["0.9.1", "1.0.1"])
def test_dynamo_prefill_with_explicit_hma_is_refused_for_the_kv_events_dynamo_adds(tmp_path, capsys, tag):
    code, out = check(tmp_path, capsys, _dgd(tag, prefill_extra=[HMA]))
    found = [f for r in out["results"] for f in r["findings"] if f["rule"] == FORCED]
    assert code == 1 and found and "sets kv_events_config itself" in found[0]["message"], out
    assert found[0]["message"].startswith("prefill:")


def test_dynamo_11_adds_no_kv_events_and_its_vllm_019_nixl_keeps_hma(tmp_path, capsys):
    _, out = check(tmp_path, capsys, _dgd("1.1.1", prefill_extra=[HMA]))
    assert FORCED not in rules(out), out


def test_dynamo_decode_with_explicit_hma_gets_no_kv_events(tmp_path, capsys):
    _, out = check(tmp_path, capsys, _dgd("1.0.1", decode_extra=[HMA]))
    found = [f for r in out["results"] for f in r["findings"] if f["rule"] == FORCED]
    # the factory still refuses NixlConnector on vLLM 0.16.0, but not for KV events
    assert found and all("kv_events_config" not in f["message"] for f in found), out


ARGV = ["dynamo.vllm", "--model", MODEL]
RUNTIME = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:"


@pytest.mark.parametrize(("argv", "flags", "tag", "prefix", "given", "adds"), [
    (ARGV + ["--is-prefill-worker"], {}, "0.9.0", None, False, True),
    (ARGV + ["--disaggregation-mode", "prefill"], {"--disaggregation-mode": "prefill"}, "1.0.2", None, False, True),
    (ARGV, {}, "1.0.0", True, False, True),                                   # an aggregated worker publishes too
    (ARGV + ["--is-decode-worker"], {}, "0.9.1", None, False, False),         # decode workers publish nothing
    (ARGV + ["--disaggregation-mode", "decode"], {"--disaggregation-mode": "decode"}, "1.0.1", None, False, False),
    (ARGV, {}, "1.0.1", False, False, False),                                 # --no-enable-prefix-caching
    (ARGV, {}, "1.0.1", None, True, False),                                   # the user's own --kv-events-config
    (ARGV, {}, "1.1.0", None, False, False),                                  # opt-in from 1.1.0
    (ARGV, {}, "1.3.1", None, False, False),
    (ARGV, {}, "1.1.0-dev.1", None, False, False),                            # a preview names no release
    (ARGV, {}, "0.8.1", None, False, True),                                   # read since (0.4.0-1.0.2)
    (["vllm", "serve", MODEL], {}, "1.0.1", None, False, False),              # not Dynamo's worker
])
def test_which_dynamo_workers_get_kv_events(argv, flags, tag, prefix, given, adds):
    assert bool(added_kv_events(argv, flags, RUNTIME + tag, prefix, given)) is adds


def test_dynamo_block_size_default_per_release():
    assert added_block_size(ARGV, RUNTIME + "1.0.1", None) == 16
    assert added_block_size(ARGV, RUNTIME + "1.0.1", 64) is None
    assert added_block_size(ARGV, RUNTIME + "1.1.0", None) is None
    assert dynamo_release(RUNTIME + "0.9.1-cuda13") == (0, 9, 1)
    assert dynamo_release("vllm/vllm-openai:v0.16.0") is None


# --- 4. the listed scope -------------------------------------------------------------------------------------------


def test_hma_explicit_forced_off_lists_the_releases_its_triggers_hold_for():
    assert RULES_BY_ID[FORCED].versions == ">= 0.13.0"


@pytest.mark.parametrize("extra", [[], ["--kv-events-config", EVENTS], ["--disable-hybrid-kv-cache-manager"]])
def test_unknown_release_without_a_trigger_is_not_unchecked_by_the_rule(tmp_path, capsys, extra):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:latest", extra))
    assert code == 0 and not out["notChecked"] and FORCED not in rules(out), out
