"""What the helpers of session 28 noticed, fixed as kinds, with negative controls.

1. Shell scripts: a variable assigned without ``export`` is a shell variable, not in the engine's environment
   (POSIX Shell Command Language 2.9.1, 2.14 ``export``; vllm#40993, whose side-channel host never reached vLLM,
   which used ``localhost``). The engine gets exported variables (``export``, ``declare -x``, ``set -a`` /
   ``set -o allexport`` up to ``set +a``), ``NAME=value`` command prefixes, and the container's own variables the
   script reassigns (the shell marks what it imports from its environment for export, POSIX 2.5.3). A loop whose
   count is not read says "not checked" for how many engines it starts; a script's findings name its lines and hosts.
2. MultiConnector under an explicit ``--no-disable-hybrid-kv-cache-manager``: the factory checks the top-level class
   (``supports_hma(connector_cls)``, kv_connector/factory.py), and ``class MultiConnector(KVConnectorBase_V1)`` is not
   ``SupportsHMA`` in the 0.13.0-0.20.0 sdists (from 0.21.0 it is): refused there, whatever its NIXL child supports.
4. Dynamo 0.9-1.0 workers' own KV events publisher binds ``DYN_VLLM_KV_EVENT_PORT`` (20080): the port rules see it.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.expansion import ContainerEnv, unknown
from pdd_operator.vllm.script import launches
from tests.unit.cli_check import rules as _rules

from .test_script_inputs import KV_BOTH, KV_D, KV_P, _errors
from .test_script_inputs import _check as _check_script


def _check(tmp_path, capsys, text: str, name: str = "pd.sbatch") -> tuple[int, dict]:
    return _check_script(tmp_path, capsys, text, name)


# --- 1. what reaches the engine's environment ------------------------------------------------------------------------


def _two_nodes(before_prefill: str, before_decode: str, head: str = "") -> str:
    """Two srun steps on two named nodes, each after its own side-channel host line (the shape of vllm#40993)."""
    step = ("srun --nodelist={node} -N1 --container-image=vllm/vllm-openai:v0.11.0 vllm serve $MODEL --port {port} "
            "--tensor-parallel-size 4 --kv-transfer-config '{kv}' &\n")
    return ("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=4\nMODEL=meta-llama/Llama-3.1-8B-Instruct\n"
            + head + before_prefill + "\n" + step.format(node="gpu-a01", port=8100, kv=KV_P)
            + before_decode + "\n" + step.format(node="gpu-a02", port=8200, kv=KV_D) + "wait\n")


@pytest.mark.parametrize(("prefill", "decode", "head"), [
    ("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2", ""),  # vllm#40993
    ("H=10.0.0.1; VLLM_NIXL_SIDE_CHANNEL_HOST=$H", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2", ""),
    ("set -a; HF_HOME=/data; set +a; VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2",
     ""),  # assigned after set +a
    ("export VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1; export -n VLLM_NIXL_SIDE_CHANNEL_HOST", "", ""),
    ("declare -x VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1; declare +x VLLM_NIXL_SIDE_CHANNEL_HOST", "", ""),
])
def test_a_side_channel_host_the_engines_never_get_is_refused_across_two_nodes(tmp_path, capsys, prefill, decode,
                                                                                 head):
    code, out = _check(tmp_path, capsys, _two_nodes(prefill, decode, head))
    assert code == 1 and _errors(out) == {"side-channel-host-not-routable"}, out


@pytest.mark.parametrize(("prefill", "decode", "head"), [  # controls: each engine gets its node's address
    ("export VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1", "export VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2", ""),
    ("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1; export VLLM_NIXL_SIDE_CHANNEL_HOST", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2",
     ""),  # exported once: its later values reach the later engines too
    ("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2", "set -a\n"),
    ("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2", "set -o allexport\n"),
    ("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2", "set -euxa\n"),
    ("declare -x VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1", "declare -x VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2", ""),
    # exported under set -a: the attribute stays after set +a, so the later value reaches the decode too
    ("set -a; VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1; set +a", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2", ""),
])
def test_an_exported_side_channel_host_per_node_passes(tmp_path, capsys, prefill, decode, head):
    code, out = _check(tmp_path, capsys, _two_nodes(prefill, decode, head))
    assert code == 0 and not _errors(out), out


def test_a_command_prefix_reaches_that_engine_only():
    script = "H=10.0.0.1 vllm serve m --port 1\nvllm serve m --port 2\n"
    first, second = launches(script)
    assert first.env == {"H": "10.0.0.1"} and second.env == {}


def test_set_plus_a_ends_the_allexport_scope():
    (got,) = launches("set -a\nA=1\nset +o allexport\nB=2\nexport C=3\nvllm serve m\n")
    assert got.env == {"A": "1", "C": "3"}


def test_a_function_call_prefix_is_not_left_exported_after_the_call():
    script = "X=0\nf() { vllm serve m --port 1; }\nX=1 f\nvllm serve m --port 2\n"
    first, second = launches(script)
    assert first.env == {"X": "1"} and second.env == {}


def test_a_container_variable_the_script_reassigns_reaches_the_engine():
    # a variable imported from the environment is exported: NAME=value alone changes the engine's NAME
    env = ContainerEnv(values={"VLLM_NIXL_SIDE_CHANNEL_PORT": "5600", "OTHER": "x"})
    (got,) = launches("VLLM_NIXL_SIDE_CHANNEL_PORT=5700\nOTHER=x\nvllm serve m\n", env)
    assert got.env == {"VLLM_NIXL_SIDE_CHANNEL_PORT": "5700"}  # OTHER kept its value: nothing beyond the env
    # one an unread envFrom source may define: whether the engine sees the new value is not known
    (got,) = launches("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1\nvllm serve m\n",
                      ContainerEnv(sources=(("ConfigMap nixl", "VLLM_"),)))
    assert got.env == {"VLLM_NIXL_SIDE_CHANNEL_HOST": unknown("VLLM_NIXL_SIDE_CHANNEL_HOST")}
    (got,) = launches("VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1\nvllm serve m\n")  # control: in no environment
    assert got.env == {}


# --- 1. how many engines a loop starts ---------------------------------------------------------------------------------


def _loop(words: str, port: str = "$((8100 + i))", side: str = "$((5559 + i))") -> str:
    """Prefill engines in a loop over ``words`` (the shape of vLLM's run_accuracy_test.sh), one decode after it."""
    return f"""#!/bin/bash
pip install vllm==0.11.0
MODEL=Qwen/Qwen3-0.6B
for i in {words}; do
  CUDA_VISIBLE_DEVICES=$i VLLM_NIXL_SIDE_CHANNEL_PORT={side} vllm serve $MODEL --port {port} \\
    --kv-transfer-config '{KV_P}' &
done
CUDA_VISIBLE_DEVICES=7 VLLM_NIXL_SIDE_CHANNEL_PORT=5700 vllm serve $MODEL --port 8200 --kv-transfer-config '{KV_D}' &
wait
"""


@pytest.mark.parametrize("words", [
    "$(seq 0 $((NUM_PREFILL_INSTANCES-1)))", "$(seq $N)", "{1..$N}", "$PREFILL_GPUS", "$(nvidia-smi -L | cut -c5)",
])
def test_a_loop_whose_count_is_not_read_says_not_checked_for_how_many_engines(tmp_path, capsys, words):
    code, out = _check(tmp_path, capsys, _loop(words), "run.sh")
    assert code == 3 and not _errors(out), out
    (note,) = [s for s in out["notChecked"] if "number of engines it starts is not known" in s["reason"]]
    assert note["object"].endswith("(shell script) line 5") and "for loop at line 4" in note["reason"], note
    assert out["results"], out  # the one engine read is still judged against the decode


@pytest.mark.parametrize("loop", [
    "i=0\nwhile [ $i -lt 2 ]; do\n  VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve m --port 8100 "
    "--kv-transfer-config '{kv}' &\n  i=$((i+1))\ndone",
    "for ((i=0; i<2; i++)); do\n  VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve m --port 8100 --kv-transfer-config '{kv}' &\ndone",
])
def test_an_engine_in_a_while_or_c_style_loop_says_not_checked_for_its_count(tmp_path, capsys, loop):
    text = ("#!/bin/bash\n" + loop.format(kv=KV_P)
            + f"\nCUDA_VISIBLE_DEVICES=7 vllm serve m --port 8200 --kv-transfer-config '{KV_D}' &\n")
    code, out = _check(tmp_path, capsys, text, "run.sh")
    assert code == 3 and any("is read once" in s["reason"] for s in out["notChecked"]), out


@pytest.mark.parametrize("words", ["0 1", "{0..1}", "$(seq 0 1)", "$(seq 2)", "$(seq 0 $((N - 1)))"])
def test_a_loop_of_known_count_is_read_pass_by_pass(tmp_path, capsys, words):  # controls: every engine is judged
    text = _loop(words).replace("MODEL=Qwen", "N=2\nMODEL=Qwen")
    code, out = _check(tmp_path, capsys, text, "run.sh")
    assert code == 0 and not out["notChecked"] and len(out["results"]) == 2, out


def test_the_kubernetes_reader_says_so_for_a_container_s_loop_too():
    from pdd_operator.compat.manifests import Unreadable, scan
    script = (f"for i in $(seq 1 $N); do vllm serve m --port $((8100+i)) --kv-transfer-config '{KV_P}' & done; "
              f"vllm serve m --port 8200 --kv-transfer-config '{KV_D}' & wait")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pd"},
           "spec": {"containers": [{"name": "e", "image": "vllm/vllm-openai:v0.11.0", "command": ["bash", "-c", script]}]}}
    engines, cannot = scan(pod)
    assert len(engines) == 2 and [u.reason.split(":")[0] for u in cannot if isinstance(u, Unreadable)] == [
        "the number of engines it starts is not known"], (engines, cannot)


# --- 1. a script's findings speak of its lines and hosts ----------------------------------------------------------------


def test_a_script_s_findings_name_its_lines_hosts_and_settings_not_pods_or_containers(tmp_path, capsys):
    text = f"""#!/bin/bash
pip install vllm==0.10.1
CUDA_VISIBLE_DEVICES=0 vllm serve m --port 8100 --tensor-parallel-size 2 --kv-transfer-config '{KV_P}' &
CUDA_VISIBLE_DEVICES=1 vllm serve m --port 8100 --kv-transfer-config '{KV_D}' &
"""
    code, out = _check(tmp_path, capsys, text, "one.sh")
    assert code == 1 and {"parallelism-gpu-count", "side-channel-port-conflict"} <= _errors(out)
    (result,) = out["results"]
    assert result["pairedBy"] == "the script starts both on one host", result
    # one HTTP --port: vLLM 0.10.1's HTTP socket sets SO_REUSEPORT, so both bind it (pdd_operator.vllm.http_socket)
    assert {f["severity"] for f in result["findings"] if f["rule"] == "listener-port-conflict"} == {"warning"}
    words = json.dumps([{k: f[k] for k in ("fields", "message", "fix")} for f in result["findings"]])
    for kubernetes in ("pod ", "pods", "container's", "Script/", ".env[", ".image", "network namespace"):
        assert kubernetes not in words, (kubernetes, words)
    assert "one.sh (shell script) on the host it runs on: VLLM_NIXL_SIDE_CHANNEL_PORT" in words, words
    assert "whatever GPUs its host holds" in words and "CUDA_VISIBLE_DEVICES on its line of the script" in words


def test_two_nodes_of_one_script_are_paired_by_the_script_s_name(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _two_nodes("", ""))
    assert out["results"][0]["pairedBy"] == "the script " + str(tmp_path / "pd.sbatch") + " starts both", out


def test_an_unknown_release_in_a_script_names_the_pin_it_lacks(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _loop("0 1").replace("pip install vllm==0.11.0\n", ""), "run.sh")
    finding = next(f for f in out["results"][0]["findings"] if f["rule"] == "vllm-version-unknown")
    assert "cannot be read from the script (a pip install vllm==X pin" in finding["message"], finding
    assert finding["fields"] == [f"{tmp_path / 'run.sh'} (shell script) on the host it runs on: the vLLM install "
                                 "(pip install vllm==X, srun --container-image)"], finding


# --- 4. Dynamo's KV events publisher port ------------------------------------------------------------------------------


def _dynamo(tag: str, decode_flag: tuple[str, ...] = (), node: str | None = "gpu-1", decode_env: tuple = ()) -> dict:
    """A Dynamo graph of two hostNetwork workers (prefill: --is-prefill-worker, its own side-channel ports)."""
    def component(name, flag, side, env=()):
        spec = {"hostNetwork": True, "containers": [{
            "name": "main", "image": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{tag}", "command": ["python3"],
            # before Dynamo 1.0 --kv-transfer-config needs --connector none beside it (dynamo-connector-flag, set 67)
            "args": ["-m", "dynamo.vllm", "--model", "Qwen/Qwen3-0.6B", *flag,
                     *(("--connector", "none") if tag.startswith("0.") else ()), "--kv-transfer-config", KV_BOTH],
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": side}, *env]}]}
        if node:
            spec["nodeName"] = node
        return {"name": name, "type": name, "podTemplate": {"spec": spec}}
    return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"components": [component("prefill", ("--is-prefill-worker",), "5600"),
                                    component("decode", decode_flag, "5700", decode_env)]}}


def _yaml_check(tmp_path, capsys, doc: dict) -> tuple[int, dict]:
    import yaml
    return _check(tmp_path, capsys, yaml.safe_dump(doc), "g.yaml")


@pytest.mark.parametrize("tag", ["0.9.1", "1.0.1"])
def test_two_dynamo_workers_publishing_kv_events_on_one_node_share_port_20080(tmp_path, capsys, tag):
    # 0.9.x/1.0.x: a worker not flagged as decode publishes KV events on DYN_VLLM_KV_EVENT_PORT (20080)
    code, out = _yaml_check(tmp_path, capsys, _dynamo(tag))
    assert code == 1 and _errors(out) == {"listener-port-conflict"}, out
    assert "20080" in out["results"][0]["findings"][0]["message"], out


@pytest.mark.parametrize(("tag", "decode_flag", "node", "decode_env"), [
    ("0.9.1", ("--is-decode-worker",), "gpu-1", ()),          # a decode worker publishes nothing
    ("0.9.1", (), "gpu-1", ({"name": "DYN_VLLM_KV_EVENT_PORT", "value": "20090"},)),  # its own port
    ("0.9.1", (), None, ()),                                   # the scheduler decides: not said by this rule
    ("1.1.0", (), "gpu-1", ()),                                # 1.1.0 adds no KV events
])
def test_dynamo_workers_whose_kv_event_ports_cannot_meet_pass_the_listener_rule(tmp_path, capsys, tag, decode_flag,
                                                                                 node, decode_env):
    _, out = _yaml_check(tmp_path, capsys, _dynamo(tag, decode_flag, node, decode_env))
    assert "listener-port-conflict" not in _errors(out), out


def test_the_publisher_ports_per_dp_rank():
    from pdd_operator.compat.dynamo_engine_defaults import added_kv_events_ports
    assert added_kv_events_ports({}, None) == (20080,)
    assert added_kv_events_ports({"DYN_VLLM_KV_EVENT_PORT": "20100"}, 2) == (20100, 20099)
    assert added_kv_events_ports({"DYN_VLLM_KV_EVENT_PORT": unknown("DYN_VLLM_KV_EVENT_PORT")}, 1) == ()


# --- 2. MultiConnector is not SupportsHMA before 0.21.0 ---------------------------------------------------------------

HMA = "--no-disable-hybrid-kv-cache-manager"
MULTI = json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
    "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                   {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
                    "kv_connector_extra_config": {"num_cpu_blocks": 1000}}]}})


def _multi(version: str, extra: list[str], kv: str = MULTI):
    from tests.unit.test_turn2_variants import pd
    return pd("m", ["--kv-transfer-config", kv, *extra], ["--kv-transfer-config", kv, *extra],
              model="Qwen/Qwen3-8B", image=f"vllm/vllm-openai:v{version}")


@pytest.mark.parametrize("version", ["0.13.0", "0.16.0", "0.18.0", "0.19.1", "0.20.0"])
def test_explicit_hma_with_multiconnector_before_021_is_refused(tmp_path, capsys, version):
    from tests.unit.test_turn2_variants import check
    code, out = check(tmp_path, capsys, *_multi(version, [HMA]))
    assert code == 1 and "hma-explicit-forced-off" in _rules(out, "error"), out
    message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "hma-explicit-forced-off")
    assert "MultiConnector does not support HMA" in message, message


def test_explicit_hma_with_multiconnector_of_an_unread_patch_release_is_a_warning(tmp_path, capsys):
    from tests.unit.test_turn2_variants import check
    _, out = check(tmp_path, capsys, *_multi("0.20.2", [HMA]))
    assert "hma-explicit-forced-off" in _rules(out, "warning") and "hma-explicit-forced-off" not in _rules(
        out, "error"), out


@pytest.mark.parametrize(("version", "extra"), [
    ("0.21.0", [HMA]),                                   # SupportsHMA from 0.21.0 (its children: not judged here)
    ("0.12.0", [HMA]),                                   # 0.12 overrides the flag silently
    ("0.18.0", ["--disable-hybrid-kv-cache-manager"]),   # HMA off, as the factory asks
    ("0.18.0", []),                                      # the connector turns HMA off by default
])
def test_multiconnector_where_the_factory_accepts_is_no_finding(tmp_path, capsys, version, extra):
    from tests.unit.test_turn2_variants import check
    _, out = check(tmp_path, capsys, *_multi(version, extra))
    assert "hma-explicit-forced-off" not in _rules(out), out


def test_plain_nixl_on_018_with_explicit_hma_stays_accepted(tmp_path, capsys):  # control: only the wrapper refuses
    from tests.unit.test_turn2_variants import check
    _, out = check(tmp_path, capsys, *_multi("0.18.0", [HMA], kv='{"kv_connector":"NixlConnector","kv_role":"kv_both"}'))
    assert "hma-explicit-forced-off" not in _rules(out), out


# --- 3. Dynamo's vllm-runtime:1.1.0 ships vLLM 0.19.0; its -dev.1 preview 0.17.1 ----------------------------------------


@pytest.mark.parametrize(("tag", "vllm", "named"), [
    ("1.1.0", "0.19.0", "docs.nvidia.com/dynamo/v1.1.0/resources/release-artifacts"),  # the release's own page
    ("1.1.0-cuda13", "0.19.0", "docs.nvidia.com/dynamo/v1.1.0/resources/release-artifacts"),
    ("1.1.0-dev.1", "0.17.1", "Pre-Release Artifacts > v1.1.0-dev.1"),  # what vllm#41814's 0.17.1 matches
    ("1.1.1", "0.19.0", "support-matrix"),
])
def test_dynamo_11_images_give_the_vllm_their_own_release_pages_name(tag, vllm, named):
    from pdd_operator.vllm.versions import parse_version, version_from_image, wrapped_vllm_version
    image = f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{tag}"
    assert version_from_image(image) == parse_version(vllm)
    assert named in wrapped_vllm_version(image)[1]


def test_a_kv_event_port_an_unread_envfrom_may_set_is_not_assumed_to_be_20080(tmp_path, capsys):
    doc = _dynamo("0.9.1")
    for component in doc["spec"]["components"]:
        component["podTemplate"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "worker-env"}}]
    _, out = _yaml_check(tmp_path, capsys, doc)
    assert "listener-port-conflict" not in _errors(out), out
