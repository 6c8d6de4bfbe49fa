"""llm-d-modelservice Helm values read as the engines the chart renders (:mod:`pdd_operator.compat.llmd_values`).

The values are shaped like the chart's examples (llm-d-incubation/llm-d-modelservice examples/values-pd.yaml: one
``vllm`` container per role, ``modelCommand: vllmServe``, NixlConnector ``kv_both`` in ``args``, the side-channel host
from the pod IP) and the llm-d guides' ``guides/pd-disaggregation/ms-pd/values.yaml`` (``parallelism.tensor`` per role,
``routing.proxy`` with ``connector: nixlv2``, ``--block-size 128``). What the chart renders from them is read in its
templates/_helpers.tpl (``vllmServeModelCommand``, ``vllmPort``, ``routingProxy``, ``resources``).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.compat.llmd_values import is_llmd_values, render
from tests.unit.cli_check import check_text

KV = '{"kv_connector":"NixlConnector", "kv_role":"kv_both"}'
HOST = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def _values(image: str = "vllm/vllm-openai:v0.11.0", prefill_tp: int = 1, decode_tp: int = 1,
            prefill_args: tuple[str, ...] = (), decode_args: tuple[str, ...] = ()) -> dict:
    def role(tp: int, args: tuple[str, ...], port: int) -> dict:
        return {"create": True, "replicas": 1, "parallelism": {"tensor": tp},
                "containers": [{"name": "vllm", "image": image, "modelCommand": "vllmServe",
                                "args": ["--block-size", "128", "--kv-transfer-config", KV, *args],
                                "env": [HOST, {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "5600"}],
                                "ports": [{"containerPort": port, "name": "vllm"}, {"containerPort": 5600}],
                                "mountModelVolume": True}]}
    return {"multinode": False,
            "modelArtifacts": {"uri": "hf://Qwen/Qwen3-8B", "name": "Qwen/Qwen3-8B", "size": "40Gi"},
            "routing": {"servicePort": 8000, "proxy": {"image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.4.0",
                                                       "connector": "nixlv2", "secure": False}},
            "decode": role(decode_tp, decode_args, 8200), "prefill": role(prefill_tp, prefill_args, 8000)}


def _check(tmp_path, capsys, values: dict, name: str = "values.yaml") -> tuple[int, dict]:
    return check_text(tmp_path, capsys, yaml.safe_dump(values), name)


def _findings(out: dict, severity: str = "error") -> dict[str, dict]:
    return {f["rule"]: f for r in out["results"] for f in r["findings"] if f["severity"] == severity}


# --- what the chart renders --------------------------------------------------------------------------------------------

def test_the_guide_shape_renders_the_chart_s_command_port_tp_and_gpus():
    docs, cannot = render(_values(decode_tp=4))
    assert not cannot
    pods = {role: doc["spec"]["template"]["spec"] for role, doc, _ in docs}
    decode = pods["decode"]["containers"][0]
    assert decode["command"] == ["vllm", "serve"]
    assert decode["args"][:7] == ["Qwen/Qwen3-8B", "--port", "8200", "--tensor-parallel-size", "4",
                                  "--served-model-name", "Qwen/Qwen3-8B"]
    assert decode["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert pods["prefill"]["containers"][0]["args"][1:3] == ["--port", "8000"]  # prefill: routing.servicePort
    assert "--tensor-parallel-size" not in pods["prefill"]["containers"][0]["args"]  # TP 1 adds no flag
    proxy = pods["decode"]["initContainers"][0]
    assert proxy["restartPolicy"] == "Always" and proxy["ports"] == [{"containerPort": 8000}]
    assert "initContainers" not in pods["prefill"]


def test_the_chart_s_own_example_renders_as_the_chart_rendered_it():
    # public_reports_12: examples/values-pd.yaml and examples/output-pd.yaml of llm-d-incubation/llm-d-modelservice
    # (the chart's rendering of those values, helm template), each as stored in that set
    data = Path(__file__).parent / "data" / "public_reports_12" / "inputs"
    values = yaml.safe_load((data / "llmd-ms-values-pd-opt125m.yaml").read_text())
    rendered = {d["metadata"]["name"].rsplit("-", 1)[1]: d["spec"]["template"]["spec"]
                for d in yaml.safe_load_all((data / "llmd-ms-output-pd-opt125m.yaml").read_text())
                if d and d.get("kind") == "Deployment"}
    ours = {role: doc["spec"]["template"]["spec"] for role, doc, _ in render(values)[0]}
    assert set(ours) == set(rendered) == {"prefill", "decode"}
    for role, pod in ours.items():
        mine, chart = pod["containers"][0], rendered[role]["containers"][0]
        assert (mine["command"], mine["args"]) == (chart["command"], chart["args"]), role
        assert [e["name"] for e in mine["env"]] == [e["name"] for e in chart["env"]], role
        assert mine["resources"]["limits"]["nvidia.com/gpu"] == str(chart["resources"]["limits"]["nvidia.com/gpu"])
    mine, chart = ours["decode"]["initContainers"][0], rendered["decode"]["initContainers"][0]
    assert mine["restartPolicy"] == chart["restartPolicy"] == "Always" and mine["ports"] == chart["ports"]


def test_image_default_puts_model_first_and_custom_keeps_the_command():
    values = _values()
    values["decode"]["containers"][0]["modelCommand"] = "imageDefault"
    values["prefill"]["containers"][0].update(modelCommand="custom", command=["vllm", "serve", "Qwen/Qwen3-8B"],
                                              args=["--kv-transfer-config", KV])
    pods = {role: doc["spec"]["template"]["spec"]["containers"][0] for role, doc, _ in render(values)[0]}
    assert "command" not in pods["decode"] and pods["decode"]["args"][:2] == ["--model", "Qwen/Qwen3-8B"]
    assert pods["prefill"]["command"] == ["vllm", "serve", "Qwen/Qwen3-8B"]
    assert pods["prefill"]["args"] == ["--kv-transfer-config", KV]


def test_the_chart_s_default_uri_is_the_model_name():
    values = _values()
    del values["modelArtifacts"]["uri"]  # values.yaml: uri "hf://{{ .Values.modelArtifacts.name }}" (#74)
    assert render(values)[0][0][1]["spec"]["template"]["spec"]["containers"][0]["args"][0] == "Qwen/Qwen3-8B"


def test_only_chart_values_are_taken_for_llm_d_values():
    assert is_llmd_values(_values())
    assert not is_llmd_values({"decode": {"containers": []}})  # no chart key
    assert not is_llmd_values({**_values(), "kind": "ConfigMap"})


# --- valid and faulty values -------------------------------------------------------------------------------------------

def test_the_guide_shape_is_read_and_valid(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _values(decode_tp=4))
    assert code == 0 and not _findings(out) and len(out["results"]) == 1 and not out["notChecked"], out
    assert out["results"][0]["vllmVersion"] == "0.11.0"
    assert out["results"][0]["pairedBy"] == "both roles are in one object"


def test_prefill_tp_above_decode_tp_on_an_old_image_is_refused_on_the_values_keys(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _values(prefill_tp=2, decode_tp=1))
    found = _findings(out)
    assert code == 1 and "hetero-tp-p-gt-d-unsupported" in found, out
    fields = found["hetero-tp-p-gt-d-unsupported"]["fields"]
    assert "prefill.parallelism.tensor" in fields and "decode.parallelism.tensor" in fields, fields
    assert not any("spec.template" in f for f in fields), fields
    code, out = _check(tmp_path, capsys, _values("vllm/vllm-openai:v0.14.0", prefill_tp=2), "new.yaml")
    assert "hetero-tp-p-gt-d-unsupported" not in _findings(out), out  # control: supported from 0.14.0


def test_a_decode_block_size_that_is_no_multiple_of_the_prefill_one_is_refused(tmp_path, capsys):
    # the last --block-size wins; 0.11.0 refuses any two block sizes, later releases a decode one below prefill's
    code, out = _check(tmp_path, capsys, _values(decode_args=("--block-size", "16")))
    assert code == 1 and "block-size-hetero-unsupported" in _findings(out), out
    assert "decode.containers[0].args" in _findings(out)["block-size-hetero-unsupported"]["fields"], out
    code, out = _check(tmp_path, capsys, _values("vllm/vllm-openai:v0.20.0", decode_args=("--block-size", "16")), "new.yaml")
    assert code == 1 and set(_findings(out)) == {"block-size-direction"}, out
    code, out = _check(tmp_path, capsys, _values(prefill_args=("--block-size", "64"), decode_args=("--block-size", "64")),
                       "same.yaml")
    assert code == 0 and not _findings(out), out  # control: equal block sizes other than the chart-free default


def test_a_kv_cache_dtype_on_one_role_only_is_refused(tmp_path, capsys):
    llm_d = "ghcr.io/llm-d/llm-d-cuda:v0.4.0"  # the guides' image: only the chart's command makes it an engine
    code, out = _check(tmp_path, capsys, _values(llm_d, prefill_args=("--kv-cache-dtype", "fp8")))
    assert code == 1 and set(_findings(out)) == {"kv-cache-dtype-mismatch"}, out
    fix = _findings(out)["kv-cache-dtype-mismatch"]["fix"]
    assert "prefill.containers[] and decode.containers[]" in fix and "container " not in fix, fix
    code, out = _check(tmp_path, capsys, _values(llm_d, prefill_args=("--kv-cache-dtype", "fp8"),
                                                 decode_args=("--kv-cache-dtype", "fp8")), "both.yaml")
    assert code == 0 and not _findings(out), out  # control: the same dtype on both


def test_a_decode_engine_on_the_routing_proxy_s_port_is_refused(tmp_path, capsys):
    # the chart's --port 8200 comes first; the args' --port 8000 wins and meets the routing proxy on servicePort 8000
    code, out = _check(tmp_path, capsys, _values(decode_args=("--port", "8000")))
    assert code == 1 and "pod-port-conflict" in _findings(out), out
    values = _values(decode_args=("--port", "8000"))
    values["routing"]["proxy"]["enabled"] = False  # control: no proxy, the engine serves servicePort itself
    code, out = _check(tmp_path, capsys, values, "noproxy.yaml")
    assert "pod-port-conflict" not in _findings(out), out
    values = _values()
    values["routing"]["proxy"]["targetPort"] = 8000  # the chart itself puts the engine on the proxy's port
    code, out = _check(tmp_path, capsys, values, "target.yaml")
    assert code == 1 and "pod-port-conflict" in _findings(out), out


# --- what is not read: "not checked, because ..." ----------------------------------------------------------------------

@pytest.mark.parametrize("change, key", [
    (lambda v: v.update(multinode=True), "multinode"),
    (lambda v: v["decode"]["parallelism"].update(data=2), "decode.parallelism"),
    (lambda v: v["prefill"]["containers"][0]["env"].append({"name": "X", "value": "{{ .Values.x }}"}),
     "prefill.containers[0]"),
    (lambda v: v.update(requester={"enable": True}), "requester.enable"),
    (lambda v: v["prefill"]["containers"][0].update(modelCommand="imageDefault", image="ghcr.io/llm-d/llm-d-cuda:v0.4.0"),
     "prefill.containers[0]"),  # llm-d's image: its entrypoint is not known here
    (lambda v: v["prefill"]["containers"][0].update(modelCommand="custom"), "prefill.containers[0]"),  # no command
    (lambda v: v["modelArtifacts"].update(uri="oci://registry/model:1"), "prefill.containers[0]"),
])
def test_parts_the_chart_renders_in_ways_not_read_are_not_checked(tmp_path, capsys, change, key):
    values = copy.deepcopy(_values(prefill_tp=2))  # a pair refused if it were read: no silent pass, no refusal
    change(values)
    code, out = _check(tmp_path, capsys, values)
    assert code == 3 and not _findings(out), out
    assert any(n["object"] == f"llm-d-modelservice values {key}" and n["reason"].startswith("not checked, because")
               for n in out["notChecked"]), out


def test_values_without_a_kv_connector_are_nothing_to_check(tmp_path, capsys):
    values = _values()
    for role in ("prefill", "decode"):
        values[role]["containers"][0]["args"] = ["--block-size", "128"]
    values["prefill"]["create"] = False  # one serving role: an aggregated service (both roles: set 124's kind)
    code, out = _check(tmp_path, capsys, values)
    assert code == 4 and not out["results"] and not out["notChecked"], out


def test_two_values_files_checked_together_are_not_cross_paired(tmp_path, capsys):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    for path, tp in ((a, 1), (b, 2)):  # two releases of one model: the guides' shared labels on both
        values = _values(decode_tp=tp)
        values["modelArtifacts"]["labels"] = {"llm-d.ai/inference-serving": "true", "llm-d.ai/model": "qwen3-8b"}
        path.write_text(yaml.safe_dump(values))
    code = main(["check", str(a), str(b), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and len(out["results"]) == 2, out
    assert all(r["pairedBy"] == "both roles are in one object" for r in out["results"]), out
