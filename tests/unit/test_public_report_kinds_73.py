"""Variants of what the seventy-third public-report set (tests/unit/data/public_reports_73) taught, with negative
controls.

1. A KServe ``LLMInferenceService`` whose ``main`` containers have no command runs KServe's template line
   (``vllm serve /mnt/models --served-model-name ... <template flags> ${VLLM_ADDITIONAL_ARGS} $@``), which is not in
   the user's files, so its engines stay "not checked". A fault between the two roles that lies wholly in what the
   user writes (the side-channel host env, ``--kv-cache-dtype`` and ``--block-size`` in ``VLLM_ADDITIONAL_ARGS``,
   none of which a template sets) is judged all the same, by the rule that judges it anywhere
   (:data:`pdd_operator.compat.templated.TEMPLATE_FREE_RULES`): an error where every release fails, a warning where
   only some do.
2. NVIDIA's NGC vLLM container (``nvcr.io/nvidia/vllm:25.11-py3``) is tagged with the NGC container release
   (year.month), not a vLLM release: it must not be read as vLLM 25.11.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.versions import version_from_image
from tests.unit.test_turn2_variants import KV, POD_IP, check, container, rules, workload

NIXL = "--kv_transfer_config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"


def _main(extra: str = "", host: bool = True, image: str | None = None, env=()) -> dict:
    env_list = [*([POD_IP] if host else []), {"name": "VLLM_ADDITIONAL_ARGS", "value": f"{NIXL} {extra}".strip()},
                *env]
    c = {"name": "main", "env": env_list, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {**c, "image": image} if image else c


def _llmisvc(prefill: dict, decode: dict, model: str = "Qwen/Qwen3-8B", api: str = "v1alpha1") -> dict:
    return {"apiVersion": f"serving.kserve.io/{api}", "kind": "LLMInferenceService", "metadata": {"name": "svc"},
            "spec": {"model": {"uri": f"hf://{model}", "name": model}, "replicas": 1,
                     "router": {"scheduler": {}, "route": {}, "gateway": {}},
                     "template": {"containers": [decode]},
                     "prefill": {"replicas": 1, "template": {"containers": [prefill]}}}}


def _errors(out: dict) -> set[str]:
    return rules(out, "error")


# --- 1. KServe-templated P/D: the user's part judged between the roles ----------------------------------------------


@pytest.mark.parametrize("model", ["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-0.6B"])
@pytest.mark.parametrize("api", ["v1alpha1", "v1alpha2"])
@pytest.mark.parametrize("image", [None, "registry.redhat.io/rhaiis/vllm-cuda-rhel9:3.4.0", "vllm/vllm-openai:v0.18.0"])
def test_templated_prefill_without_side_channel_host_is_refused(tmp_path, capsys, model, api, image):
    code, out = check(tmp_path, capsys, _llmisvc(_main(host=False, image=image), _main(image=image), model, api))
    assert code == 1 and "side-channel-host-not-routable" in _errors(out)
    assert out["notChecked"]  # the rest of the engine lines stays unread


@pytest.mark.parametrize("image", [None, "vllm/vllm-openai:v0.18.0"])
def test_templated_pair_with_hosts_on_both_or_only_the_prefill_stays_not_checked(tmp_path, capsys, image):
    for decode_host in (True, False):  # the pulling decode is never dialed: its own host is not needed
        code, out = check(tmp_path, capsys, _llmisvc(_main(image=image), _main(host=decode_host, image=image)))
        assert code == 3 and not _errors(out) and out["notChecked"]


@pytest.mark.parametrize(("p_dtype", "d_dtype"), [("", "--kv-cache-dtype fp8"), ("--kv-cache-dtype fp8", ""),
                                                  ("--kv-cache-dtype fp8_e5m2", "--kv-cache-dtype fp8_e4m3")])
@pytest.mark.parametrize("image", [None, "vllm/vllm-openai:v0.20.0", "registry.redhat.io/rhaiis/vllm-cuda-rhel9:3.2.5"])
def test_templated_kv_cache_dtype_differing_between_the_roles_is_refused(tmp_path, capsys, p_dtype, d_dtype, image):
    code, out = check(tmp_path, capsys, _llmisvc(_main(p_dtype, image=image), _main(d_dtype, image=image)))
    assert code == 1 and "kv-cache-dtype-mismatch" in _errors(out)


def test_templated_kv_cache_dtype_equal_on_both_roles_is_not_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _llmisvc(_main("--kv-cache-dtype fp8"), _main("--kv-cache-dtype fp8")))
    assert code == 3 and not _errors(out)


@pytest.mark.parametrize(("image", "expected"), [
    ("vllm/vllm-openai:v0.20.0", "error"),    # the decode's default is 16 up to 0.33.0: 16 % 32 != 0
    ("vllm/vllm-openai:v0.34.0", None),       # 0.34.0's DEFAULT_BLOCK_SIZE is 64, a multiple of 32
    (None, "warning"),                        # unknown release: some refuse the pair
])
def test_templated_prefill_block_size_against_the_decode_default_is_judged_per_release(tmp_path, capsys, image,
                                                                                       expected):
    code, out = check(tmp_path, capsys, _llmisvc(_main("--block-size 32", image=image), _main(image=image)))
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "block-size-direction"}
    assert found == ({expected} if expected else set())
    assert code == (1 if expected == "error" else 3)


def test_templated_additional_args_from_a_secret_prove_nothing(tmp_path, capsys):
    secret = {"name": "VLLM_ADDITIONAL_ARGS", "valueFrom": {"secretKeyRef": {"name": "args", "key": "decode"}}}
    decode = {"name": "main", "env": [POD_IP, secret]}
    code, out = check(tmp_path, capsys, _llmisvc(_main("--block-size 32", host=False), decode))
    assert code == 3 and not _errors(out)


def test_templated_pair_without_a_user_connector_proves_nothing(tmp_path, capsys):
    # No --kv-transfer-config in the user part: only the template (KV_TRANSFER_ARGS) could add one.
    prefill = {"name": "main", "env": [{"name": "VLLM_ADDITIONAL_ARGS", "value": "--kv-cache-dtype fp8"}]}
    decode = {"name": "main", "env": [POD_IP]}
    code, out = check(tmp_path, capsys, _llmisvc(prefill, decode))
    assert code == 3 and not _errors(out)


# --- 2. NGC vLLM containers: the tag is NVIDIA's container release --------------------------------------------------


@pytest.mark.parametrize("image", ["nvcr.io/nvidia/vllm:25.11-py3", "nvcr.io/nvidia/vllm:26.03.post1-py3",
                                   "nvcr.io/nvidia/vllm:26.07-py3", "nvcr.io/nvidia/vllm:25.09-py3"])
def test_ngc_vllm_tags_name_no_vllm_release(image):
    assert version_from_image(image) is None


@pytest.mark.parametrize(("image", "version"), [("vllm/vllm-openai:v0.11.0", (0, 11, 0)),
                                                ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0-efa", (0, 23, 0)),
                                                ("docker.io/vllm/vllm-openai:v0.25.1", (0, 25, 1))])
def test_other_images_keep_their_reading(image, version):
    assert version_from_image(image) == version


@pytest.mark.parametrize("tag", ["25.11-py3", "26.02-py3", "25.12.post1-py3"])
def test_ngc_pair_with_a_flag_later_releases_removed_is_not_refused(tmp_path, capsys, tag):
    # NGC 25.x containers carry vLLM 0.10/0.11-era releases, which still have --disable-log-requests; read as "vLLM
    # 25.11" the tag made it a removed flag and refused the pair.
    docs = [workload(f"m-{r}", r, container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV, "--disable-log-requests"],
                                            image=f"nvcr.io/nvidia/vllm:{tag}")) for r in ("prefill", "decode")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and "cli-flag-removed" in rules(out, "warning") and not _errors(out)
    assert {r["vllmVersion"] for r in out["results"]} == {"unknown"}


def test_ngc_release_whose_notes_name_the_vllm_is_judged_on_that_release(tmp_path, capsys):
    # history (fixL): 26.01-py3 was unknown here until the NGC rows of wrapped_vllm_versions.json; NVIDIA's rel-26-01
    # notes name vLLM 0.11.1, whose parser still adds --disable-log-requests (deprecated=True, a BooleanOptionalAction:
    # AsyncEngineArgs.add_cli_args, vllm/engine/arg_utils.py 0.11.1 l.2085-2091), so the pair is judged on 0.11.1 and
    # passes.
    docs = [workload(f"m-{r}", r, container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV, "--disable-log-requests"],
                                            image="nvcr.io/nvidia/vllm:26.01-py3")) for r in ("prefill", "decode")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and not _errors(out) and "cli-flag-removed" not in rules(out, "warning")
    assert {r["vllmVersion"] for r in out["results"]} == {"0.11.1"}


def test_vllm_image_of_a_release_without_the_flag_is_still_refused(tmp_path, capsys):
    docs = [workload(f"m-{r}", r, container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV, "--disable-log-requests"],
                                            image="vllm/vllm-openai:v0.17.0")) for r in ("prefill", "decode")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "cli-flag-removed" in _errors(out)


def test_json_roundtrip_of_the_template_line_keeps_quoted_config():
    # VLLM_ADDITIONAL_ARGS is split as bash splits it inside eval: the single-quoted JSON stays one argument.
    from pdd_operator.compat.templated import template_engine
    run = template_engine(_main("--block-size 32"), "Qwen/Qwen3-8B")
    assert run is not None and run["command"][:5] == ["vllm", "serve", "/mnt/models", "--served-model-name",
                                                      "Qwen/Qwen3-8B"]
    config = run["command"][run["command"].index("--kv_transfer_config") + 1]
    assert json.loads(config)["kv_connector"] == "NixlConnector" and run["command"][-2:] == ["--block-size", "32"]
