"""Variants of what the hundred-and-twelfth public-report set (tests/unit/data/public_reports_112) taught, with
negative controls.

- A DynamoGraphDeployment whose decode worker carries its role flag (``--disaggregation-mode decode``) but whose
  worker typed as the prefill (``subComponentType: prefill``, a v1beta1 ``type: prefill``) carries none: what a
  DynamoGraphDeploymentRequest with ``autoApply`` generated on Dynamo 1.4.0 (ai-dynamo/dynamo#13238, the flag measured
  absent on the running pod, the Planner never found a prefill worker). Dynamo's worker takes its component from the
  flag alone (1.4.0 args.py lines 175-184: ``prefill`` only in prefill mode, ``backend`` otherwise) and the operator
  writes no role flag from a type (deploy/operator/internal/dynamo/backend_vllm.go), so the "prefill" serves
  aggregated, no KV moves and vLLM refuses nothing. The checker paired it by its type and refused the graph through
  ``kv-connector-missing`` (a 1.x worker outside prefill mode starts without a connector): a false refusal. Now such a
  graph gets the ``dynamo-prefill-role-missing`` warning (:mod:`pdd_operator.compat.dynamo_roles`), with a fix in the
  release's own spelling. A graph whose workers are all typed and none flagged stays as before (set 32).
- The workers of a graph judged by that warning are no longer dropped: what stops one of them on its own
  (:func:`~pdd_operator.compat.engine.evaluate_alone`) is still an error, in the typed graphs and in the all-flagless
  ones of set 32 alike.
"""

from __future__ import annotations

from tests.unit.test_turn2_variants import check, rules

RULE = "dynamo-prefill-role-missing"
KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _service(args: list[str], image: str, sub: str | None, gpus: int = 1, env: list[dict] | None = None) -> dict:
    container = {"image": image, "command": ["python3", "-m", "dynamo.vllm"], "args": args}
    if env:
        container["env"] = env
    service = {"dynamoNamespace": "g", "componentType": "worker", "replicas": 1,
               "resources": {"limits": {"gpu": str(gpus)}}, "extraPodSpec": {"mainContainer": container}}
    if sub:
        service["subComponentType"] = sub
    return service


def _v1alpha1(prefill: dict, decode: dict, image: str) -> dict:
    frontend = {"dynamoNamespace": "g", "componentType": "frontend", "replicas": 1,
                "extraPodSpec": {"mainContainer": {"image": image}}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"services": {"Frontend": frontend, "VllmPrefillWorker": prefill, "VllmDecodeWorker": decode}}}


def _component(name: str, kind: str, args: list[str], image: str, gpus: int = 1) -> dict:
    return {"name": name, "type": kind, "replicas": 1, "podTemplate": {"spec": {"containers": [{
        "name": "main", "image": image, "command": ["python3", "-m", "dynamo.vllm"], "args": args,
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}}]}}}


def _v1beta1(components: list[dict]) -> dict:
    return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"components": components}}


def _dgdr_graph(model: str, image: str, p_extra: list[str] = (), p_env: list[dict] | None = None,
                p_gpus: int = 1) -> dict:
    """The #13238 shape: the decode in decode mode with NixlConnector, the typed prefill tuned but without its mode."""
    prefill = _service(["--model", model, "--max-num-seqs", "1", "--max-num-batched-tokens", "16384", *p_extra],
                       image, "prefill", p_gpus, p_env)
    decode = _service(["--model", model, "--disaggregation-mode", "decode", "--kv-transfer-config", KV], image, "decode")
    return _v1alpha1(prefill, decode, image)


# --- a typed prefill worker without its role flag -----------------------------------------------------------------


def test_a_dgdr_prefill_typed_but_without_its_mode_is_warned_not_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _dgdr_graph("Qwen/Qwen3-8B", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0"))
    assert code == 0 and rules(out) == {RULE} and not out["notChecked"]
    finding = out["results"][0]["findings"][0]
    assert finding["fields"] == ["DynamoGraphDeployment/g spec.services.VllmPrefillWorker.extraPodSpec.mainContainer.args"]
    assert "typed as a prefill worker" in finding["message"] and "backend_vllm.go" in finding["message"]
    # 1.4.0 removed --is-prefill-worker, and a prefill-mode worker of 1.x refuses to start without a connector
    assert "--disaggregation-mode prefill with --kv-transfer-config" in finding["fix"]
    assert "--is-prefill-worker" not in finding["fix"]


def test_a_typed_prefill_that_has_a_connector_but_no_mode_is_warned_on_a_v1beta1_graph(tmp_path, capsys):
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1"
    model = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config", KV]
    doc = _v1beta1([_component("prefill", "prefill", model, image),
                    _component("decode", "decode", [*model, "--disaggregation-mode", "decode"], image)])
    code, out = check(tmp_path, capsys, doc)
    assert code == 0 and rules(out) == {RULE}
    assert all(" + " not in r["object"] for r in out["results"])  # nothing was paired
    fix = out["results"][0]["findings"][0]["fix"]
    assert fix.startswith("Add --disaggregation-mode prefill to the args of prefill")  # it has its connector


def test_a_pre_1_0_graph_is_told_to_add_the_old_flag(tmp_path, capsys):
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.9.1"
    prefill = _service(["--model", "Qwen/Qwen3-0.6B"], image, "prefill")
    decode = _service(["--model", "Qwen/Qwen3-0.6B", "--is-decode-worker"], image, "decode")
    code, out = check(tmp_path, capsys, _v1alpha1(prefill, decode, image))
    assert code == 0 and rules(out) == {RULE}
    assert out["results"][0]["findings"][0]["fix"].startswith("Add --is-prefill-worker to the args of VllmPrefillWorker")


def test_what_stops_the_typed_worker_on_its_own_is_still_an_error(tmp_path, capsys):
    # Qwen3-0.6B has 16 attention heads: TP 3 stops the worker whatever its role (vLLM config/model.py)
    doc = _dgdr_graph("Qwen/Qwen3-0.6B", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0",
                      p_extra=["--tensor-parallel-size", "3"], p_gpus=3)
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "tp-heads-indivisible" in rules(out, "error") and RULE in rules(out, "warning")
    assert "kv-connector-missing" not in rules(out)


def test_what_stops_a_worker_of_an_all_flagless_graph_is_an_error_too(tmp_path, capsys):
    # set 32's kind (no worker has a role flag): before, the warning was the whole verdict and this passed
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.8.0"
    prefill = _service(["--model", "Qwen/Qwen3-0.6B", "--tensor-parallel-size", "3"], image, None, 3)
    decode = _service(["--model", "Qwen/Qwen3-0.6B"], image, None)
    code, out = check(tmp_path, capsys, _v1alpha1(prefill, decode, image))
    assert code == 1 and "tp-heads-indivisible" in rules(out, "error") and RULE in rules(out, "warning")


# --- negative controls: a prefill the worker does read ------------------------------------------------------------


def test_the_mode_flag_makes_the_typed_graph_a_pair(tmp_path, capsys):
    doc = _dgdr_graph("Qwen/Qwen3-0.6B", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0",
                      p_extra=["--disaggregation-mode", "prefill", "--kv-transfer-config", KV])
    code, out = check(tmp_path, capsys, doc)
    assert code == 0 and RULE not in rules(out) and " + " in out["results"][0]["object"]


def test_a_role_variable_makes_the_typed_graph_a_pair(tmp_path, capsys):
    doc = _dgdr_graph("Qwen/Qwen3-0.6B", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0",
                      p_extra=["--kv-transfer-config", KV],
                      p_env=[{"name": "DYN_VLLM_DISAGGREGATION_MODE", "value": "prefill"}])
    code, out = check(tmp_path, capsys, doc)
    assert RULE not in rules(out)


def test_a_typed_prefill_with_a_producer_kv_role_is_left_to_the_connector_rules(tmp_path, capsys):
    producer = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
    doc = _dgdr_graph("Qwen/Qwen3-0.6B", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0",
                      p_extra=["--kv-transfer-config", producer])
    code, out = check(tmp_path, capsys, doc)
    assert RULE not in rules(out)


def test_a_graph_with_no_worker_typed_or_named_prefill_is_not_warned(tmp_path, capsys):
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0"
    doc = _v1beta1([_component("worker", "worker", ["--model", "Qwen/Qwen3-0.6B-FP8", "--tensor-parallel-size", "2"],
                               image, 2)])
    code, out = check(tmp_path, capsys, doc)
    assert code == 4 and RULE not in rules(out)


def test_a_graph_typed_throughout_with_no_role_flag_is_left_as_before(tmp_path, capsys):
    # no worker takes its role from a flag: the types are left to Dynamo's operator and the workers paired by them
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.1"
    prefill = _service(["--model", "Qwen/Qwen3-0.6B"], image, "prefill")
    decode = _service(["--model", "Qwen/Qwen3-0.6B"], image, "decode")
    code, out = check(tmp_path, capsys, _v1alpha1(prefill, decode, image))
    assert RULE not in rules(out) and " + " in out["results"][0]["object"]
