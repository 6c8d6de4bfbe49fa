"""Variants of what the thirty-third public-report set (tests/unit/data/public_reports_33) taught, with negative
controls.

- Decode context parallelism on a NixlConnector engine (vllm#50611): from 0.29.0 ``VllmConfig.__post_init__``
  asserts, when ``kv_transfer_config.has_connector("NixlConnector")``, DCP 1 or DCP equal to the NIXL transfer
  parallel size (TP; from 0.30.0 max(TP, PCP)) and an MLA model (vllm/config/vllm.py, 0.29.0-0.34.0 sdists). A decode
  at TP 4 with DCP 2, or DCP on a GQA model, passed as compatible
  (:mod:`pdd_operator.compat.rules.decode_context`). Found while writing these: 0.29.0 alone also asserts prefill
  context parallelism 1 for NixlConnector (``nixl-pcp-refused``).
- Mamba cache mode ``align`` on a hybrid SSM decode (vllm#43508): in 0.18.0-0.22.x the v1 scheduler's block-aligned
  split asserts no external tokens ("External KV connector is not verified yet"), so a decode pulling KV over NIXL
  dies on its first request; ``align`` is written, or picked with prefix caching for models without Mamba prefix
  caching support (Gated DeltaNet). Nemotron-3-Ultra was not even known as a NemotronH hybrid: the name patterns now
  take Nemotron 3 / 3.5 Nano, Super and Ultra (:mod:`pdd_operator.compat.rules.mamba_align`,
  :mod:`pdd_operator.vllm.architectures`).
- P2pNcclConnector without ``http_port`` in ``kv_connector_extra_config`` (vllm#24720, vllm#26628): 0.9.2-0.11.0 read
  the key unconditionally (KeyError), 0.11.1-0.23.x when the engine registers with a proxy (ValueError); the engine
  does not start. Such a pair was "not checked" (its KV path is not NIXL); an engine-alone rule now says the error,
  and the KV path stays "not checked" (:mod:`pdd_operator.compat.rules.p2p_nccl`).
"""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import check, pd, rules

KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
MLA = "deepseek-ai/DeepSeek-V2-Lite-Chat"


def _pddeployment(spec: dict) -> dict:
    return {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "p"}, "spec": spec}


def _dcp_pair(d_tp, d_dcp, model=MLA, image="vllm/vllm-openai:v0.31.0", kv_d=KV_D, kind="Deployment", p_extra=()):
    docs = pd("dcp", ["--tensor-parallel-size", "2", "--kv-transfer-config", KV_P, *p_extra],
              ["--tensor-parallel-size", str(d_tp), "--decode-context-parallel-size", str(d_dcp),
               "--kv-transfer-config", kv_d], model=model, image=image, gpus=max(2, d_tp))
    for doc in docs:
        doc["kind"] = kind
    return docs


# --- decode context parallelism on a NixlConnector engine -----------------------------------------------------


@pytest.mark.parametrize(("image", "tp", "dcp"), [("vllm/vllm-openai:v0.31.0", 8, 4), ("vllm/vllm-openai:v0.29.0", 4, 2),
                                                   ("vllm/vllm-openai:v0.33.0", 2, 4)])
def test_a_partial_dcp_group_on_a_nixl_decode_is_an_error(tmp_path, capsys, image, tp, dcp):
    code, out = check(tmp_path, capsys, *_dcp_pair(tp, dcp, image=image, kind="StatefulSet"))
    assert code == 1 and "nixl-dcp-partial" in rules(out, "error"), out


def test_a_partial_dcp_group_on_a_pddeployment_decode_is_an_error(tmp_path, capsys):
    spec = {"model": {"name": "deepseek-ai/DeepSeek-V3"}, "engine": {"image": "vllm/vllm-openai:v0.32.0"},
            "prefill": {"replicas": 1, "tensorParallelSize": 8},
            "decode": {"replicas": 1, "tensorParallelSize": 8, "extraArgs": ["--decode-context-parallel-size", "2"]}}
    code, out = check(tmp_path, capsys, _pddeployment(spec))
    assert code == 1 and "nixl-dcp-partial" in rules(out, "error"), out


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B", "openai/gpt-oss-20b"])
def test_dcp_with_a_non_mla_model_on_a_nixl_decode_is_an_error(tmp_path, capsys, model):
    code, out = check(tmp_path, capsys, *_dcp_pair(2, 2, model=model, image="vllm/vllm-openai:v0.30.0"))
    assert code == 1 and "nixl-dcp-non-mla" in rules(out, "error"), out


def test_dcp_inside_a_multiconnector_is_still_nixl(tmp_path, capsys):
    multi = ('{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"connectors":['
             '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"},{"kv_connector":"OffloadingConnector",'
             '"kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":1073741824}}]}}')
    code, out = check(tmp_path, capsys, *_dcp_pair(4, 2, kv_d=multi, image="vllm/vllm-openai:v0.31.0"))
    assert "nixl-dcp-partial" in rules(out, "error"), out


def test_dcp_with_an_unknown_architecture_is_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_dcp_pair(2, 2, model="/models/house-model", image="vllm/vllm-openai:v0.31.0"))
    assert "nixl-dcp-non-mla" in rules(out, "warning") and "nixl-dcp-non-mla" not in rules(out, "error"), out


@pytest.mark.parametrize(("model", "tp", "dcp", "image"), [
    (MLA, 2, 2, "vllm/vllm-openai:v0.31.0"),               # the PR's shape: DCP = TP on an MLA model
    ("deepseek-ai/DeepSeek-R1", 8, 8, "vllm/vllm-openai:v0.33.0"),
    (MLA, 4, 1, "vllm/vllm-openai:v0.31.0"),               # DCP 1: replicated
    (MLA, 4, 2, "vllm/vllm-openai:v0.28.0"),               # before the assertion: not claimed
    ("Qwen/Qwen3-8B", 2, 2, "vllm/vllm-openai:v0.28.0"),
])
def test_full_dcp_groups_mla_models_and_older_releases_pass(tmp_path, capsys, model, tp, dcp, image):
    code, out = check(tmp_path, capsys, *_dcp_pair(tp, dcp, model=model, image=image))
    assert not {"nixl-dcp-partial", "nixl-dcp-non-mla"} & rules(out), out


def test_pcp_counts_in_the_transfer_size_from_030_only(tmp_path, capsys):
    # vllm 0.30.0 config/vllm.py: transfer size max(tp, pcp); a TP 1 PCP 2 DCP 2 prefill producer is accepted there.
    docs = pd("dcp", ["--tensor-parallel-size", "1", "--prefill-context-parallel-size", "2",
                      "--decode-context-parallel-size", "2", "--kv-transfer-config", KV_P],
              ["--tensor-parallel-size", "2", "--kv-transfer-config", KV_D], model=MLA,
              image="vllm/vllm-openai:v0.31.0", gpus=2)
    code, out = check(tmp_path, capsys, *docs)
    assert "nixl-dcp-partial" not in rules(out), out


def test_the_push_connector_is_not_named_nixlconnector(tmp_path, capsys):
    # has_connector("NixlConnector") compares the name: NixlPushConnector has its own rule (push-dcp-unsupported).
    push_p = '{"kv_connector":"NixlPushConnector","kv_role":"kv_producer"}'
    push_d = '{"kv_connector":"NixlPushConnector","kv_role":"kv_consumer"}'
    docs = pd("dcp", ["--tensor-parallel-size", "2", "--kv-transfer-config", push_p],
              ["--tensor-parallel-size", "4", "--decode-context-parallel-size", "2", "--kv-transfer-config", push_d],
              model=MLA, image="vllm/vllm-openai:v0.31.0", gpus=4)
    code, out = check(tmp_path, capsys, *docs)
    assert "nixl-dcp-partial" not in rules(out) and "push-dcp-unsupported" in rules(out, "error"), out



@pytest.mark.parametrize(("image", "kind", "refused"), [("vllm/vllm-openai:v0.29.0", "Deployment", True),
                                                         ("vllm/vllm-openai:v0.29.0", "StatefulSet", True),
                                                         ("vllm/vllm-openai:v0.30.0", "Deployment", False),
                                                         ("vllm/vllm-openai:v0.28.0", "Deployment", False)])
def test_pcp_on_a_nixl_producer_is_refused_by_029_only(tmp_path, capsys, image, kind, refused):
    # Found while writing the DCP variants: 0.29.0's VllmConfig asserts PCP 1 for NixlConnector; 0.30.0 does not.
    docs = pd("pcp", ["-pcp", "2", "--kv-transfer-config", KV_P], ["--kv-transfer-config", KV_D], model=MLA,
              image=image, gpus=2)
    for doc in docs:
        doc["kind"] = kind
    code, out = check(tmp_path, capsys, *docs)
    assert ("nixl-pcp-refused" in rules(out, "error")) is refused, out

# --- mamba cache mode align on a hybrid SSM decode that loads KV over NIXL (0.18.0-0.22.x) ---------------------

ALIGN = ["--enable-prefix-caching", "--mamba-cache-mode", "align"]
HMA_ON = ["--no-disable-hybrid-kv-cache-manager"]
DS = [{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}]
NEMOTRON_NANO = "nvidia/NVIDIA-Nemotron-Nano-9B-v2"


def _hybrid_pair(p_extra=(), d_extra=(), model=NEMOTRON_NANO, image="vllm/vllm-openai:v0.19.0", kind="Deployment"):
    docs = pd("hyb", [*HMA_ON, "--kv-transfer-config", KV_P, *p_extra], [*HMA_ON, "--kv-transfer-config", KV_D, *d_extra],
              model=model, image=image, env=DS)
    for doc in docs:
        doc["kind"] = kind
    return docs


@pytest.mark.parametrize("name", ["nvidia/Nemotron-3-Ultra-550B-A55B-RL", "/models/NVIDIA-Nemotron-3.5-Super-NVFP4",
                                  "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"])
def test_nemotron_3_and_3_5_families_are_nemotronh_hybrids(name):
    from pdd_operator.vllm.architectures import traits
    assert (traits(None, None, None, name).architecture, traits(None, None, None, name).ssm_kind) == ("hybrid-ssm", "Mamba2")


def test_llama_based_nemotrons_stay_dense():
    from pdd_operator.vllm.architectures import traits
    assert traits(None, None, None, "nvidia/Llama-3.3-Nemotron-Super-49B-v1").architecture != "hybrid-ssm"


@pytest.mark.parametrize(("image", "kind"), [("vllm/vllm-openai:v0.18.0", "StatefulSet"),
                                              ("vllm/vllm-openai:v0.20.0", "Deployment"),
                                              ("vllm/vllm-openai:v0.22.0", "StatefulSet")])
def test_align_on_a_hybrid_decode_before_023_is_an_error(tmp_path, capsys, image, kind):
    code, out = check(tmp_path, capsys, *_hybrid_pair(ALIGN, ALIGN, image=image, kind=kind))
    assert code == 1 and "hybrid-mamba-align-external-kv" in rules(out, "error"), out


def test_the_reported_nemotron_ultra_on_a_leaderworkerset_is_an_error(tmp_path, capsys):
    docs = _hybrid_pair(ALIGN, ALIGN, model="nvidia/Nemotron-3-Ultra-550B-A55B-RL")
    for doc in docs:
        template = doc["spec"].pop("template")
        doc.update(apiVersion="leaderworkerset.x-k8s.io/v1", kind="LeaderWorkerSet")
        doc["spec"] = {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": template}}
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "hybrid-mamba-align-external-kv" in rules(out, "error"), out


def test_prefix_caching_on_a_gdn_decode_gets_align_and_is_an_error(tmp_path, capsys):
    # Qwen3-Next (Gated DeltaNet) has no SupportsMambaPrefixCaching in 0.22.0: prefix caching alone picks align.
    docs = _hybrid_pair(d_extra=["--enable-prefix-caching"], model="Qwen/Qwen3-Next-80B-A3B-Instruct",
                        image="vllm/vllm-openai:v0.22.0")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "hybrid-mamba-align-external-kv" in rules(out, "error"), out


def test_a_pddeployment_decode_with_align_is_an_error(tmp_path, capsys):
    spec = {"model": {"name": "ibm-granite/granite-4.0-h-small"}, "engine": {"image": "vllm/vllm-openai:v0.21.0"},
            "prefill": {"replicas": 1, "tensorParallelSize": 1},
            "decode": {"replicas": 1, "tensorParallelSize": 1, "extraArgs": ["--mamba-cache-mode", "align"]}}
    code, out = check(tmp_path, capsys, _pddeployment(spec))
    assert "hybrid-mamba-align-external-kv" in rules(out, "error"), out


def test_unknown_ssm_kind_with_prefix_caching_is_a_warning(tmp_path, capsys):
    docs = _hybrid_pair(d_extra=["--enable-prefix-caching"], model="MiniMaxAI/MiniMax-M1-40k", image="vllm/vllm-openai:v0.22.0")
    code, out = check(tmp_path, capsys, *docs)
    assert "hybrid-mamba-align-external-kv" in rules(out, "warning"), out
    assert "hybrid-mamba-align-external-kv" not in rules(out, "error"), out


@pytest.mark.parametrize(("p_extra", "d_extra", "image"), [
    (ALIGN, ALIGN, "vllm/vllm-openai:v0.23.0"),                      # the assertion is gone
    (ALIGN, ALIGN, "vllm/vllm-openai:v0.30.0"),
    (ALIGN, [], "vllm/vllm-openai:v0.19.0"),                         # prefill only: no KV arrives there
    (["--enable-prefix-caching"], ["--enable-prefix-caching"], "vllm/vllm-openai:v0.19.0"),  # Mamba2 picks "all"
    ([], ["--enable-prefix-caching", "--mamba-cache-mode", "all"], "vllm/vllm-openai:v0.19.0"),
])
def test_no_align_on_decode_or_a_fixed_release_passes_the_rule(tmp_path, capsys, p_extra, d_extra, image):
    code, out = check(tmp_path, capsys, *_hybrid_pair(p_extra, d_extra, image=image))
    assert "hybrid-mamba-align-external-kv" not in rules(out), out


def test_align_on_a_dense_model_is_not_this_rule(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_hybrid_pair(ALIGN, ALIGN, model="Qwen/Qwen3-8B"))
    assert "hybrid-mamba-align-external-kv" not in rules(out), out


# --- P2pNcclConnector's http_port (vllm#24720, vllm#26628) -------------------------------------------------------


def _p2p(extra_p: dict, extra_d: dict, image="vllm/vllm-openai:v0.11.0", model="Qwen/Qwen2.5-7B-Instruct",
         kind="Deployment"):
    def ktc(role, rank, port, extra):
        return json.dumps({"kv_connector": "P2pNcclConnector", "kv_role": role, "kv_rank": rank, "kv_parallel_size": 2,
                           "kv_port": str(port), "kv_connector_extra_config": {"send_type": "PUT_ASYNC", **extra}})
    docs = pd("p2p", ["--port", "20003", "--kv-transfer-config", ktc("kv_producer", 0, 21001, extra_p)],
              ["--port", "20005", "--kv-transfer-config", ktc("kv_consumer", 1, 22001, extra_d)], model=model, image=image)
    for doc in docs:
        doc["kind"] = kind
    return docs


PROXY = {"proxy_ip": "p2p-proxy", "proxy_port": "30001"}


@pytest.mark.parametrize(("image", "kind"), [("vllm/vllm-openai:v0.9.2", "StatefulSet"), ("vllm/vllm-openai:v0.10.1.1",
                                                                                         "Deployment")])
def test_p2p_nccl_without_http_port_before_0111_is_an_error(tmp_path, capsys, image, kind):
    code, out = check(tmp_path, capsys, *_p2p({}, {"http_port": "20005"}, image=image, kind=kind))
    assert code == 1 and "p2p-nccl-http-port-missing" in rules(out, "error"), out
    assert [f["message"].split(":", 1)[0] for r in out["results"] for f in r["findings"]] == ["prefill"], out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.12.0", "vllm/vllm-openai:v0.18.0", "vllm/vllm-openai:v0.23.0"])
def test_p2p_nccl_registering_with_the_proxy_without_http_port_is_an_error(tmp_path, capsys, image):
    docs = _p2p({**PROXY, "http_port": "20003"}, PROXY, image=image, model="deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "p2p-nccl-http-port-missing" in rules(out, "error"), out


@pytest.mark.parametrize(("extra", "image", "expected"), [
    ({"http_port": "20003"}, "vllm/vllm-openai:v0.11.0", (0, set())),  # the PR's fix: a valid pair, judged ok
    # 0.14.0 and 0.18.0 randomize each engine's request id (no VLLM_DISABLE_REQUEST_ID_RANDOMIZATION here)
    ({**PROXY, "http_port": "20003"}, "vllm/vllm-openai:v0.14.0", (1, {"p2p-nccl-request-id-randomized"})),
    ({}, "vllm/vllm-openai:v0.12.0", (0, set())),                      # no proxy registration: not read
    ({"proxy_ip": "", "proxy_port": "30001"}, "vllm/vllm-openai:v0.18.0", (1, {"p2p-nccl-request-id-randomized"})),
    # a fork may register it: not judged (outside 0.9.2-0.23.x)
    ({}, "rocm/vllm:rocm7.14.0_cdna_ubuntu24.04_py3.14_pytorch_2.11.0_vllm_0.24.0", (3, set())),
])
def test_p2p_nccl_with_http_port_or_without_registration_is_not_refused_for_it(tmp_path, capsys, extra, image, expected):
    code, out = check(tmp_path, capsys, *_p2p(extra, extra, image=image))
    assert (code, rules(out, "error")) == expected and "p2p-nccl-http-port-missing" not in rules(out), out
