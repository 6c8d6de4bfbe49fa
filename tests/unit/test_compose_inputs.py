"""Docker Compose files that run P/D vLLM engines are read as engines (issue 9), by
:mod:`pdd_operator.compat.compose_inputs`.

The files below are written in the shapes of public ones, not copied:

- the vllm/vllm-openai image's Compose shape of vLLM's docs and many tutorials: ``command`` as a folded string of
  engine flags (arguments to the image's ``vllm serve`` entrypoint), ``deploy.resources.reservations.devices`` with
  ``capabilities: [gpu]`` and ``device_ids``, ``environment`` as a ``NAME=value`` list, ``ipc: host``, ``ports``;
- bhajian/disaggregated-serving's Dynamo Compose files (``04-disaggregated-vllm/docker/node-a.yaml`` / ``node-b.yaml``
  at a6c1adc / 69f01a8, held-out set 47; ``deployments/compose/node-b.yaml`` at 6dc75e6): one file per host,
  ``network_mode: host``, ``gpus: all``, ``entrypoint: [bash, -c]`` with the script in ``command``, or ``entrypoint``
  as a list whose ``python3 -c`` wrapper execs ``python3 -m dynamo.vllm ...``, ``x-`` anchors merged into
  ``environment``, ``${NODE_A_IP}`` values from an ``--env-file`` not published.

Without the reader each of them was "not checked" as a whole ("Compose file (services)", exit 3); the one-change
faults below are refused for the rule vLLM's code fails on, the valid ones pass, and a value from outside the file
stays "not checked", never an error and never a pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdd_operator.cli import main
from pdd_operator.compat.compose_inputs import _gpus, _memlock, compose_engines, interpolate

SET_47 = Path(__file__).parent / "data" / "public_reports_47" / "inputs" / "bhajian-nemotron-ultra-compose-v0260.yaml"


def _service(role: str, flags: str, *, image: str = "vllm/vllm-openai:v0.11.0", gpu: str = "0",
             extra: str = "") -> str:
    kv = "kv_producer" if role == "prefill" else "kv_consumer"
    return f"""  {role}:
    image: {image}
    ipc: host
    ports: ["{8100 if role == 'prefill' else 8200}:8000"]
    environment:
      - HUGGING_FACE_HUB_TOKEN=${{HUGGING_FACE_HUB_TOKEN}}
      - VLLM_NIXL_SIDE_CHANNEL_HOST={role}
      - VLLM_NIXL_SIDE_CHANNEL_PORT=5600
    command: >
      --model Qwen/Qwen2.5-7B-Instruct {flags}
      --kv-transfer-config '{{"kv_connector":"NixlConnector","kv_role":"{kv}"}}'
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: ["{gpu}"]
              capabilities: [gpu]
{extra}"""


def _pair(prefill: str = "--block-size 16 --tensor-parallel-size 1", decode: str | None = None, **kw) -> str:
    return "services:\n" + _service("prefill", prefill) + _service("decode", prefill if decode is None else decode,
                                                                  gpu="1", **kw)


def _check(tmp_path, capsys, *texts: str) -> tuple[int, dict]:
    paths = []
    for i, text in enumerate(texts):
        path = tmp_path / f"compose-{i}.yml"
        path.write_text(text)
        paths.append(str(path))
    code = main(["check", *paths, "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def _rules(out: dict, severity: str = "error") -> set[str]:
    return {f["rule"] for r in out["results"] for f in r["findings"] if f["severity"] == severity}


# --- the vllm-openai image's shape: flags in command, GPUs by device_ids, a bridge network ----------------------------


def test_valid_pair_passes_and_names_services(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _pair())
    assert code == 0, out
    assert not out["notChecked"]
    (result,) = out["results"]
    assert result["compatible"] and result["vllmVersion"] == "0.11.0"
    assert "services.prefill.command" in result["object"] and "services.decode.command" in result["object"]


@pytest.mark.parametrize(("decode", "rule"), [
    ("--block-size 32 --tensor-parallel-size 1", "block-size-hetero-unsupported"),
    ("--block-size 16 --tensor-parallel-size 1 --kv-cache-dtype fp8", "kv-cache-dtype-mismatch"),
    ("--block-size 16 --tensor-parallel-size 2", "parallelism-gpu-count"),  # one device_id for two TP ranks
])
def test_one_change_faults_are_refused(tmp_path, capsys, decode, rule):
    code, out = _check(tmp_path, capsys, _pair(decode=decode))
    assert code == 1
    assert rule in _rules(out), out


def test_device_ids_count_the_gpus(tmp_path, capsys):
    text = _pair(decode="--block-size 16 --tensor-parallel-size 2").replace('device_ids: ["1"]', 'device_ids: ["1", "2"]')
    code, out = _check(tmp_path, capsys, text)
    assert code == 0, out


def test_image_tag_gives_the_version(tmp_path, capsys):
    text = "services:\n" + _service("prefill", "--block-size 16") + _service(
        "decode", "--block-size 16", image="vllm/vllm-openai:v0.10.1", gpu="1")
    code, out = _check(tmp_path, capsys, text)
    # an error: the 0.10.1 decode decodes the 0.11.0 prefill's NixlAgentMetadata and requires block_len, which 0.11.0
    # renamed block_lens (pdd_operator.vllm.nixl_handshake_wire)
    assert "vllm-version-mismatch" in _rules(out, "error"), out


def test_list_and_string_commands_read_alike(tmp_path, capsys):
    listed = _pair(decode="--block-size 32").replace(
        """command: >
      --model Qwen/Qwen2.5-7B-Instruct --block-size 32
      --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'""",
        """command: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--block-size", "32",
              "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}']""")
    assert '"--block-size", "32"' in listed
    code, out = _check(tmp_path, capsys, listed)
    assert "block-size-hetero-unsupported" in _rules(out)


def test_entrypoint_and_command_join_as_compose_does(tmp_path, capsys):
    """``entrypoint: [vllm, serve]`` + ``command`` flags: one argv, as Docker runs ENTRYPOINT + CMD."""
    text = _pair(decode="--block-size 32").replace(
        "    command: >\n      --model Qwen/Qwen2.5-7B-Instruct --block-size 32",
        "    entrypoint: [vllm, serve]\n    command: >\n      --model Qwen/Qwen2.5-7B-Instruct --block-size 32")
    code, out = _check(tmp_path, capsys, text.replace("vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.11.0", 1))
    assert "block-size-hetero-unsupported" in _rules(out)


# --- interpolation ---------------------------------------------------------------------------------------------------


def test_unresolved_variable_is_not_checked_never_an_error(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _pair(decode="--block-size ${BLOCK_SIZE} --tensor-parallel-size 1"))
    assert code == 3, out
    assert not _rules(out)
    assert any("$BLOCK_SIZE" in s["reason"] and "block-size-hetero-unsupported" in s["reason"]
               for s in out["notChecked"])


def test_variable_default_is_read(tmp_path, capsys):
    for form in ("${BLOCK_SIZE:-32}", "${BLOCK_SIZE-32}"):
        code, out = _check(tmp_path, capsys, _pair(decode=f"--block-size {form} --tensor-parallel-size 1"))
        assert "block-size-hetero-unsupported" in _rules(out), form


def test_interpolate():
    unknown: set[str] = set()
    assert interpolate("a ${X:-1} ${Y-2} $$HOME $$(hostname -i) ${Z} $W", unknown) == "a 1 2 $$HOME $$(hostname -i) $(Z) $(W)"
    assert unknown == {"Z", "W"}
    unknown = set()
    assert interpolate("${A:?need A} ${B:+x}", unknown) == "$(A) $(B)"
    assert unknown == {"A", "B"}


def test_side_channel_host_from_env_file_is_unknown(tmp_path, capsys):
    """``VLLM_NIXL_SIDE_CHANNEL_HOST: ${NODE_A_IP}`` (set 47's node-a): the address is not in the file, so no rule
    that reads it refuses it and none passes it in silence."""
    text = _pair().replace("VLLM_NIXL_SIDE_CHANNEL_HOST=prefill", "VLLM_NIXL_SIDE_CHANNEL_HOST=${NODE_A_IP}")
    code, out = _check(tmp_path, capsys, text)
    assert "side-channel-host-not-routable" not in _rules(out)
    text = _pair().replace("      - VLLM_NIXL_SIDE_CHANNEL_HOST=prefill\n", "")
    code, out = _check(tmp_path, capsys, text)  # unset: vLLM's localhost, which another container cannot dial
    assert "side-channel-host-not-routable" in _rules(out)


# --- host networking and hosts ---------------------------------------------------------------------------------------


def _host_pair(decode_port: str = "5600") -> str:
    text = _pair().replace("    ipc: host\n", "    ipc: host\n    network_mode: host\n")
    text = text.replace("=prefill\n", "=10.0.0.5\n").replace("=decode\n", "=10.0.0.5\n")  # the host's address
    text = text.replace('    ports: ["8100:8000"]\n', "").replace('    ports: ["8200:8000"]\n', "")
    text = text.replace("--model", "--port 8100 --model", 1).replace("      --model", "      --port 8200 --model")
    i = text.index("  decode:")
    return text[:i] + text[i:].replace("VLLM_NIXL_SIDE_CHANNEL_PORT=5600", f"VLLM_NIXL_SIDE_CHANNEL_PORT={decode_port}")


def test_side_channel_port_shared_on_host_network(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _host_pair())
    assert "side-channel-port-conflict" in _rules(out), out
    code, out = _check(tmp_path, capsys, _host_pair("5700"))
    assert "side-channel-port-conflict" not in _rules(out), out


def test_one_document_per_host_pairs_across_documents_and_files(tmp_path, capsys):
    """Set 47's bhajian node-a / node-b: one Compose document per host, the engines paired across them, the
    0.26.0 fault of decode-side prefix caching on a hybrid SSM model found, the same given as two files."""
    code, out = _check(tmp_path, capsys, SET_47.read_text())
    assert code == 1
    assert _rules(out) == {"hybrid-ssm-prefix-caching"}, out
    node_a, node_b = SET_47.read_text().split("\n---\n")
    code, out = _check(tmp_path, capsys, node_a, node_b)
    assert _rules(out) == {"hybrid-ssm-prefix-caching"}, out
    assert "compose-0.yml (Compose) services.prefill.command" in out["results"][0]["object"]
    code, out = _check(tmp_path, capsys, node_a)  # node A alone: the prefill is not checked, not passed
    assert code == 3 and not out["results"]


def test_python_wrapper_entrypoint_execs_dynamo(tmp_path, capsys):
    """bhajian's deployments/compose shape: ``entrypoint`` holds a ``python3 -c`` wrapper that execs the rest."""
    def doc(role: str, host: str, dtype: str = "auto") -> str:
        return f"""name: disagg
services:
  {role}:
    image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0
    entrypoint:
    - python3
    - -c
    - "import os, sys\\nrevision, backend, minimum, *command = sys.argv[1:]\\nos.execvp(command[0], command)\\n"
    - 252a02f921642313abde19b29a723a16602fe25e
    - vllm
    - 0.26.0
    - python3
    - -m
    - dynamo.vllm
    - --model
    - Qwen/Qwen3-8B
    - --kv-cache-dtype
    - {dtype}
    - --disaggregation-mode
    - {role}
    - --kv-transfer-config
    - '{{"kv_connector": "NixlConnector", "kv_role": "kv_both"}}'
    network_mode: host
    gpus: all
    environment:
      VLLM_NIXL_SIDE_CHANNEL_HOST: {host}
      VLLM_NIXL_SIDE_CHANNEL_PORT: '5600'
"""
    code, out = _check(tmp_path, capsys, doc("prefill", "10.0.0.1") + "---\n" + doc("decode", "10.0.0.2"))
    assert code == 0, out
    assert "services.decode.entrypoint" in out["results"][0]["object"]
    code, out = _check(tmp_path, capsys, doc("prefill", "10.0.0.1") + "---\n" + doc("decode", "10.0.0.2", "fp8"))
    assert _rules(out) == {"kv-cache-dtype-mismatch"}, out


# --- what stays as it was -----------------------------------------------------------------------------------------------


def test_compose_file_without_vllm_keeps_todays_answer(tmp_path, capsys):
    text = """services:
  etcd:
    image: quay.io/coreos/etcd:v3.5.21
    command: ["/usr/local/bin/etcd", "--name=default"]
    environment:
      NOTE: "kv_role kv_producer NixlConnector"
"""
    code, out = _check(tmp_path, capsys, text)
    assert code == 3
    assert [s["object"] for s in out["notChecked"]] == ["Compose file (services)"]
    assert compose_engines("x.yml", [__import__("yaml").safe_load(text)]) is None


def test_extends_from_another_file_is_not_checked(tmp_path, capsys):
    text = _pair() + """  decode2:
    extends: {file: common.yml, service: decode}
    command: --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
"""
    code, out = _check(tmp_path, capsys, text)
    assert any(s["object"].endswith("services.decode2") and "common.yml" in s["reason"] for s in out["notChecked"])


def test_extends_in_the_same_file(tmp_path, capsys):
    text = _pair() + """  decode2:
    extends: decode
    command: >
      --model Qwen/Qwen2.5-7B-Instruct --block-size 32
      --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
"""
    code, out = _check(tmp_path, capsys, text)
    assert "block-size-hetero-unsupported" in _rules(out), out


# --- service keys ---------------------------------------------------------------------------------------------------


def test_gpus_and_memlock_keys():
    assert _gpus({"gpus": 2}) == 2
    assert _gpus({"gpus": "all"}) is None
    assert _gpus({"deploy": {"resources": {"reservations": {"devices": [
        {"driver": "nvidia", "count": 4, "capabilities": ["gpu"]}]}}}}) == 4
    assert _gpus({"deploy": {"resources": {"reservations": {"devices": [
        {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]}}}}) is None
    assert _memlock({"ulimits": {"memlock": {"soft": -1, "hard": -1}}}) == ("unlimited", "unlimited")
    assert _memlock({"ulimits": {"memlock": -1}}) == ("unlimited", "unlimited")
    assert _memlock({}) is None


def test_memlock_unlimited_and_ipc_lock_with_infiniband(tmp_path, capsys):
    """``ulimits.memlock: -1`` is set by Docker: no memlock warning where IPC_LOCK and /dev/infiniband are given; without
    IPC_LOCK and the ulimit, RDMA pinning may hit the limit (a warning)."""
    rdma = "    devices: [/dev/infiniband:/dev/infiniband]\n"
    ok = "    cap_add: [IPC_LOCK]\n    ulimits:\n      memlock: {soft: -1, hard: -1}\n" + rdma
    code, out = _check(tmp_path, capsys, "services:\n" + _service("prefill", "--block-size 16", extra=ok)
                       + _service("decode", "--block-size 16", gpu="1", extra=ok))
    assert "memlock-insufficient" not in _rules(out, "warning"), out
    code, out = _check(tmp_path, capsys, "services:\n" + _service("prefill", "--block-size 16", extra=rdma)
                       + _service("decode", "--block-size 16", gpu="1", extra=rdma))
    assert "memlock-insufficient" in _rules(out, "warning"), out


def test_findings_speak_of_compose_keys(tmp_path, capsys):
    """Fields name the service's keys (``services.decode.environment.VLLM_NIXL_SIDE_CHANNEL_PORT``,
    ``services.decode.command``) and fixes its words, not the synthetic pod's."""
    code, out = _check(tmp_path, capsys, _host_pair())
    (finding,) = [f for f in out["results"][0]["findings"] if f["rule"] == "side-channel-port-conflict"]
    assert any(f.endswith("services.decode.environment.VLLM_NIXL_SIDE_CHANNEL_PORT") for f in finding["fields"])
    assert "network_mode: host" in finding["message"] and "anti-affinity" not in finding["fix"]
    code, out = _check(tmp_path, capsys, _pair(decode="--block-size 16 --tensor-parallel-size 2"))
    (finding,) = out["results"][0]["findings"]
    assert finding["fields"][-1].endswith("services.decode.command")
    assert "deploy.resources.reservations.devices" in finding["fix"] and "resources.limits" not in finding["fix"]


def test_documents_are_hosts_of_their_own(tmp_path, capsys):
    """Two documents are two hosts: with network_mode host and no VLLM_NIXL_SIDE_CHANNEL_HOST, the decode dials
    localhost, its own host (an error); in one document, on one host, localhost is the prefill's (valid)."""
    text = _host_pair("5700").replace("      - VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.5\n", "")
    code, out = _check(tmp_path, capsys, text)
    assert code == 0, out
    i = text.index("  decode:")
    code, out = _check(tmp_path, capsys, text[:i] + "---\nservices:\n" + text[i:])
    (finding,) = [f for f in out["results"][0]["findings"] if f["rule"] == "side-channel-host-not-routable"]
    assert "on different hosts" in finding["message"] and "pods" not in finding["message"]


def _script_pair(prefill_bs: str, decode_bs: str = "16") -> str:
    def service(role: str, port: int, side: int, kv: str, bs: str) -> str:
        return f"""  {role}:
    image: vllm/vllm-openai:v0.11.0
    network_mode: host
    gpus: 1
    entrypoint: ["/bin/bash", "-c"]
    command:
      - |
        export BS=16
        vllm serve Qwen/Qwen2.5-7B-Instruct --port {port} --block-size {bs} \\
          --kv-transfer-config '{{"kv_connector":"NixlConnector","kv_role":"{kv}"}}'
    environment:
      VLLM_NIXL_SIDE_CHANNEL_HOST: ${{HOST_IP}}
      VLLM_NIXL_SIDE_CHANNEL_PORT: "{side}"
"""
    return ("services:\n" + service("prefill", 8100, 5600, "kv_producer", prefill_bs)
            + service("decode", 8200, 5601, "kv_consumer", decode_bs))


def test_script_in_command_with_compose_and_shell_variables(tmp_path, capsys):
    """``$$BS`` is the script's own ``BS`` (Compose's escape); a bare ``$BS`` is Compose's, replaced before the
    shell runs from an ``.env`` file not in these files, whatever the script exports: unknown, not the script's 16."""
    code, out = _check(tmp_path, capsys, _script_pair("$$BS"))
    assert code == 0, out
    code, out = _check(tmp_path, capsys, _script_pair("$$BS", "32"))
    assert "block-size-hetero-unsupported" in _rules(out)
    code, out = _check(tmp_path, capsys, _script_pair("$BS", "32"))
    assert code == 3 and not _rules(out), out
    assert any("BS_from_compose_env" in s["reason"] for s in out["notChecked"])


@pytest.mark.parametrize("odd", [
    {"deploy": ["x"]}, {"deploy": {"resources": "x"}}, {"gpus": "2"}, {"gpus": [{"count": "all"}]}, {"ulimits": "x"},
    {"ulimits": {"memlock": "x"}}, {"cap_add": "IPC_LOCK"}, {"ports": {"a": 1}}, {"ports": [{"target": 8000}]},
    {"devices": "x"}, {"environment": ["A", "B=${X"]}, {"env_file": [{"path": ".env"}]}, {"labels": ["a=b"]},
    {"user": 1000}, {"command": {"a": 1}}, {"entrypoint": "vllm serve 'unclosed"}, {"extends": ["x"]},
])
def test_odd_service_shapes_never_crash(odd):
    service = {"image": "vllm/vllm-openai:v0.11.0",
               "command": "--model m --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"}
    compose_engines("x.yml", [{"services": {"prefill": {**service, **odd}, "decode": service}}])


def test_runtime_nvidia_counts_visible_devices(tmp_path, capsys):
    """``runtime: nvidia`` with ``NVIDIA_VISIBLE_DEVICES=0`` mounts one GPU: TP 2 finds no second device."""
    def text(tp: int, visible: str) -> str:
        out = _pair(decode=f"--block-size 16 --tensor-parallel-size {tp}")
        i = out.index("  decode:")
        decode = out[i:].replace("    deploy:\n      resources:\n        reservations:\n          devices:\n"
                                 "            - driver: nvidia\n              device_ids: [\"1\"]\n"
                                 "              capabilities: [gpu]\n",
                                 "    runtime: nvidia\n").replace(
            "      - VLLM_NIXL_SIDE_CHANNEL_PORT=5600\n",
            f"      - VLLM_NIXL_SIDE_CHANNEL_PORT=5600\n      - NVIDIA_VISIBLE_DEVICES={visible}\n")
        assert "runtime: nvidia" in decode
        return out[:i] + decode
    code, out = _check(tmp_path, capsys, text(2, "1"))
    assert "parallelism-gpu-count" in _rules(out), out
    code, out = _check(tmp_path, capsys, text(2, "1,2"))
    assert code == 0, out
    code, out = _check(tmp_path, capsys, text(2, "all"))
    assert "parallelism-gpu-count" not in _rules(out), out


def test_interpolation_never_reads_the_services_environment(tmp_path, capsys):
    """``environment: [BS=32]`` with ``--block-size ${BS}``: Compose substitutes the shell's or ``.env``'s ``BS``, not
    the service's own, so the block size is not known (not the 32 that would be refused)."""
    text = _pair(decode="--block-size ${BS} --tensor-parallel-size 1")
    i = text.index("  decode:")
    text = text[:i] + text[i:].replace("      - VLLM_NIXL_SIDE_CHANNEL_PORT=5600\n",
                                       "      - VLLM_NIXL_SIDE_CHANNEL_PORT=5600\n      - BS=32\n")
    code, out = _check(tmp_path, capsys, text)
    assert code == 3 and not _rules(out), out


def test_image_tag_from_outside_the_file(tmp_path, capsys):
    """``image: vllm/vllm-openai:${VLLM_TAG}``: the release is not known, so a fault of some releases is "not
    checked" (exit 3), never an error; ``${VLLM_TAG:-v0.11.0}`` is 0.11.0."""
    text = _pair(decode="--block-size 32").replace("vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:${VLLM_TAG}")
    code, out = _check(tmp_path, capsys, text)
    assert code == 3 and not _rules(out), out
    assert out["results"][0]["vllmVersion"] == "unknown"
    text = _pair(decode="--block-size 32").replace("vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:${VLLM_TAG:-v0.11.0}")
    code, out = _check(tmp_path, capsys, text)
    assert "block-size-hetero-unsupported" in _rules(out)


def _gpu_pair(decode_ids: str = '["1"]', gpus_all: bool = False, visible: tuple[str, str] | None = None) -> str:
    text = _pair(decode="--block-size 16").replace('device_ids: ["1"]', f"device_ids: {decode_ids}")
    if gpus_all:
        block = ("    deploy:\n      resources:\n        reservations:\n          devices:\n            - driver: nvidia\n"
                 "              device_ids: [\"{}\"]\n              capabilities: [gpu]\n")
        text = text.replace(block.format("0"), "    gpus: all\n").replace(block.format("1"), "    gpus: all\n")
        assert text.count("gpus: all") == 2
    if visible:
        i = text.index("  decode:")
        env = "      - VLLM_NIXL_SIDE_CHANNEL_PORT=5600\n"
        text = (text[:i].replace(env, env + f"      - CUDA_VISIBLE_DEVICES={visible[0]}\n")
                + text[i:].replace(env, env + f"      - CUDA_VISIBLE_DEVICES={visible[1]}\n"))
    return text


def test_services_on_one_host_sharing_a_gpu(tmp_path, capsys):
    """Compose services are handed their host's GPUs by ordinal (no device plugin keeps them apart): two engines on
    GPU 0 with --gpu-memory-utilization 0.9 each cannot both start; device_ids or CUDA_VISIBLE_DEVICES apart can."""
    code, out = _check(tmp_path, capsys, _gpu_pair())
    assert "engines-share-gpu" not in _rules(out), out
    code, out = _check(tmp_path, capsys, _gpu_pair('["0"]'))
    (finding,) = [f for f in out["results"][0]["findings"] if f["rule"] == "engines-share-gpu"]
    assert "one host" in finding["message"] and "device_ids" in finding["fix"]
    code, out = _check(tmp_path, capsys, _gpu_pair(gpus_all=True))
    assert "engines-share-gpu" in _rules(out), out
    code, out = _check(tmp_path, capsys, _gpu_pair(gpus_all=True, visible=("0", "1")))
    assert "engines-share-gpu" not in _rules(out), out
    code, out = _check(tmp_path, capsys, _gpu_pair(gpus_all=True, visible=("1", "1")))
    assert "engines-share-gpu" in _rules(out), out
    i = _gpu_pair(gpus_all=True).index("  decode:")  # two documents are two hosts: GPU 0 of each
    code, out = _check(tmp_path, capsys, _gpu_pair(gpus_all=True)[:i] + "---\nservices:\n" + _gpu_pair(gpus_all=True)[i:])
    assert "engines-share-gpu" not in _rules(out), out
