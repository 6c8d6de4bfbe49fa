"""Variants of the kinds of fault the tenth public-report set (tests/unit/data/public_reports_10) found, each with
negative controls: two ``kv_both`` engines of one script with nothing naming which prefills (judged both ways round:
an error only where both orientations fail, a warning naming the engine where one does), a wildcard side-channel host
on engines of one network namespace (the decode dials 0.0.0.0, the local host, where the listener bound every
interface: it passes; on separate pods it is still refused), and a side-channel port that is not in the files (a
warning that the overlap was not checked, never the default 5600 taken for it)."""

from __future__ import annotations

from tests.unit.test_turn2_variants import check, rules

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _script_pod(first: str, second: str, image: str = "vllm/vllm-openai:v0.20.0", extra_lines: str = "",
                devices: tuple[str, str] = ("0", "1")) -> dict:
    """A Pod whose one container starts two engines from a bash script (``first`` and ``second``: what follows
    ``vllm serve`` on each line), as vLLM's NIXL tests do; ``devices``: each line's ``CUDA_VISIBLE_DEVICES`` (one
    device per rank of its engine), the pod requesting them all."""
    script = (f"set -xe\n{extra_lines}"
              f"CUDA_VISIBLE_DEVICES={devices[0]} VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve {first} --port 8100 &\n"
              f"CUDA_VISIBLE_DEVICES={devices[1]} VLLM_NIXL_SIDE_CHANNEL_PORT=5659 vllm serve {second} --port 8200 &\nwait\n")
    gpus = len(set(",".join(devices).split(",")))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t", "labels": {"app": "t"}},
            "spec": {"containers": [{"name": "test", "image": image, "command": ["bash", "-c"], "args": [script],
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def _findings(out: dict, rule: str) -> list[dict]:
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- two kv_both engines whose roles nothing names ------------------------------------------------------------


def test_two_kv_both_engines_of_one_script_are_paired_and_checked(tmp_path, capsys):
    line = f"Qwen/Qwen3-0.6B --block-size 128 --kv-transfer-config '{KV}'"
    code, out = check(tmp_path, capsys, _script_pod(line, line))
    assert code == 0 and not out["notChecked"] and len(out["results"]) == 1
    assert "both ways round" in out["results"][0]["pairedBy"]


def test_a_symmetric_fault_refuses_the_pair_whichever_engine_prefills(tmp_path, capsys):
    p = f"Qwen/Qwen3-0.6B --kv-cache-dtype fp8 --kv-transfer-config '{KV}'"
    d = f"Qwen/Qwen3-0.6B --kv-cache-dtype auto --kv-transfer-config '{KV}'"
    code, out = check(tmp_path, capsys, _script_pod(p, d))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")


def test_a_direction_fault_in_both_orientations_is_an_error(tmp_path, capsys):
    # 0.13.0 asserts decode TP >= prefill TP; TP 2 against TP 2 is fine, so pair TP 2 with TP 3 (not a multiple:
    # tp-divisibility refuses both orientations) to make sure an error common to both stays one.
    p = f"Qwen/Qwen3-0.6B --tensor-parallel-size 2 --kv-transfer-config '{KV}'"
    d = f"Qwen/Qwen3-0.6B --tensor-parallel-size 3 --kv-transfer-config '{KV}'"
    code, out = check(tmp_path, capsys, _script_pod(p, d, image="vllm/vllm-openai:v0.13.0", devices=("0,1", "2,3,4")))
    assert code == 1 and "tp-divisibility" in rules(out, "error")


def test_a_fault_of_one_orientation_only_is_a_warning_naming_the_engine(tmp_path, capsys):
    # vLLM 0.13.0: decode TP must not be smaller than prefill TP (nixl_connector.py assert tp_ratio > 0); with the TP
    # 1 engine as prefill the pair runs, with the TP 2 engine as prefill it fails: the files do not say which.
    p = f"Qwen/Qwen3-0.6B --tensor-parallel-size 2 --kv-transfer-config '{KV}'"
    d = f"Qwen/Qwen3-0.6B --tensor-parallel-size 1 --kv-transfer-config '{KV}'"
    code, out = check(tmp_path, capsys, _script_pod(p, d, image="vllm/vllm-openai:v0.13.0", devices=("0,1", "2")))
    assert code == 0 and "hetero-tp-p-gt-d-unsupported" in rules(out, "warning")
    finding = _findings(out, "hetero-tp-p-gt-d-unsupported")[0]
    assert finding["message"].startswith("Only if the engine at Pod/t spec.containers[0](test) line")


def test_named_roles_are_not_judged_both_ways(tmp_path, capsys):
    kv = '{"kv_connector":"NixlConnector","kv_role":"%s"}'
    p = f"Qwen/Qwen3-0.6B --tensor-parallel-size 2 --kv-transfer-config '{kv % 'kv_producer'}'"
    d = f"Qwen/Qwen3-0.6B --tensor-parallel-size 1 --kv-transfer-config '{kv % 'kv_consumer'}'"
    code, out = check(tmp_path, capsys, _script_pod(p, d, image="vllm/vllm-openai:v0.13.0", devices=("0,1", "2")))
    assert code == 1 and "hetero-tp-p-gt-d-unsupported" in rules(out, "error")
    assert "both ways round" not in out["results"][0]["pairedBy"]


def test_three_kv_both_engines_stay_not_checked(tmp_path, capsys):
    line = f"Qwen/Qwen3-0.6B --kv-transfer-config '{KV}'"
    pod = _script_pod(line, line)
    pod["spec"]["containers"][0]["args"][0] = pod["spec"]["containers"][0]["args"][0].replace(
        "wait\n", f"CUDA_VISIBLE_DEVICES=2 VLLM_NIXL_SIDE_CHANNEL_PORT=5759 vllm serve {line} --port 8300 &\nwait\n")
    code, out = check(tmp_path, capsys, pod)
    assert code == 3 and not out["results"] and len(out["notChecked"]) == 3


# --- a wildcard side-channel host --------------------------------------------------------------------------------


def test_a_wildcard_host_in_one_network_namespace_passes(tmp_path, capsys):
    line = f"Qwen/Qwen3-0.6B --kv-transfer-config '{KV}'"
    code, out = check(tmp_path, capsys, _script_pod(line, line, extra_lines="export VLLM_NIXL_SIDE_CHANNEL_HOST=0.0.0.0\n"))
    assert code == 0 and "side-channel-host-not-routable" not in rules(out)


def test_a_wildcard_host_on_two_containers_of_one_pod_passes(tmp_path, capsys):
    def c(name: str, role: str, port: int) -> dict:
        return {"name": name, "image": "vllm/vllm-openai:v0.11.0", "command": ["vllm", "serve"],
                "args": ["meta-llama/Llama-3.1-8B-Instruct", "--port", str(port), "--kv-transfer-config",
                         f'{{"kv_connector":"NixlConnector","kv_role":"{role}"}}'],
                "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "::"},
                        {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(port + 1)}],
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "two"},
           "spec": {"containers": [c("prefill", "kv_producer", 8100), c("decode", "kv_consumer", 8200)]}}
    code, out = check(tmp_path, capsys, pod)
    assert code == 0 and "side-channel-host-not-routable" not in rules(out)


def test_a_wildcard_host_on_separate_pods_is_still_refused(tmp_path, capsys):
    from tests.unit.test_turn2_variants import pd
    docs = pd("w", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV], image="vllm/vllm-openai:v0.20.0")
    for doc in docs:
        doc["spec"]["template"]["spec"]["containers"][0]["env"][0] = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
                                                                      "value": "0.0.0.0"}
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "side-channel-host-not-routable" in rules(out, "error")


# --- a side-channel port that is not in the files -------------------------------------------------------------------


def test_ports_from_a_command_substitution_are_not_taken_for_the_default(tmp_path, capsys):
    pod = _script_pod(f"Qwen/Qwen3-0.6B --kv-transfer-config '{KV}'", f"Qwen/Qwen3-0.6B --kv-transfer-config '{KV}'")
    text = pod["spec"]["containers"][0]["args"][0]
    pod["spec"]["containers"][0]["args"][0] = ('P="$(get_next_tcp_port)"\nD="$(get_next_tcp_port)"\n'
                                               + text.replace("=5559", '="$P"').replace("=5659", '="$D"'))
    code, out = check(tmp_path, capsys, pod)
    assert code == 0 and "side-channel-port-conflict" in rules(out, "warning")
    message = _findings(out, "side-channel-port-conflict")[0]["message"]
    assert "$get_next_tcp_port" in message and "not checked" in message


def test_one_known_default_port_on_both_is_still_refused(tmp_path, capsys):
    pod = _script_pod(f"Qwen/Qwen3-0.6B --kv-transfer-config '{KV}'", f"Qwen/Qwen3-0.6B --kv-transfer-config '{KV}'")
    pod["spec"]["containers"][0]["args"][0] = pod["spec"]["containers"][0]["args"][0].replace(
        " VLLM_NIXL_SIDE_CHANNEL_PORT=5559", "").replace(" VLLM_NIXL_SIDE_CHANNEL_PORT=5659", "")
    code, out = check(tmp_path, capsys, pod)
    assert code == 1 and "side-channel-port-conflict" in rules(out, "error")


# --- the script's own P/D proxy names the roles -----------------------------------------------------------------


def _with_proxy(pod: dict, proxy_line: str) -> dict:
    pod["spec"]["containers"][0]["args"][0] = pod["spec"]["containers"][0]["args"][0].replace(
        "wait\n", proxy_line + " &\nwait\n")
    return pod


def test_a_toy_proxy_naming_the_prefiller_port_sets_the_roles(tmp_path, capsys):
    # Prefill TP 2 to decode TP 1 on 0.13.0 fails (assert tp_ratio > 0); the proxy says the TP 2 engine prefills.
    p = f"Qwen/Qwen3-0.6B --tensor-parallel-size 2 --kv-transfer-config '{KV}'"
    d = f"Qwen/Qwen3-0.6B --tensor-parallel-size 1 --kv-transfer-config '{KV}'"
    pod = _with_proxy(_script_pod(p, d, image="vllm/vllm-openai:v0.13.0", devices=("0,1", "2")),
                      'PORT=8100\npython3 "${GIT_ROOT}/tests/v1/kv_connector/nixl_integration/toy_proxy_server.py" '
                      "--port 8192 --prefiller-hosts localhost --prefiller-ports $PORT --decoder-hosts localhost "
                      "--decoder-ports 8200")
    code, out = check(tmp_path, capsys, pod)
    assert code == 1 and "hetero-tp-p-gt-d-unsupported" in rules(out, "error")
    assert "both ways round" not in out["results"][0]["pairedBy"]


def test_a_disagg_proxy_demo_naming_host_ports_sets_the_roles_the_other_way(tmp_path, capsys):
    # The same engines with the proxy sending prefills to the TP 1 engine (port 8200): the supported direction.
    p = f"Qwen/Qwen3-0.6B --tensor-parallel-size 2 --kv-transfer-config '{KV}'"
    d = f"Qwen/Qwen3-0.6B --tensor-parallel-size 1 --kv-transfer-config '{KV}'"
    pod = _with_proxy(_script_pod(p, d, image="vllm/vllm-openai:v0.13.0", devices=("0,1", "2")),
                      "python examples/online_serving/disaggregated_serving/disagg_proxy_demo.py --model "
                      "Qwen/Qwen3-0.6B --prefill localhost:8200 --decode localhost:8100")
    code, out = check(tmp_path, capsys, pod)
    assert code == 0 and "hetero-tp-p-gt-d-unsupported" not in rules(out)


def test_proxy_roles_reads_ports_and_refuses_a_port_with_both_roles():
    from pdd_operator.vllm.script import proxy_roles
    assert proxy_roles(["python3", "toy_proxy_server.py", "--port", "8192", "--prefiller-ports", "8100", "8101",
                        "--decoder-ports", "8200"]) == {8100: "prefill", 8101: "prefill", 8200: "decode"}
    assert proxy_roles(["p.py", "--prefill=h:1", "--decode", "h:1"]) == {}
    assert proxy_roles(["curl", "-X", "POST"]) == {}
