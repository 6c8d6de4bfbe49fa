"""Variants of the kinds of fault the seventh public-report set (tests/unit/data/public_reports_7) found, each with
negative controls: the first argument after a ``python -m`` entry point (``dynamo.vllm``) dropped by the flag parser;
a ``--kv-transfer-config`` whose value is not in the manifest (a shell command substitution, a variable from a
ConfigMap); DSpark speculation without a draft model (it takes the target's); prefill context parallelism on a NIXL
consumer or kv_both (vLLM 0.33)."""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.args import parse_flags, split_command
from tests.unit.test_turn2_variants import check, container, rules, workload


def _kv(role="kv_both", connector="NixlConnector", **extra):
    return json.dumps({"kv_connector": connector, "kv_role": role, **extra})


def _pair(image="vllm/vllm-openai:v0.33.0", p_args=(), d_args=(), p_kv=None, d_kv=None, model="Qwen/Qwen3-8B",
          gpus=8, p_env=(), d_env=()):
    """Prefill and decode Deployments of one model (``*_kv``: their --kv-transfer-config, kv_both by default)."""
    def role(name, args, kv, env):
        return workload(f"m-{name}", name, container([model, *args, "--kv-transfer-config", kv or _kv()], image=image,
                                                     gpus=gpus, env=list(env)))
    return [role("prefill", p_args, p_kv, p_env), role("decode", d_args, d_kv, d_env)]


def _dgd(p_args, d_args, runtime="0.6.0", worker_type=None):
    """A v1alpha1 DynamoGraphDeployment with a prefill and a decode dynamo.vllm worker (exec form: args as a list).
    ``worker_type``: ``None`` names the role in subComponentType; ``"worker"`` leaves it to the flags."""
    def service(role, args):
        svc = {"componentType": "worker", "replicas": 1, "resources": {"limits": {"gpu": "4"}},
               "extraPodSpec": {"mainContainer": {"image": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{runtime}",
                                                  "command": ["python3", "-m", "dynamo.vllm"], "args": list(args)}}}
        if worker_type is None:
            svc["subComponentType"] = role
        return svc
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"services": {"Frontend": {"componentType": "frontend", "replicas": 1},
                                  "PrefillWorker": service("prefill", p_args), "DecodeWorker": service("decode", d_args)}}}


# --- the first argument after a `python -m` entry point is an argument, not the entry point's second word ----------


@pytest.mark.parametrize("argv, model, tp", [
    (["python3", "-m", "dynamo.vllm", "--tensor-parallel-size", "4", "--model", "m"], "m", "4"),
    (["python3", "-m", "dynamo.vllm", "--model", "m", "-tp", "2"], "m", "2"),
    (["python3", "-m", "vllm.entrypoints.cli.main", "serve", "m", "-tp", "2"], "m", "2"),
    (["/usr/local/bin/vllm", "serve", "m", "-tp", "8"], "m", "8"),
    (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "-tp", "8"], "m", "8"),
])
def test_the_flags_right_after_the_entry_point_are_read(argv, model, tp):
    got, flags = parse_flags(split_command(argv[:3], argv[3:]))
    assert (got, flags.get("--tensor-parallel-size")) == (model, tp)


def test_a_dynamo_prefill_tp_given_first_is_seen_and_refused_where_vllm_refuses_it(tmp_path, capsys):
    # vllm-runtime 0.6.0 ships vLLM 0.11.0, whose handshake asserts prefill TP <= decode TP (hetero_tp rules)
    dgd = _dgd(["--tensor-parallel-size", "4", "--model", "Qwen/Qwen3-8B"],
               ["--tensor-parallel-size", "2", "--model", "Qwen/Qwen3-8B"])
    code, out = check(tmp_path, capsys, dgd)
    assert code == 1 and "hetero-tp-p-gt-d-unsupported" in rules(out, "error"), out


def test_equal_dynamo_tps_given_first_pass(tmp_path, capsys):
    dgd = _dgd(["--tensor-parallel-size", "4", "--model", "Qwen/Qwen3-8B"],
               ["--tensor-parallel-size", "4", "--model", "Qwen/Qwen3-8B"])
    code, out = check(tmp_path, capsys, dgd)
    assert code == 0 and not rules(out, "error"), out


def test_workers_typed_worker_get_their_role_from_a_leading_disaggregation_mode(tmp_path, capsys):
    # --disaggregation-mode is a Dynamo >= 1.0 flag, whose workers name the connector in --kv-transfer-config (set 67)
    kv = ["--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']
    dgd = _dgd(["--disaggregation-mode", "prefill", "--model", "Qwen/Qwen3-8B", *kv],
               ["--disaggregation-mode", "decode", "--model", "Qwen/Qwen3-8B", *kv], runtime="1.1.0", worker_type="worker")
    code, out = check(tmp_path, capsys, dgd)
    assert code == 0 and len(out["results"]) == 1 and not out.get("notChecked"), out


# --- a --kv-transfer-config whose value is not in the manifest is not checked, never refused ----------------------


def _script_pair(kv_expr, image="vllm/vllm-openai:v0.28.0"):
    """Prefill and decode Deployments whose engine an ``sh -c`` script starts, with ``kv_expr`` as the
    --kv-transfer-config word of the script."""
    script = f"vllm serve Qwen/Qwen3-8B --port 8000 --kv-transfer-config {kv_expr}"
    return [workload(f"m-{role}", role, container([script], image=image, command=["sh", "-c"]))
            for role in ("prefill", "decode")]


@pytest.mark.parametrize("kv_expr", ['"$(cat /etc/vllm/kv.json)"', '"`cat /etc/vllm/kv.json`"', '"$KV_CONFIG"',
                                     "${KV_CONFIG}"])
def test_a_kv_config_the_shell_computes_or_reads_from_the_image_is_not_checked(tmp_path, capsys, kv_expr):
    code, out = check(tmp_path, capsys, *_script_pair(kv_expr))
    assert code == 3 and not rules(out, "error") and len(out["notChecked"]) == 2, out
    assert all("--kv-transfer-config" in n["reason"] for n in out["notChecked"]), out


def test_a_kv_config_from_a_configmap_variable_is_not_checked(tmp_path, capsys):
    env = [{"name": "KV_CONFIG", "valueFrom": {"configMapKeyRef": {"name": "kv", "key": "config.json"}}}]
    docs = _pair("vllm/vllm-openai:v0.28.0", p_kv="$(KV_CONFIG)", d_kv="$(KV_CONFIG)", p_env=env, d_env=env)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and not rules(out, "error") and len(out["notChecked"]) == 2, out


def test_an_undefined_kubelet_reference_reaches_vllm_literally_and_is_refused(tmp_path, capsys):
    # no shell and no such variable: the kubelet leaves $(KV_CONFIG) as written and vLLM cannot parse it
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.28.0", p_kv="$(KV_CONFIG)", d_kv="$(KV_CONFIG)"))
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out


def test_a_literal_kv_config_in_a_script_is_still_checked(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_script_pair("'" + _kv() + "'"))
    assert code == 0 and len(out["results"]) == 1 and not out.get("notChecked"), out


# --- DSpark takes the target's weights when no draft model is named (vLLM >= 0.25) -------------------------------


def _spec(method, **extra):
    return ["--speculative-config", json.dumps({"method": method, "num_speculative_tokens": 3, **extra})]


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.25.0", "vllm/vllm-openai:v0.28.0", "vllm/vllm-openai:v0.33.0"])
def test_dspark_without_a_draft_model_on_both_roles_is_accepted(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_pair(image, p_args=_spec("dspark"), d_args=_spec("dspark")))
    assert code == 0 and "speculative-incomplete" not in rules(out), out


@pytest.mark.parametrize("method", ["eagle3", "dflash"])
def test_a_draft_head_method_without_its_model_is_still_refused(tmp_path, capsys, method):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.28.0", p_args=_spec(method), d_args=_spec(method)))
    assert code == 1 and "speculative-incomplete" in rules(out, "error"), out


def test_dspark_on_decode_only_is_still_a_mismatch(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.28.0", d_args=_spec("dspark")))
    assert code == 1 and "spec-decode-mismatch" in rules(out, "error"), out


# --- prefill context parallelism only on a NIXL producer (vLLM 0.33.0 nixl/connector.py) -------------------------


@pytest.mark.parametrize("p_role, d_role, d_args, refused", [
    ("kv_both", "kv_both", (), "prefill"),
    ("kv_producer", "kv_consumer", ("-pcp", "2"), "decode"),
    ("kv_producer", "kv_both", ("--prefill-context-parallel-size=2",), "decode"),
])
def test_pcp_on_a_consumer_or_kv_both_is_refused_on_0_33(tmp_path, capsys, p_role, d_role, d_args, refused):
    docs = _pair(p_args=["--prefill-context-parallel-size", "2"], d_args=list(d_args), p_kv=_kv(p_role),
                 d_kv=_kv(d_role))
    if refused == "decode":  # only decode carries PCP here
        docs = _pair(d_args=list(d_args), p_kv=_kv(p_role), d_kv=_kv(d_role))
    code, out = check(tmp_path, capsys, *docs)
    findings = [f for r in out["results"] for f in r["findings"] if f["rule"] == "pcp-kv-role-unsupported"]
    assert code == 1 and findings and all(f["message"].startswith(refused) for f in findings), out


def test_pcp_inside_a_multiconnector_reads_the_nixl_childs_role(tmp_path, capsys):
    multi = json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_producer", "kv_connector_extra_config": {
        "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                       {"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}]}})
    code, out = check(tmp_path, capsys, *_pair(p_args=["-pcp", "2"], p_kv=multi, d_kv=_kv("kv_consumer")))
    assert code == 1 and "pcp-kv-role-unsupported" in rules(out, "error"), out


def test_pcp_on_a_producer_is_accepted(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(p_args=["-pcp", "2"], p_kv=_kv("kv_producer"), d_kv=_kv("kv_consumer")))
    assert code == 0 and "pcp-kv-role-unsupported" not in rules(out), out


def test_pcp_with_kv_both_before_0_29_gets_no_pcp_finding(tmp_path, capsys):
    # vLLM 0.28.0's nixl/connector.py has no context-parallel check (the wheels read: tests/unit/test_context_parallel.py)
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.28.0", p_args=["-pcp", "2"]))
    assert "pcp-kv-role-unsupported" not in rules(out), out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.29.0", "vllm/vllm-openai:v0.30.0", "vllm/vllm-openai:v0.32.0"])
def test_pcp_with_kv_both_from_0_29_is_refused(tmp_path, capsys, image):
    # 0.29.0-0.32.0 raise the same NotImplementedError as 0.33.0 (an earlier reading said 0.33 only)
    code, out = check(tmp_path, capsys, *_pair(image, p_args=["-pcp", "2"]))
    assert code == 1 and "pcp-kv-role-unsupported" in rules(out, "error"), out


def test_pcp_with_kv_both_on_an_unknown_release_is_not_checked_not_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:latest", p_args=["-pcp", "2"]))
    assert code == 3 and not rules(out, "error"), out



# --- engines in different pods never share a network namespace by a recycled id() --------------------------------


def test_dynamo_main_containers_are_identified_by_their_own_pod_spec():
    from pdd_operator.compat.manifests import find_engines
    dgd = _dgd(["--model", "m"], ["--model", "m"])
    engines = find_engines(dgd)
    services = dgd["spec"]["services"]
    assert sorted(e.pod_id for e in engines) == sorted(id(services[s]["extraPodSpec"])
                                                      for s in ("PrefillWorker", "DecodeWorker"))


def test_an_aggregated_server_with_a_computed_kv_config_is_not_reported(tmp_path, capsys):
    script = 'vllm serve Qwen/Qwen3-8B --kv-transfer-config "$(cat /etc/lmcache/kv.json)"'
    doc = workload("qwen", "server", container([script], command=["sh", "-c"]), labels_key="app.kubernetes.io/part-of")
    _, out = check(tmp_path, capsys, doc)  # the exit code when nothing is found is another change's
    assert not out["results"] and not out.get("notChecked"), out
