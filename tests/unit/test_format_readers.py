"""What the manifest readers must not misread (issue 9 items 1, 2 and 6), on manifests in each format's own shape.

A container is another engine than vLLM (SGLang, TensorRT-LLM) only when its image is one or its command runs one
(``python3 -m sglang.launch_server``, ``sglang serve``, ``trtllm-serve``); a flag whose VALUE names that engine
(llm-d's routing sidecar ``-connector=sglang``, a router's ``--backend sglang``) says which protocol a sidecar
speaks and never turns the pod's vLLM engine into an SGLang one.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from pdd_operator.compat.manifests import program_words
from tests.unit.test_turn2_variants import check, container, rules, workload

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


# --- 2. a sidecar's flags are not an engine's ---------------------------------------------------------------------


def _sidecar_pair(sidecar: dict, model: str, image: str, native: bool) -> list[dict]:
    decode = container([model, "--port", "8200", "--kv-transfer-config", NIXL], image=image)
    pod = {"initContainers": [{**sidecar, "restartPolicy": "Always"}]} if native else {}
    d = workload("m-decode", "decode", decode, pod=pod, app="m")
    if not native:
        d["spec"]["template"]["spec"]["containers"].insert(0, sidecar)
    p = workload("m-prefill", "prefill", container([model, "--kv-transfer-config", NIXL], image=image), app="m")
    return [p, d]


@pytest.mark.parametrize(("sidecar", "model", "image"), [
    ({"name": "routing-proxy", "image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0",
      "args": ["-port=8000", "-vllm-port=8200", "-connector=sglang"]}, "Qwen/Qwen2-0.5B", "vllm/vllm-openai:v0.10.0"),
    ({"name": "pd-sidecar", "image": "ghcr.io/llm-d/llm-d-inference-scheduler/pd-sidecar:v0.5.0",
      "args": ["--port=8000", "--vllm-port=8200", "--kv-connector", "sglang"]},
     "meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.20.0"),
    ({"name": "router", "image": "quay.io/me/router:1.2", "command": ["/router"],
      "args": ["--backend=sglang", "--prefill-url", "http://localhost:8200"]},
     "deepseek-ai/DeepSeek-V2-Lite", "vllm/vllm-openai:v0.14.0"),
])
@pytest.mark.parametrize("native", [True, False])
def test_a_sidecar_naming_sglang_as_a_flag_value_leaves_the_vllm_pair_judged(tmp_path, capsys, sidecar, model,
                                                                             image, native):
    code, out = check(tmp_path, capsys, *_sidecar_pair(sidecar, model, image, native))
    assert not out["notChecked"], out["notChecked"]
    assert len(out["results"]) == 1 and code == 0


@pytest.mark.parametrize("command", [
    ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--disaggregation-mode", "decode"],
    ["bash", "-c", "exec python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --disaggregation-mode decode"],
    ["sglang", "serve", "--model-path", "Qwen/Qwen3-8B", "--disaggregation-mode", "decode"],
])
def test_a_container_that_runs_sglang_is_still_not_checked(tmp_path, capsys, command):
    """Negative control: where the command runs SGLang (its program or module), the engine is SGLang's."""
    sg = {"name": "engine", "image": "quay.io/me/engine:1", "command": command}
    docs = [workload("s-prefill", "prefill", {**sg, "command": [c.replace("decode", "prefill") for c in command]},
                     app="s"),
            workload("s-decode", "decode", sg, app="s")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and not out["results"]
    assert all("SGLang" in n["reason"] for n in out["notChecked"])


@pytest.mark.parametrize(("command", "words"), [
    (["-connector=sglang", "-v=6"], ["-connector", "-v"]),
    (["--kv-connector", "sglang", "--port", "8000"], ["--kv-connector", "--port", "8000"]),
    (["python3", "-m", "sglang.launch_server"], ["python3", "-m", "sglang.launch_server"]),
    (["mpirun", "--allow-run-as-root", "trtllm-serve", "m"], ["mpirun", "--allow-run-as-root", "trtllm-serve", "m"]),
    (["sh", "-c", "sglang serve --x 1 && echo done"], ["sh", "-c", "sglang", "serve", "--x", "1", "echo", "done"]),
])
def test_program_words(command, words):
    assert program_words(command) == words


def test_the_sidecar_does_not_hide_a_real_fault_of_the_pair(tmp_path, capsys):
    """The pair behind an SGLang-speaking sidecar is judged like any other: a KV dtype mismatch is still refused."""
    sidecar = {"name": "routing-proxy", "image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0",
               "args": ["-vllm-port=8200", "-connector=sglang"]}
    docs = _sidecar_pair(sidecar, "Qwen/Qwen3-8B", "vllm/vllm-openai:v0.24.0", native=False)
    docs[1]["spec"]["template"]["spec"]["containers"][1]["args"] += ["--kv-cache-dtype", "fp8"]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")


# --- 1. encode workers (E/P/D) are not P/D roles ------------------------------------------------------------------

VLM = "Qwen/Qwen2.5-VL-7B-Instruct"


def _kv(device="cuda"):
    return json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_buffer_device": device})


def _epd_graph(runtime: str, encode: list[str], prefill: list[str], decode: list[str], *, encoders: int = 2,
               decode_extra: tuple[str, ...] = (), encode_env: list[dict] | None = None,
               api: str = "nvidia.com/v1alpha1") -> dict:
    """A DynamoGraphDeployment of Dynamo's E/P/D examples (examples/backends/vllm/launch/dual_encoder_epd.sh as a
    graph): a frontend, ``encoders`` encode workers (the first with a CPU KV buffer), a prefill and a decode worker,
    every worker with a NixlConnector ``kv_both`` config."""
    def worker(args, device="cuda", env=None):
        main = {"image": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{runtime}", "command": ["python3", "-m", "dynamo.vllm"],
                "args": ["--model", VLM, "--enable-multimodal", "--enable-mm-embeds", *args,
                         "--kv-transfer-config", _kv(device)]}
        if env:
            main["env"] = env
        return {"componentType": "worker", "replicas": 1, "resources": {"limits": {"gpu": "1"}},
                "extraPodSpec": {"mainContainer": main}}
    services = {"Frontend": {"componentType": "frontend", "replicas": 1, "extraPodSpec": {"mainContainer": {
        "image": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{runtime}", "command": ["python3", "-m", "dynamo.frontend"]}}}}
    for i in range(encoders):
        services[f"EncodeWorker{i}"] = worker(encode, "cpu" if i == 0 else "cuda", encode_env)
    services["VllmPrefillWorker"] = worker(prefill)
    services["VllmDecodeWorker"] = worker([*decode, *decode_extra])
    return {"apiVersion": api, "kind": "DynamoGraphDeployment", "metadata": {"name": "epd"},
            "spec": {"backendFramework": "vllm", "services": services}}


_OLD = (["--multimodal-encode-worker"], ["--multimodal-worker", "--is-prefill-worker"], ["--multimodal-decode-worker"])
_NEW = (["--disaggregation-mode", "encode"], ["--disaggregation-mode", "prefill"], ["--disaggregation-mode", "decode"])


@pytest.mark.parametrize(("runtime", "flags", "env"), [
    ("1.1.0", _OLD, None),                 # the deprecated flag, an alias of --disaggregation-mode encode
    ("0.9.1", _OLD, None),                 # the 'encoder' component of 0.7-0.9 (args.py)
    ("1.1.0", _NEW, None),
    ("1.6.1", _NEW, None),                 # a release whose vLLM is not known
    ("1.3.1", ([], _NEW[1], _NEW[2]), [{"name": "DYN_VLLM_DISAGGREGATION_MODE", "value": "encode"}]),
])
def test_dynamo_encode_workers_are_not_paired(tmp_path, capsys, runtime, flags, env):
    """Only the prefill and the decode worker make a pair; the encode workers (one of them with a CPU KV buffer, which
    would give kv-buffer-device-mismatch against the prefill) are neither paired nor reported as 'not checked'."""
    if runtime == "0.9.1":  # Dynamo before 1.0 refuses --kv-transfer-config beside its default --connector nixl
        flags = tuple([*f, "--connector", "none"] for f in flags)
    code, out = check(tmp_path, capsys, _epd_graph(runtime, *flags, encode_env=env))
    assert not out["notChecked"], out["notChecked"]
    [result] = out["results"]
    assert "Encode" not in result["object"] and "VllmPrefillWorker" in result["object"]
    assert "kv-buffer-device-mismatch" not in rules(out) and code == 0


def test_a_fault_of_the_pair_beside_encode_workers_is_still_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _epd_graph("1.1.0", *_NEW, decode_extra=("--kv-cache-dtype", "fp8")))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")
    assert len(out["results"]) == 1


def test_an_encode_worker_that_cannot_start_is_said(tmp_path, capsys):
    """An encode worker is judged alone by what stops any vLLM engine at startup: here its EC connector, which vLLM
    0.25.0 does not register (ECCPUConnector arrived in 0.26.0)."""
    docs = _vllm_epd(image="vllm/vllm-openai:v0.25.0", enc=_ec("ECCPUConnector", "ec_producer"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1
    [alone] = [r for r in out["results"] if "vlm-encode" in r["object"]]
    assert [f["rule"] for f in alone["findings"]] == ["ec-connector-unregistered"]
    assert alone["findings"][0]["message"].startswith("encode: ")


def test_the_dual_encoder_script_pairs_only_prefill_and_decode(tmp_path, capsys):
    from pathlib import Path
    script = Path(__file__).parent / "data" / "public_reports_79" / "inputs" / "dynamo-dual-encoder-epd-llava-15-7b.sh"
    code = main(["check", str(script), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    [result] = out["results"]
    assert "line 131" in result["object"] and "line 150" in result["object"] and code == 0  # prefill and decode lines
    assert "kv-buffer-device-mismatch" not in rules(out)


# --- 1. the EC connector between the encode worker and the prefill --------------------------------------------------


def _ec(name="ECExampleConnector", role="ec_consumer", path="/mnt/ec"):
    return json.dumps({"ec_connector": name, "ec_role": role, "ec_connector_extra_config": {"shared_storage_path": path}})


def _vllm_epd(image="vllm/vllm-openai:v0.30.0", model="Qwen/Qwen3-VL-8B-Instruct", enc=None, pre=None):
    """vLLM's own E/P/D (examples/disaggregated/disaggregated_encoder/disagg_1e1p1d_example.sh) as three Deployments
    with llm-d role labels: an encoder (EC producer, no KV connector), a prefill (EC consumer, NIXL producer) and a
    decode (NIXL consumer)."""
    kv = lambda role: json.dumps({"kv_connector": "NixlConnector", "kv_role": role})  # noqa: E731
    e = container([model, "--ec-transfer-config", enc or _ec(role="ec_producer")], image=image)
    p_args = [model, "--kv-transfer-config", kv("kv_producer")] + (["--ec-transfer-config", pre] if pre != "" else [])
    if pre is None:
        p_args[-1] = _ec()
    return [workload("vlm-encode", "encode", e, app="vlm"),
            workload("vlm-prefill", "prefill", container(p_args, image=image), app="vlm"),
            workload("vlm-decode", "decode", container([model, "--kv-transfer-config", kv("kv_consumer")], image=image),
                     app="vlm")]


RULE_EC = "ec-connector-pair-mismatch"


@pytest.mark.parametrize(("enc", "pre", "warned"), [
    (None, None, False),                                                            # as vLLM's example: same connector
    (_ec("ECCPUConnector", "ec_producer"), _ec("ECCPUConnector"), False),
    (_ec("ECCPUConnector", "ec_producer"), None, True),                              # another connector
    (_ec(role="ec_producer", path="/mnt/a"), _ec(path="/mnt/b"), True),              # another directory
    (_ec(role="ec_producer", path="/tmp"), json.dumps({"ec_connector": "ECExampleConnector", "ec_role": "ec_consumer"}),
     False),                                                                        # /tmp is the default
    (None, "", True),                                                               # no EC connector on the prefill
])
@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.30.0", "vllm/vllm-openai:v0.34.0"])
def test_the_ec_connector_pair(tmp_path, capsys, enc, pre, warned, image):
    code, out = check(tmp_path, capsys, *_vllm_epd(image=image, enc=enc, pre=pre))
    assert not out["notChecked"] and len(out["results"]) == 1, out
    assert (RULE_EC in rules(out, "warning")) is warned and code == 0


def test_an_ec_producer_with_a_kv_connector_is_still_an_encoder(tmp_path, capsys):
    """vLLM gives an EC producer no KV cache (get_kv_cache_spec returns {}), so its KV connector makes it no prefill."""
    docs = _vllm_epd()
    docs[0]["spec"]["template"]["spec"]["containers"][0]["args"] += [
        "--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})]
    code, out = check(tmp_path, capsys, *docs)
    [result] = out["results"]
    assert "vlm-encode" not in result["object"] and code == 0


# --- 6. an unknown vLLM version is refused only where every release is ----------------------------------------------


@pytest.mark.parametrize(("image", "rdma", "severity"), [
    ("vllm/vllm-openai:latest", True, "error"),      # 0.21+ refuse at startup, older releases fail over RDMA
    ("vllm/vllm-openai:latest", False, "warning"),   # older releases only copy slower without RDMA: the version decides
    ("quay.io/me/vllm:dev", False, "warning"),
    ("vllm/vllm-openai:v0.20.0", False, "warning"),  # a known release before 0.21 without RDMA (unchanged)
    ("vllm/vllm-openai:v0.21.0", False, "error"),    # a known release that refuses it (unchanged)
])
def test_expandable_segments_on_an_unknown_version(tmp_path, capsys, image, rdma, severity):
    env = [{"name": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:True"}]
    docs = [workload(f"q-{role}", role, container(["Qwen/Qwen3-8B", "--kv-transfer-config", NIXL], image=image,
                                                    env=env), app="q") for role in ("prefill", "decode")]
    if not rdma:
        for d in docs:
            d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"].pop("rdma/ib")
    _, out = check(tmp_path, capsys, *docs)
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "expandable-segments-with-nixl"}
    assert found == {severity}


# --- 3. OME's vLLM runtimes: --middleware is imported by vLLM's server at startup -----------------------------------

OPC = "vllm.entrypoints.openai.middleware.log_opc_header"
LOG_RESPONSE = "vllm.entrypoints.serve.middleware.log_response.log_response"


def _ome_runtime(middleware: list[str], image="docker.io/vllm/vllm-openai:v0.9.0.1", decode_image=None) -> dict:
    """An OME ClusterServingRuntime in the shape of sgl-project/ome's published vLLM runtimes (engineConfig /
    decoderConfig runners running the OpenAI server with --middleware), with a NIXL pair."""
    def runner(img, role):
        kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": role})
        return {"runner": {"name": "ome-container", "image": img,
                           "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                           "args": ["--port=8080", "--model=$(MODEL_PATH)", *(f"--middleware={m}" for m in middleware),
                                    "--max-log-len=0", "--served-model-name=vllm-model", "--tensor-parallel-size=1",
                                    "--kv-transfer-config", kv],
                           "resources": {"limits": {"nvidia.com/gpu": 1}}}}
    return {"apiVersion": "ome.io/v1beta1", "kind": "ClusterServingRuntime", "metadata": {"name": "vllm-llama-pd"},
            "spec": {"supportedModelFormats": [{"modelFormat": {"name": "safetensors"},
                                                "modelArchitecture": "LlamaForCausalLM"}],
                     "engineConfig": runner(image, "kv_producer"),
                     "decoderConfig": runner(decode_image or image, "kv_consumer")}}


@pytest.mark.parametrize(("middleware", "image", "severity"), [
    ([OPC], "docker.io/vllm/vllm-openai:v0.9.0.1", "error"),          # OME's published runtime: no release ships it
    ([OPC], "vllm/vllm-openai:v0.20.0", "error"),
    ([OPC], "vllm/vllm-openai:latest", "error"),                      # unknown release: none read ships it
    ([LOG_RESPONSE], "vllm/vllm-openai:v0.25.0", "error"),            # vLLM's own module, from 0.29.0 on
    ([LOG_RESPONSE], "vllm/vllm-openai:v0.30.0", None),
    ([LOG_RESPONSE], "vllm/vllm-openai:latest", "warning"),           # the release decides
    (["mycompany.middleware.audit"], "vllm/vllm-openai:v0.20.0", None),  # the user's own package: not judged
    ([OPC], "ghcr.io/sgl-project/ome/vllm:v0.9.0", None),             # OME's own image: not judged
    ([], "vllm/vllm-openai:v0.20.0", None),
    (["vllm.entrypoints.openai.api_server.build_app", OPC], "vllm/vllm-openai:v0.20.0", "error"),  # repeated flag
])
def test_ome_runtime_middleware(tmp_path, capsys, middleware, image, severity):
    code, out = check(tmp_path, capsys, _ome_runtime(middleware, image=image))
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "middleware-module-missing"}
    assert found == ({severity} if severity else set())
    if severity == "error":
        assert code == 1


def test_the_ome_pair_is_still_judged_beside_its_middleware(tmp_path, capsys):
    """The runtime's vLLM part is judged as it is: the decode's other vLLM release is refused as before."""
    _, out = check(tmp_path, capsys, _ome_runtime([OPC], decode_image="docker.io/vllm/vllm-openai:v0.9.2"))
    assert {"middleware-module-missing", "vllm-version-mismatch"} <= rules(out, "error")


def test_the_module_table_covers_the_releases_the_env_table_does():
    from pathlib import Path

    from pdd_operator.vllm import middleware
    tables = Path(middleware.__file__).parent
    modules = json.loads((tables / "entrypoint_modules.json").read_text())
    assert modules["releases"] == json.loads((tables / "env_vars.json").read_text())["releases"]
    assert modules["modules"]["vllm.entrypoints.openai.api_server"] == f"0-{len(modules['releases']) - 1}"


# --- 4. Dynamo 0.4.x replaces the worker's --kv-transfer-config -------------------------------------------------------

OVERWRITTEN = "dynamo-kv-transfer-config-overwritten"


def _dynamo_pair(runtime: str, kv_p: dict, kv_d: dict, env=(), extra=(), model="Qwen/Qwen3-0.6B") -> dict:
    def worker(sub, flags, kv):
        main = {"image": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{runtime}", "command": ["python3", "-m", "dynamo.vllm"],
                "args": ["--model", model, *flags, *extra, "--kv-transfer-config", json.dumps(kv)], "env": list(env)}
        return {"componentType": "worker", "subComponentType": sub, "replicas": 1,
                "resources": {"limits": {"gpu": "1"}}, "extraPodSpec": {"mainContainer": main}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "d"},
            "spec": {"services": {"VllmPrefillWorker": worker("prefill", ["--is-prefill-worker"], kv_p),
                                  "VllmDecodeWorker": worker("decode", [], kv_d)}}}


LMC = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


@pytest.mark.parametrize("runtime", ["0.4.0", "0.4.1"])
@pytest.mark.parametrize(("kv_p", "kv_d", "gone"), [
    (LMC, LMC, None),                                                     # no NIXL as written: judged as NIXL
    ({"kv_connector": "NixlConnector", "kv_role": "kv_producer", "kv_buffer_device": "cpu"},
     {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}, "kv-buffer-device-mismatch"),
])
def test_dynamo_0_4_judges_the_config_dynamo_builds(tmp_path, capsys, runtime, kv_p, kv_d, gone):
    code, out = check(tmp_path, capsys, _dynamo_pair(runtime, kv_p, kv_d))
    [result] = out["results"]
    messages = [f["message"] for f in result["findings"] if f["rule"] == OVERWRITTEN]
    assert len(messages) == 2 and f"Dynamo {runtime} replaces" in messages[0]
    assert "dynamo-connector-flag" not in rules(out)       # 0.4.x has no --connector to conflict with
    assert gone is None or gone not in rules(out)
    assert code == 0


def test_dynamo_0_5_keeps_the_user_config(tmp_path, capsys):
    """0.5.0 keeps the user's config (create_kv_transfer_config); its --connector default [nixl] conflicts with it."""
    code, out = check(tmp_path, capsys, _dynamo_pair("0.5.0", LMC, LMC))
    assert OVERWRITTEN not in rules(out) and code != 0


def test_dynamo_0_4_1_with_lmcache_is_said_and_not_judged_as_nixl(tmp_path, capsys):
    nixl = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    code, out = check(tmp_path, capsys, _dynamo_pair("0.4.1", nixl, nixl, env=[{"name": "ENABLE_LMCACHE", "value": "1"}]))
    [result] = out["results"]
    messages = [f["message"] for f in result["findings"] if f["rule"] == OVERWRITTEN]
    assert len(messages) == 2 and "ENABLE_LMCACHE" in messages[0] and "MultiConnector" in messages[0]


def test_dynamo_0_4_refuses_a_connector_flag(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _dynamo_pair("0.4.1", LMC, LMC, extra=("--connector", "nixl")))
    assert code == 1 and "dynamo-connector-flag" in rules(out, "error")
    assert any("unrecognized arguments" in f["message"] for r in out["results"] for f in r["findings"])
