"""Reader fixes of round 28 (issue 9), each a kind with variants and controls:

- the shell reader keeps the blank tree-sitter-bash puts into the second of two expansions in a double-quoted string
  (``"$B $a"``: ``$B`` and `` $a``), so ``$a`` is read as ``a``; its unknown value then goes through ``eval`` and
  ``sh -c "$F"`` held in a variable (:meth:`pdd_operator.vllm.script._Shell.reread`), never as ``<``/``>``
  redirections that drop the word before it (vLLM's tests/v1/kv_connector/nixl_integration/run_accuracy_test.sh);
- ``p2p-nccl-http-port-missing`` runs on an unknown release (``Rule.any_release``), for an engine that registers with a
  proxy without ``http_port``: every release that ships P2pNcclConnector refuses it, the others lack the connector;
- a null field of a Kubernetes object (``env:`` with nothing under it, as llm-d-modelservice's rendered
  examples/output-pd.yaml has) is an absent one, as the apiserver reads it (:func:`pdd_operator.compat.shapes.without_nulls`),
  never an input error.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from pdd_operator.compat.shapes import shape_errors, without_nulls
from pdd_operator.vllm.expansion import ContainerEnv
from pdd_operator.vllm.script import launches
from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import check, pd, rules


def _argv(script: str) -> list[tuple[str, ...]]:
    return [launch.argv for launch in launches(script, ContainerEnv())]


# 1. placeholders through eval / sh -c ------------------------------------------------------------------------------


@pytest.mark.parametrize("script", [
    'B="vllm serve m --tensor-parallel-size 2"; F="$B $a"; eval "$F &"',  # the minimal form
    'B="vllm serve m --tensor-parallel-size 2"; a=$(get_model_args m); F="$B $a"; eval "$F &"',
    'B="vllm serve m --tensor-parallel-size 2"; F="$B\t$a"; eval "$F"',  # a tab as the blank
    'B="vllm serve m --tensor-parallel-size 2"; F="${B} ${a}"; eval "$F &"',  # braced: no blank in the node
    'B="vllm serve m --tensor-parallel-size 2"; F="$B $a"; bash -c "$F"',  # sh -c re-reads the value too
    'F="vllm serve m --tensor-parallel-size 2 $X"; sh -c "$F &"',
])
def test_an_unknown_part_survives_being_read_again(script):
    (argv,) = _argv(script)
    assert argv[:5] == ("vllm", "serve", "m", "--tensor-parallel-size", "2")
    assert len(argv) == 6 and argv[5].startswith("<unknown:") and "$" not in argv[5]


@pytest.mark.parametrize(("script", "value"), [
    ("""F="vllm serve m --kv-transfer-config '$X' --tensor-parallel-size 2"; eval "$F" """, "<unknown:X>"),
    ("""F="vllm serve m --kv-transfer-config '$X' --tensor-parallel-size 2"; sh -c "$F" """, "<unknown:X>"),
    ("""F="vllm serve m --kv-transfer-config '{\\"a\\":$X}' --tensor-parallel-size 2"; eval "$F" """,
     '{"a":<unknown:X>}'),
    # a nested eval holds its own unknowns, not the outer one's numbers
    ("""G="vllm serve m --kv-transfer-config '$Y' --tensor-parallel-size 2"; F="eval \\"\\$G\\" $X"; eval "$F" """,
     "<unknown:Y>"),
])
def test_an_unknown_part_in_single_quotes_of_the_reread_text_stays_that_unknown(script, value):
    """Single quotes expand nothing: the held variable stays literal there and is put back as the unknown (it was
    ``${__pdd_eval_0}``, a value no one wrote)."""
    (argv,) = _argv(script)
    assert argv[:5] == ("vllm", "serve", "m", "--kv-transfer-config", value), argv
    assert not any("__pdd_eval" in word for word in argv)


def test_the_blank_before_a_second_expansion_is_string_text():
    """``"$B $a"`` with both known joins them with the blank (it was dropped: ``mX``), and ``"$@ $1"``-like
    forms keep their own reading."""
    assert _argv('B="vllm serve m"; a="--port 9"; F="$B $a"; eval "$F"') == [
        ("vllm", "serve", "m", "--port", "9")]
    assert _argv('B=m; a=x; vllm serve "$B $a"') == [("vllm", "serve", "m x")]
    assert _argv('f() { vllm serve "$1 $2"; }; f m x') == [("vllm", "serve", "m x")]


def test_controls_known_values_through_eval_and_sh_c_are_unchanged():
    assert _argv('F="vllm serve m --tensor-parallel-size 2"; eval "$F &"') == [
        ("vllm", "serve", "m", "--tensor-parallel-size", "2")]
    assert _argv('vllm serve m --port 1 > /tmp/log 2>&1 &') == [("vllm", "serve", "m", "--port", "1")]
    assert _argv("sh -c 'vllm serve m --port 1 < /dev/null'") == [("vllm", "serve", "m", "--port", "1")]


def _run_accuracy(tmp_path, capsys, *, decode_tp: str = "1", model_args: str = "$(get_model_args m)") -> tuple[int, dict]:
    """The shape of run_accuracy_test.sh: BASE_CMD then FULL_CMD="$BASE_CMD $model_args", eval "$FULL_CMD &"."""
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    script = f"""#!/bin/bash
get_model_args() {{ case "$1" in *DeepSeek*) echo "--trust-remote-code";; *) echo "";; esac; }}
KV_CONFIG='{kv}'
model_args={model_args}
BASE_CMD="CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve Qwen/Qwen3-0.6B --port 8100 \\
  --tensor-parallel-size 1 --kv-transfer-config '$KV_CONFIG'"
FULL_CMD="$BASE_CMD $model_args"
eval "$FULL_CMD &"
BASE_CMD="CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5659 vllm serve Qwen/Qwen3-0.6B --port 8200 \\
  --kv-transfer-config '$KV_CONFIG'"
BASE_CMD="${{BASE_CMD}} --tensor-parallel-size {decode_tp}"
FULL_CMD="$BASE_CMD $model_args"
eval "$FULL_CMD &"
wait
"""
    return check_text(tmp_path, capsys, script, "run_accuracy_test.sh", "--vllm-version", "0.11.0")


def test_run_accuracy_test_shape_is_checked(tmp_path, capsys):
    """With ``model_args`` empty the pair is judged (it was "not checked": ``$model_args`` read as ``$$model_args``)."""
    code, out = _run_accuracy(tmp_path, capsys, model_args='""')
    assert code == 0 and not out["notChecked"], out
    assert out["results"][0]["compatible"] is True


def test_run_accuracy_test_shape_with_unknown_model_args_names_them_and_keeps_the_tp(tmp_path, capsys):
    """An unknown ``$(get_model_args ...)`` may carry flags: those rules are "not checked", naming it; the TP before
    it is still read (the word before the unknown is not dropped)."""
    code, out = _run_accuracy(tmp_path, capsys)
    assert code == 3, out
    reason = out["notChecked"][0]["reason"]
    assert "possibly set by $get_model_args," in reason and "$$" not in reason


def test_run_accuracy_test_shape_control_a_wrong_decode_tp_is_still_seen(tmp_path, capsys):
    """Control: the decode's TP read through the eval is the one judged (TP 3 on Qwen3-0.6B's 8 KV heads)."""
    code, out = _run_accuracy(tmp_path, capsys, decode_tp="3")
    assert code == 1, out


# 2. P2pNcclConnector without http_port on an unknown release -------------------------------------------------------

PROXY = {"proxy_ip": "10.0.1.1", "proxy_port": "30001"}


def _p2p_script(tmp_path, capsys, extra_p: dict, extra_d: dict, *flags: str) -> tuple[int, dict]:
    def serve(gpu, port, kv_port, role, extra):
        ktc = json.dumps({"kv_connector": "P2pNcclConnector", "kv_role": role, "kv_port": str(kv_port),
                          "kv_connector_extra_config": {"send_type": "PUT_ASYNC", **extra}})
        return (f"CUDA_VISIBLE_DEVICES={gpu} vllm serve Qwen/Qwen2.5-7B-Instruct --port {port} "
                f"--kv-transfer-config '{ktc}' &\n")
    path = tmp_path / "p2p.sh"
    path.write_text("#!/bin/bash\n" + serve(0, 20005, 21001, "kv_producer", extra_p)
                    + serve(1, 20009, 22001, "kv_consumer", extra_d) + "wait\n")
    code = main(["check", str(path), "-o", "json", *flags])
    return code, json.loads(capsys.readouterr().out)


def _errors(out: dict) -> set[str]:
    return {f["rule"] for r in out["results"] for f in r["findings"] if f["severity"] == "error"}


def test_p2p_nccl_registering_without_http_port_fails_on_an_unknown_release(tmp_path, capsys):
    code, out = _p2p_script(tmp_path, capsys, {**PROXY, "http_port": "20005"}, PROXY)
    assert code == 1 and _errors(out) == {"p2p-nccl-http-port-missing"}, out
    # the pair's own rules run too since i9-fixO (a host install judged on 0.9.2-0.23.x): warnings only beside it
    (finding,) = [f for r in out["results"] for f in r["findings"] if f["rule"] == "p2p-nccl-http-port-missing"]
    assert "Decode: P2pNcclConnector" in finding["message"] and "every release from 0.9.2 before 0.24.0" in \
        finding["message"], finding


@pytest.mark.parametrize("image", ["vllm/vllm-openai:latest", "vllm/vllm-openai:nightly"])
def test_p2p_nccl_registering_without_http_port_on_an_upstream_image_of_unknown_release(tmp_path, capsys, image):
    docs = pd("p2p", ["--port", "20003", "--kv-transfer-config", json.dumps({
        "kv_connector": "P2pNcclConnector", "kv_role": "kv_producer", "kv_port": "21001",
        "kv_connector_extra_config": {**PROXY}})],
        ["--port", "20005", "--kv-transfer-config", json.dumps({
            "kv_connector": "P2pNcclConnector", "kv_role": "kv_consumer", "kv_port": "22001",
            "kv_connector_extra_config": {**PROXY, "http_port": "20005"}})],
        model="Qwen/Qwen2.5-7B-Instruct", image=image)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "p2p-nccl-http-port-missing" in rules(out, "error"), out


@pytest.mark.parametrize(("extra_d", "flags"), [
    ({}, ()),  # no proxy keys: 0.11.1 on start it (only 0.9.2-0.11.0 read http_port unconditionally)
    ({"proxy_ip": "10.0.1.1"}, ()),  # half the proxy keys: no registration
    ({**PROXY, "http_port": "20009"}, ()),  # the fix
])
def test_controls_p2p_nccl_that_some_release_starts_stays_not_checked(tmp_path, capsys, extra_d, flags):
    code, out = _p2p_script(tmp_path, capsys, {}, extra_d, *flags)
    assert code == 3 and not _errors(out), out


def test_control_p2p_nccl_unregistered_on_a_known_release_that_starts_it_is_ok(tmp_path, capsys):
    """0.12.0 starts an engine without the proxy keys, and keeps the proxy's request ids (randomized from 0.14.0): the
    pair is judged by the P2pNccl rules (tests/unit/test_p2p_nccl_pairs.py) and passes."""
    code, out = _p2p_script(tmp_path, capsys, {}, {}, "--vllm-version", "0.12.0")
    assert code == 0 and not _errors(out), out


def test_control_p2p_nccl_without_http_port_on_a_known_old_release_is_still_the_keyerror(tmp_path, capsys):
    code, out = _p2p_script(tmp_path, capsys, {"http_port": "20005"}, {}, "--vllm-version", "0.10.1.1")
    assert code == 1 and _errors(out) == {"p2p-nccl-http-port-missing"}, out
    assert "KeyError" in out["results"][0]["findings"][0]["message"]


def test_control_p2p_nccl_of_a_fork_image_of_unknown_release_is_not_judged(tmp_path, capsys):
    docs = pd("p2p", ["--port", "20003", "--kv-transfer-config", json.dumps({
        "kv_connector": "P2pNcclConnector", "kv_role": "kv_producer", "kv_port": "21001",
        "kv_connector_extra_config": {**PROXY, "http_port": "20003"}})],
        ["--port", "20005", "--kv-transfer-config", json.dumps({
            "kv_connector": "P2pNcclConnector", "kv_role": "kv_consumer", "kv_port": "22001",
            "kv_connector_extra_config": {**PROXY}})],
        model="Qwen/Qwen2.5-7B-Instruct", image="registry.example.com/acme/vllm-p2p:latest")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and "p2p-nccl-http-port-missing" not in rules(out), out


# 3. null fields of Kubernetes objects ------------------------------------------------------------------------------

#: The shape of llm-d-modelservice's examples/output-pd.yaml (llm-d-incubation/llm-d-modelservice, rendered by its
#: generate-example-output.sh): the routing-proxy init container's ``env:`` renders with nothing under it.
OUTPUT_PD = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: pd-llm-d-modelservice-{role}
  labels:
    app.kubernetes.io/managed-by: Helm
spec:
  replicas: 1
  selector:
    matchLabels: {{llm-d.ai/inferenceServing: "true", llm-d.ai/model: facebook-opt-125m, llm-d.ai/role: {role}}}
  template:
    metadata:
      labels: {{llm-d.ai/inferenceServing: "true", llm-d.ai/model: facebook-opt-125m, llm-d.ai/role: {role}}}
    spec:
{init}      containers:
        - name: vllm
          image: ghcr.io/llm-d/llm-d:v0.2.0
          command: ["vllm", "serve"]
          args:
            - facebook/opt-125m
            - --port
            - "{port}"
            - --enforce-eager
            - --kv-transfer-config
            - '{{"kv_connector":"NixlConnector", "kv_role":"kv_both"}}'
          env:
          - name: CUDA_VISIBLE_DEVICES
            value: "0"
          - name: VLLM_NIXL_SIDE_CHANNEL_HOST
            valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}
          - name: VLLM_NIXL_SIDE_CHANNEL_PORT
            value: "5557"
          - name: EMPTY
            value:
          ports:
          - containerPort: {port}
          volumeMounts:
          resources:
            limits: {{nvidia.com/gpu: "1"}}
            requests:
"""

#: The decode's routing sidecar (its pod's port 8000; the decode engine listens on 8200).
ROUTING_PROXY = """\
      initContainers:
        - name: routing-proxy
          args: [--port=8000, --vllm-port=8200, --connector=nixlv2]
          image: ghcr.io/llm-d/llm-d-routing-sidecar:latest
          env:
          ports:
            - containerPort: 8000
          resources: {}
          restartPolicy: Always
"""


def test_llm_d_modelservice_rendered_output_with_null_env_is_checked(tmp_path, capsys):
    text = "---\n".join(OUTPUT_PD.format(role=r, port=p, init=i)
                        for r, p, i in (("decode", 8200, ROUTING_PROXY), ("prefill", 8000, "")))
    path = tmp_path / "output-pd.yaml"
    path.write_text(text)
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and not out["inputErrors"], out
    assert out["results"][0]["compatible"] is True


@pytest.mark.parametrize("field", ["env", "args", "command", "ports", "volumeMounts", "resources", "envFrom"])
def test_a_null_container_field_is_absent(field):
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": None, "annotations": None},
           "spec": {"initContainers": None, "containers": [{"name": "c", "image": "i", field: None}]}}
    read = without_nulls(doc)
    assert shape_errors(read) == [] and shape_errors(doc) == []
    assert read["spec"] == {"containers": [{"name": "c", "image": "i"}]} and read["metadata"] == {"name": "p"}


def test_controls_a_wrong_type_is_still_refused_and_null_elements_are_kept():
    doc = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "c", "args": "--port 1"}]}}
    assert shape_errors(without_nulls(doc)) == [
        "spec.containers[0].args: must be a list, not a string (Kubernetes PodSpec)"]
    listed = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "c", "args": [None, "x"]}]}}
    assert without_nulls(listed) == listed and shape_errors(listed) == []  # null element: Go reads ""


def test_control_helm_values_keep_their_nulls():
    """A HelmRelease's values: a null deletes the chart's default (Helm), so the document is kept as written."""
    doc = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
           "spec": {"values": {"decode": {"env": None}}}}
    assert without_nulls(doc) is doc
    assert without_nulls({"decode": {"env": None}}) == {"decode": {"env": None}}  # not a Kubernetes object
