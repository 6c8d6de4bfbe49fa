"""Variants of what the thirty-ninth public-report set (tests/unit/data/public_reports_39) taught, with negative
controls.

- vLLM 0.10.0-0.10.2's pull-mode NixlConnector kills the prefill engine with a KeyError under load: 0.10.0 deletes
  ``_reqs_to_send`` entries of requests already expired past VLLM_NIXL_ABORT_REQUEST_TIMEOUT when a decode reads them,
  0.10.1-0.10.2 frees an aborted, already freed request in the scheduler (llm-d/llm-d#187, vllm#21753, vllm#25067,
  vllm#25562). It needs requests to wait past the timeout, so it is a warning; 0.11.0 guards both. Such pairs passed
  silently (a ``vllm-version-known-bad`` row in :mod:`pdd_operator.vllm.known_bad`).
- A privileged container on the host network sees every RDMA device of the node without an RDMA resource, so an
  unset UCX_NET_DEVICES lets UCX open the mlx5 devices behind VM networking (smg-project/smg#2520); only an RDMA
  resource or DRA claim counted before (``ucx-net-devices-unscoped`` in :mod:`pdd_operator.compat.rules.network`).
- llm-d's ``ghcr.io/llm-d/llm-d-cuda:v0.3.0`` carries vLLM 0.11.0 (its release notes: vllm-project/vllm v0.10.0 ->
  v0.11.0), so its P/D pairs are judged at 0.11.0, where prefill TP above decode TP fails the handshake (llm-d#394);
  the tag was unknown before (``wrapped_vllm_versions.json``).
"""

from __future__ import annotations

import pytest

from pdd_operator.vllm.versions import version_from_image
from tests.unit.test_turn2_variants import check, container, pd, rules, workload

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
KNOWN_BAD = "vllm-version-known-bad"
UCX = "ucx-net-devices-unscoped"


def _pair(image, kv=KV, model="Qwen/Qwen3-8B", kind="Deployment", **kw):
    args = ["--kv-transfer-config", kv]
    docs = pd("kb", args, args, model=model, image=image, **kw)
    for doc in docs:
        doc["kind"] = kind
    return docs


# --- vLLM 0.10.x NIXL prefill KeyError under load ----------------------------------------------------------------


@pytest.mark.parametrize(("image", "model", "kind"), [
    ("vllm/vllm-openai:v0.10.0", "Qwen/Qwen3-8B", "Deployment"),
    ("vllm/vllm-openai:v0.10.1.1", "meta-llama/Llama-3.1-8B-Instruct", "StatefulSet"),
    ("vllm/vllm-openai:v0.10.2", "Qwen/Qwen3-8B", "Deployment"),
])
def test_a_nixl_pair_on_vllm_010_is_a_known_bad_warning(tmp_path, capsys, image, model, kind):
    code, out = check(tmp_path, capsys, *_pair(image, model=model, kind=kind))
    assert code == 0 and KNOWN_BAD in rules(out, "warning") and KNOWN_BAD not in rules(out, "error"), out


def test_the_row_holds_for_nixl_inside_a_multiconnector(tmp_path, capsys):
    multi = ('{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":['
             '{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"LMCacheConnectorV1",'
             '"kv_role":"kv_both"}]}}')
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.10.1.1", kv=multi))
    assert KNOWN_BAD in rules(out, "warning"), out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.9.2", "vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.11.1"])
def test_releases_without_the_expiry_or_with_both_fixes_are_not_flagged(tmp_path, capsys, image):
    """0.9.2 has no request expiry (no ``_reqs_to_send``); 0.11.0 guards both paths."""
    code, out = check(tmp_path, capsys, *_pair(image))
    assert KNOWN_BAD not in rules(out), out


def test_another_connector_on_vllm_010_is_not_flagged(tmp_path, capsys):
    """The fault is in NixlConnector's expiry; a P2pNcclConnector pair on 0.10.0 does not have it."""
    p2p = ('{"kv_connector":"P2pNcclConnector","kv_role":"kv_both","kv_port":"21001",'
           '"kv_connector_extra_config":{"proxy_ip":"proxy","proxy_port":"30001","http_port":"8000"}}')
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.10.0", kv=p2p))
    assert KNOWN_BAD not in rules(out), out


# --- a privileged hostNetwork engine sees every RDMA device -------------------------------------------------------


def _hostnet(privileged=True, ucx=None, model="Qwen/Qwen3-8B", image="vllm/vllm-openai:v0.20.2", kind="Deployment"):
    docs = _pair(image, model=model, kind=kind)
    for i, doc in enumerate(docs):
        spec = doc["spec"]["template"]["spec"] if "template" in doc.get("spec", {}) else doc["spec"]
        spec["hostNetwork"] = True
        c = spec["containers"][0]
        c["resources"]["limits"].pop("rdma/ib")  # no RDMA resource: only privileged mode shows the devices
        c["securityContext"] = {"privileged": True} if privileged else {}
        env = c["env"] = [e for e in c["env"] if e["name"] != "UCX_NET_DEVICES"]
        env.append({"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(5600 + 10 * i)})
        if ucx:
            env.append({"name": "UCX_NET_DEVICES", "value": ucx})
    return docs


@pytest.mark.parametrize(("model", "image", "kind", "ucx"), [
    ("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.20.2", "Deployment", None),
    ("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.14.0", "StatefulSet", "all"),
])
def test_a_privileged_hostnetwork_engine_without_a_device_list_is_warned(tmp_path, capsys, model, image, kind, ucx):
    code, out = check(tmp_path, capsys, *_hostnet(model=model, image=image, kind=kind, ucx=ucx))
    assert UCX in rules(out, "warning"), out


@pytest.mark.parametrize(("privileged", "ucx"), [(True, "mlx5_0:1,mlx5_1:1"), (False, None)])
def test_a_device_list_or_no_device_access_is_not_warned(tmp_path, capsys, privileged, ucx):
    """Pinned devices are what the fix asks for; an unprivileged hostNetwork pod without an RDMA resource opens no
    RDMA device (UCX uses TCP there, which ``rdma-missing`` describes)."""
    code, out = check(tmp_path, capsys, *_hostnet(privileged=privileged, ucx=ucx))
    assert UCX not in rules(out), out


# --- llm-d's v0.3.0 image carries vLLM 0.11.0 -----------------------------------------------------------------------


def test_llm_d_cuda_030_is_vllm_0110_and_an_unlisted_tag_stays_unknown():
    assert version_from_image("ghcr.io/llm-d/llm-d-cuda:v0.3.0") == (0, 11, 0)
    assert version_from_image("ghcr.io/llm-d/llm-d-cuda:v0.3.1") is None


def _rendered(image, p_tp, d_tp, model="RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", kind="Deployment"):
    def one(role, tp):
        args = [model, "--tensor-parallel-size", str(tp), "--block-size", "128", "--kv-transfer-config", KV]
        return workload(f"ms-pd-{role}", role, container(args, image=image, gpus=tp), kind=kind)
    return [one("prefill", p_tp), one("decode", d_tp)]


@pytest.mark.parametrize(("model", "kind"), [("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "Deployment"),
                                             ("Qwen/Qwen3-32B", "StatefulSet")])
def test_prefill_tp_above_decode_tp_on_the_llm_d_030_image_is_an_error(tmp_path, capsys, model, kind):
    code, out = check(tmp_path, capsys, *_rendered("ghcr.io/llm-d/llm-d-cuda:v0.3.0", 4, 1, model=model, kind=kind))
    assert code == 1 and "hetero-tp-p-gt-d-unsupported" in rules(out, "error"), out


def test_the_guide_direction_on_the_llm_d_030_image_is_not_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_rendered("ghcr.io/llm-d/llm-d-cuda:v0.3.0", 1, 4))
    assert code == 0 and "hetero-tp-p-gt-d-unsupported" not in rules(out), out
