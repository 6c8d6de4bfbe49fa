"""Variants of what the sixty-fifth public-report set (tests/unit/data/public_reports_65) taught, with negative
controls: large MoE P/D with data and expert parallelism.

- The flag tables had not read 0.10.2 and 0.19.x-0.20.x: ``--enable-dbo`` on vLLM 0.10.2 (first in 0.11.0) was only a
  warning, and ``--eplb-config`` (in 0.10.2 already) was dated 0.11.0. Now read (``cli-flag-not-yet``,
  ``cli-flag-removed``: :mod:`pdd_operator.vllm.added_flags_read`, :mod:`pdd_operator.vllm.removed_flags_read`).
- ``vllm serve`` takes one data-parallel load-balancing mode at most (vllm/entrypoints/cli/serve.py: external with
  hybrid refused from 0.16.0; from 0.22.0 ``--data-parallel-multi-port-external-lb`` counts too), so a wide-EP
  manifest that keeps ``--data-parallel-hybrid-lb`` next to the DP supervisor never starts (``engine-args-invalid``).
- Host scripts that start engines with ``docker run --network host --entrypoint vllm IMAGE serve ...`` are read
  (the container's environment is its ``-e`` options, its image the one named; ``-d`` runs it in the background),
  and a host script's ``${PREFILL_SIDE_PORT:-5577}`` is its default: no kubelet adds ``*_PORT`` variables on a host.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.data_parallel import lb_mode_conflict
from pdd_operator.vllm.expansion import ContainerEnv
from pdd_operator.vllm.script import docker_run
from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _pair(image, p_extra=(), d_extra=(), model="deepseek-ai/DeepSeek-V2-Lite", command=("vllm", "serve"), gpus=8):
    docs = []
    for role, extra in (("prefill", p_extra), ("decode", d_extra)):
        c = {"name": "vllm", "image": image, "command": list(command),
             "args": [model, "--kv-transfer-config", KV, *extra], "env": [POD_IP],
             "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return docs


def _script(tmp_path, capsys, text: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "pd.sh")


def _messages(out: dict, rule: str) -> list[str]:
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- the flag tables read 0.10.2 and 0.19.x-0.20.x ------------------------------------------------------------


@pytest.mark.parametrize(("image", "flags", "severity"), [
    ("vllm/vllm-openai:v0.10.2", ("--enable-dbo",), "error"),              # first in 0.11.0
    ("vllm/vllm-openai:v0.10.2", ("--dbo-decode-token-threshold", "32"), "error"),
    ("vllm/vllm-openai:v0.11.0", ("--enable-dbo",), None),
    ("vllm/vllm-openai:v0.10.2", ("--eplb-config", '{"window_size": 1000}'), None),  # 0.10.2 has it
    ("vllm/vllm-openai:v0.10.1.1", ("--eplb-config", '{"window_size": 1000}'), "error"),
    ("vllm/vllm-openai:v0.19.1", ("--numa-bind",), "error"),               # first in 0.20.0
    ("vllm/vllm-openai:v0.20.0", ("--numa-bind",), None),
    ("vllm/vllm-openai:v0.19.0", ("-sc", '{"method": "ngram", "num_speculative_tokens": 3, '
                                  '"prompt_lookup_max": 4}'), None),      # -sc is in 0.19.0
    ("vllm/vllm-openai:v0.18.0", ("-sc", '{"method": "ngram", "num_speculative_tokens": 3, '
                                  '"prompt_lookup_max": 4}'), "error"),
    ("vllm/vllm-openai:v0.20.2", ("--safetensors-prefetch-num-threads", "4"), "error"),  # first in 0.21.0
])
def test_flags_are_judged_on_the_releases_now_read(tmp_path, capsys, image, flags, severity):
    code, out = check(tmp_path, capsys, *_pair(image, flags, flags))
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "cli-flag-not-yet"}
    assert found == ({severity} if severity else set())


@pytest.mark.parametrize(("image", "flag", "refused"), [
    ("vllm/vllm-openai:v0.10.2", "--enable-prompt-adapter", True),   # gone in 0.10.2 already
    ("vllm/vllm-openai:v0.10.1.1", "--enable-prompt-adapter", False),
    ("vllm/vllm-openai:v0.10.2", "--disable-async-output-proc", False),  # still in 0.10.2, gone in 0.11.0
    ("vllm/vllm-openai:v0.11.0", "--disable-async-output-proc", True),
])
def test_removed_flags_are_dated_by_the_0_10_2_read(tmp_path, capsys, image, flag, refused):
    code, out = check(tmp_path, capsys, *_pair(image, (flag,), (flag,)))
    assert ("cli-flag-removed" in rules(out, "error")) == refused


# --- one data-parallel load-balancing mode --------------------------------------------------------------------


@pytest.mark.parametrize(("switches", "ranks", "version", "expected"), [
    (("--data-parallel-multi-port-external-lb", "--data-parallel-hybrid-lb"), (), (0, 26, 0), ("multi-port", "hybrid")),
    (("--data-parallel-multi-port-external-lb", "--data-parallel-hybrid-lb"), (), (0, 22, 0), ("multi-port", "hybrid")),
    (("--data-parallel-multi-port-external-lb",), ("--data-parallel-start-rank",), (0, 26, 0), ()),  # llm-d's base
    (("--data-parallel-multi-port-external-lb",), ("--data-parallel-rank",), (0, 34, 0), ("multi-port", "external")),
    (("--data-parallel-hybrid-lb",), ("--data-parallel-start-rank",), (0, 26, 0), ()),
    (("--data-parallel-hybrid-lb",), ("--data-parallel-rank",), (0, 16, 0), ("external", "hybrid")),
    (("--data-parallel-hybrid-lb",), ("--data-parallel-rank",), (0, 21, 0), ("external", "hybrid")),
    ((), ("--data-parallel-rank", "--data-parallel-start-rank"), (0, 18, 0), ("external", "hybrid")),
    (("--data-parallel-hybrid-lb",), ("--data-parallel-rank",), (0, 14, 0), ()),  # no check in serve.py yet
    (("--data-parallel-external-lb",), (), (0, 26, 0), ()),
])
def test_the_load_balancing_modes_per_release(switches, ranks, version, expected):
    assert lb_mode_conflict(switches, ranks, version) == expected


@pytest.mark.parametrize(("image", "flags", "severity"), [
    ("ghcr.io/llm-d/llm-d-cuda:v0.9.0", ("--data-parallel-multi-port-external-lb", "--data-parallel-hybrid-lb"),
     "error"),
    ("vllm/vllm-openai:v0.22.0", ("-dpm", "-dph"), "error"),
    ("vllm/vllm-openai:v0.18.0", ("--data-parallel-hybrid-lb", "--data-parallel-rank", "0"), "error"),
    ("vllm/vllm-openai:v0.14.0", ("--data-parallel-hybrid-lb", "--data-parallel-rank", "0"), None),
    ("vllm/vllm-openai:v0.15.1", ("--data-parallel-hybrid-lb", "--data-parallel-rank", "0"), "warning"),
    ("example.com/private/vllm:dev", ("--data-parallel-external-lb", "--data-parallel-start-rank", "0"), "warning"),
    ("example.com/private/vllm:dev", ("--data-parallel-multi-port-external-lb", "--data-parallel-hybrid-lb"),
     "error"),  # every release that has the multi-port flag refuses the pair
    ("vllm/vllm-openai:v0.26.0", ("--data-parallel-hybrid-lb", "--data-parallel-start-rank", "0"), None),
])
def test_vllm_serve_with_two_load_balancing_modes_never_starts(tmp_path, capsys, image, flags, severity):
    dp = ("--enable-expert-parallel", "--data-parallel-size", "16", "--data-parallel-size-local", "8")
    code, out = check(tmp_path, capsys, *_pair(image, (*dp, *flags), dp, model="deepseek-ai/DeepSeek-R1"))
    found = {f["severity"] for r in out["results"] for f in r["findings"]
             if f["rule"] == "engine-args-invalid" and "load balancing" in f["message"]}
    assert found == ({severity} if severity else set())


@pytest.mark.parametrize("command", [("python3", "-m", "dynamo.vllm", "--model"),
                                     ("python3", "-m", "vllm.entrypoints.openai.api_server", "--model")])
def test_only_vllm_serve_checks_the_modes(tmp_path, capsys, command):
    # Dynamo's dsr1_dep.sh gives every rank --data-parallel-rank and --data-parallel-hybrid-lb: EngineArgs lets the
    # rank turn hybrid LB off (arg_utils.py 0.11.0 l.1232-1240); only vllm serve's CLI refuses the pair
    flags = ("--data-parallel-size", "16", "--data-parallel-rank", "0", "--data-parallel-hybrid-lb")
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.26.0", flags, flags, command=command))
    assert not [m for m in _messages(out, "engine-args-invalid") if "load balancing" in m]


# --- docker run in host scripts; host scripts get no kubelet variables ---------------------------------------


def _docker_script(p_port: str, d_port: str, network: str = "--network host", image: str = "vllm/vllm-openai:v0.24.0",
                   entry: str = "--entrypoint vllm {image} serve") -> str:
    out = [f"P_SIDE_PORT=${{P_SIDE_PORT:-{p_port}}}", f"D_SIDE_PORT=${{D_SIDE_PORT:-{d_port}}}"]
    for role, gpus, port, side in (("prefill", "0,1", 8100, "$P_SIDE_PORT"), ("decode", "2,3", 8200, "$D_SIDE_PORT")):
        out.append(f"docker run -d --name pd-{role} {network} --gpus '\"device={gpus}\"' --shm-size 16g "
                   f"-e VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1 -e \"VLLM_NIXL_SIDE_CHANNEL_PORT={side}\" "
                   f"{entry.format(image=image)} Qwen/Qwen3-8B --port {port} --tensor-parallel-size 2 "
                   f"--kv-transfer-config '{KV}'")
    return "\n".join(out) + "\n"


def test_docker_run_engines_on_one_host_network_share_its_ports(tmp_path, capsys):
    code, out = _script(tmp_path, capsys, _docker_script("5577", "5577"))
    assert "side-channel-port-conflict" in rules(out, "error")


def test_docker_run_engines_with_their_own_ports_do_not_conflict(tmp_path, capsys):
    code, out = _script(tmp_path, capsys, _docker_script("5577", "5578"))
    assert "side-channel-port-conflict" not in rules(out) and not out["notChecked"]


def test_docker_run_image_gives_the_version(tmp_path, capsys):
    code, out = _script(tmp_path, capsys, _docker_script("5577", "5578", image="vllm/vllm-openai:v0.10.2")
                        .replace("--tensor-parallel-size 2", "--tensor-parallel-size 2 --enable-dbo"))
    assert "cli-flag-not-yet" in rules(out, "error")


def test_docker_run_with_the_command_after_the_image(tmp_path, capsys):
    code, out = _script(tmp_path, capsys, _docker_script("5577", "5577", entry="{image} vllm serve"))
    assert "side-channel-port-conflict" in rules(out, "error")


def test_docker_run_on_a_bridge_network_is_not_read_as_host_processes(tmp_path, capsys):
    # each container has its own network namespace: no shared ports, and 127.0.0.1 is its own: not judged as a host's
    code, out = _script(tmp_path, capsys, _docker_script("5577", "5577", network="-p 8100:8100"))
    assert code == 3 and "side-channel-port-conflict" not in rules(out)


def test_docker_run_reads_options_as_docker_does():
    run = docker_run(["docker", "run", "-dit", "--rm", "--net=host", "-e", "A=1", "-e", "B", "--entrypoint", "vllm",
                      "-v", "/x:/x", "img:v1", "serve", "m"], lambda name: "2" if name == "B" else None)
    assert run is not None and run.image == "img:v1" and run.command == ("vllm", "serve", "m")
    assert run.env == {"A": "1", "B": "2"} and run.host_network and run.detach and not run.env_file
    assert docker_run(["docker", "ps"]) is None and docker_run(["vllm", "serve", "m"]) is None
    plain = docker_run(["podman", "container", "run", "--env-file", "e.env", "img", "vllm", "serve", "m"])
    assert plain is not None and plain.env_file and not plain.host_network and not plain.detach


def test_a_host_script_port_default_is_its_value_a_pod_script_is_not():
    # no kubelet on a host adds PREFILL_NIXL_SIDE_PORT; in a pod a Service named prefill-nixl-side would
    assert ContainerEnv(kubernetes=False).unset("PREFILL_NIXL_SIDE_PORT")
    assert not ContainerEnv().unset("PREFILL_NIXL_SIDE_PORT")
    assert ContainerEnv(kubernetes=False).kube("LWS_LEADER_ADDRESS") is None


def test_a_host_script_with_one_port_default_for_both_engines_conflicts(tmp_path, capsys):
    text = ("SIDE_PORT=${SIDE_PORT:-5600}\n"
            f"CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=$SIDE_PORT vllm serve Qwen/Qwen3-8B --port 8100 "
            f"--kv-transfer-config '{KV}' &\n"
            f"CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=$SIDE_PORT vllm serve Qwen/Qwen3-8B --port 8200 "
            f"--kv-transfer-config '{KV}' &\n"
            "python3 toy_proxy_server.py --prefiller-ports 8100 --decoder-ports 8200 &\nwait\n")
    code, out = _script(tmp_path, capsys, text)
    assert "side-channel-port-conflict" in rules(out, "error")
