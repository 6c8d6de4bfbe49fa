"""Variants of what the ninety-fourth public-report set (tests/unit/data/public_reports_94) taught, with negative
controls. The set's commands were pasted in vLLM's tracker in 2026; six kinds of fault came out of them:

1. A file of ``docker run`` commands whose image supplies the entrypoint (no ``vllm`` word at a line start) was not
   taken for a shell script and crashed as broken YAML (:mod:`pdd_operator.compat.text_inputs`).
2. A ``MoRIIOConnector`` pair of unknown version was never judged, though most of what it must agree on holds on
   every release that registers the connector: it is now probed on every release from the connector's first
   (0.14.0, :func:`~pdd_operator.compat.unknown_version.connector_floor`; any connector of the factory's registry),
   an error only where each release refuses it.
3. MoRIIO's handshake and notify listeners (ZeroMQ, ``tcp://*:port + DP rank + TP rank``, defaults 6301 / 61005) were
   not among an engine's ports, and the listener rules ran on NIXL pairs only
   (:mod:`pdd_operator.vllm.moriio_ports`; ``listener-port-conflict`` and ``same-role-port-conflict`` now judge any
   connector's engines).
4. A pasted command pair (foreground, each in its own terminal) whose engines advertise one routable address as
   their own (MoRIIO ``host_ip``, ``VLLM_NIXL_SIDE_CHANNEL_HOST``) runs on one host
   (:func:`~pdd_operator.compat.script_inputs.declared_host`).
5. ``--port 8100 \\`` followed by blanks: the backslash escapes a blank, not the newline, so the command ends there
   with a word ``' '`` that vLLM's parser refuses, and the next lines run as a command of their own
   (``cli-option-malformed``; :func:`pdd_operator.vllm.script._escaped_trailing_blank`).
6. ``--kv-transfer-config "$(kv kv_producer 8100 ...)"`` where ``kv`` is a script function that ``printf``-s the JSON
   (vLLM's own test scripts of #43509 / #43541) was an unknown value (:meth:`pdd_operator.vllm.script._Run.
   function_output`, :func:`pdd_operator.vllm.script._printf`).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.pair import RoleConfig
from pdd_operator.compat.text_inputs import text_format
from pdd_operator.compat.unknown_version import connector_floor
from pdd_operator.vllm.expansion import ContainerEnv
from pdd_operator.vllm.flags import malformed_options
from pdd_operator.vllm.moriio_ports import moriio_listener_ports
from pdd_operator.vllm.script import _printf, launches
from tests.unit.cli_check import check_text as _check
from tests.unit.cli_check import rules as _rules


def _moriio(role: str, http: int, handshake: int | None = 7301, notify: int | None = 7501, host: str = "10.1.2.3",
            read: str | None = None) -> str:
    extra = {"host_ip": host, "proxy_ip": "127.0.0.1", "proxy_ping_port": "36367", "http_port": str(http),
             "backend": "rdma"}
    if handshake is not None:
        extra["handshake_port"] = str(handshake)
    if notify is not None:
        extra["notify_port"] = str(notify)
    if read is not None:
        extra["read_mode"] = read
    return json.dumps({"kv_connector": "MoRIIOConnector", "kv_role": role, "kv_connector_extra_config": extra})


def _engine(devices: str, port: int, kv: str, model: str = "meta-llama/Llama-3.1-8B-Instruct", extra: str = "",
            background: bool = True, tp: int = 1) -> str:
    return (f"HIP_VISIBLE_DEVICES={devices} vllm serve {model} --port {port} --tensor-parallel-size {tp} {extra} "
            f"--kv-transfer-config '{kv}'" + (" &\n" if background else "\n"))


# --- 1. docker run scripts -----------------------------------------------------------------------------------------


def _docker(image: str, kv: str, port: int, extra: str = "", run: str = "docker run -d", env: str = "") -> str:
    return (f"{run} --gpus all --network host {env} {image} --model Qwen/Qwen3-8B --port {port} {extra} "
            f"--kv-transfer-config '{kv}'\n")


NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


@pytest.mark.parametrize("run", ["docker run -d", "sudo docker run -d", "podman run -d", "docker container run -d"])
def test_a_file_of_container_runs_is_a_shell_script(run):
    text = _docker("vllm/vllm-openai:v0.24.0", NIXL, 8100, run=run)
    assert text_format(text) == "shell script"


def test_docker_run_pair_with_the_image_entrypoint_is_read_not_a_yaml_crash(tmp_path, capsys):
    text = (_docker("vllm/vllm-openai:v0.24.0", NIXL, 8100, env="-e CUDA_VISIBLE_DEVICES=0")
            + _docker("vllm/vllm-openai:v0.24.0", NIXL, 8200, env="-e CUDA_VISIBLE_DEVICES=1 "
                      "-e VLLM_NIXL_SIDE_CHANNEL_PORT=5601"))
    code, out = _check(tmp_path, capsys, text)
    assert code == 0 and not out["inputErrors"] and out["results"]


def test_docker_run_pair_on_two_releases_is_refused(tmp_path, capsys):
    text = (_docker("vllm/vllm-openai:v0.24.0", NIXL, 8100, env="-e CUDA_VISIBLE_DEVICES=0")
            + _docker("vllm/vllm-openai:v0.25.0", NIXL, 8200, env="-e CUDA_VISIBLE_DEVICES=1 "
                      "-e VLLM_NIXL_SIDE_CHANNEL_PORT=5601"))
    code, out = _check(tmp_path, capsys, text)
    assert code == 1 and "vllm-version-mismatch" in _rules(out, "error")


def test_a_manifest_that_mentions_docker_run_stays_a_manifest():
    text = "apiVersion: v1\nkind: ConfigMap\ndata:\n  run.sh: |\n    docker run -d vllm/vllm-openai:v0.24.0\n  x: [\n"
    assert text_format(text) is None  # a broken manifest: its YAML error is the answer


# --- 2. MoRIIO pairs of unknown version ----------------------------------------------------------------------------


def test_connector_floor_is_the_first_release_registering_the_connector():
    def role(kv: dict) -> RoleConfig:
        return RoleConfig(role="prefill", kv_transfer=kv, kv_transfer_written=kv)

    assert connector_floor(role({"kv_connector": "MoRIIOConnector"})) == ((0, 14, 0), "MoRIIOConnector")
    assert connector_floor(role({"kv_connector": "MooncakeConnector"})) == ((0, 13, 0), "MooncakeConnector")
    assert connector_floor(role({"kv_connector": "NixlConnector"})) is None  # in every release read
    assert connector_floor(role({"kv_connector": "MoRIIOConnector",
                                 "kv_connector_module_path": "my.pkg"})) is None  # not the factory's registry


def _moriio_pair(p_extra: str = "", d_extra: str = "", p_tp: int = 1, d_tp: int = 1,
                 model: str = "meta-llama/Llama-3.1-8B-Instruct") -> str:
    return (_engine("0,1,2,3,4,5,6,7"[:2 * p_tp - 1], 8100, _moriio("kv_producer", 8100, 6301, 6105), model,
                    p_extra, tp=p_tp)
            + _engine(",".join(str(8 + i) for i in range(d_tp)), 8200, _moriio("kv_consumer", 8200), model, d_extra,
                      tp=d_tp)
            + "wait\n")


def test_unknown_version_moriio_pair_that_agrees_is_judged_with_a_warning(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _moriio_pair())
    assert code == 0 and not out["notChecked"]
    message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "vllm-version-unknown")
    assert "0.14.0" in message and "MoRIIOConnector" in message


@pytest.mark.parametrize(("p_extra", "d_extra", "rule"), [
    ("--block-size 16", "--block-size 64", "moriio-block-size-mismatch"),        # every release: offsets, then raise
    ("--kv-cache-dtype fp8", "--kv-cache-dtype bfloat16", "moriio-kv-dtype-mismatch"),
])
def test_unknown_version_moriio_pair_refused_on_every_release_is_an_error(tmp_path, capsys, p_extra, d_extra, rule):
    code, out = _check(tmp_path, capsys, _moriio_pair(p_extra, d_extra))
    assert code == 1 and rule in _rules(out, "error")


def test_unknown_version_moriio_tp_split_refused_on_some_releases_only_is_not_checked(tmp_path, capsys):
    # Llama-3.1-8B has 8 KV heads: TP 8 -> 16 is refused before 0.25.0 (equal TP) and mapped from 0.25.0
    code, out = _check(tmp_path, capsys, _moriio_pair(p_tp=8, d_tp=16))
    assert code == 3 and "moriio-tp-mismatch" in json.dumps(out["notChecked"])


def test_known_version_moriio_pair_outside_the_releases_read_stays_not_checked(tmp_path, capsys):
    text = ("pip install vllm==0.13.0\n" + _moriio_pair())
    code, out = _check(tmp_path, capsys, text)
    assert code != 0 and not _rules(out, "warning") & {"vllm-version-unknown"}


# --- 3. MoRIIO listener ports -------------------------------------------------------------------------------------


def test_moriio_listener_ports_per_rank_and_defaults():
    kv = json.loads(_moriio("kv_producer", 8100, 6301, 6105))
    assert moriio_listener_ports(kv, 4, range(1)) == (6105, 6106, 6107, 6108, 6301, 6302, 6303, 6304)
    assert moriio_listener_ports(json.loads(_moriio("kv_producer", 8100, None, None)), 1, range(1)) == (6301, 61005)
    # DP ranks and TP ranks add up (get_port_offset ignores the TP size): DP 2 x TP 2 binds base + 0, 1, 2
    assert moriio_listener_ports(kv, 2, range(2)) == (6105, 6106, 6107, 6301, 6302, 6303)
    multi = {"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": [kv]}}
    assert moriio_listener_ports(multi, 1, [3]) == (6108, 6304)
    assert moriio_listener_ports(json.loads(_moriio("kv_producer", 8100, None, None).replace(
        '"host_ip"', '"handshake_port": "$P", "host_ip"')), 1, range(1)) == ()
    assert moriio_listener_ports(json.loads(NIXL), 8, range(1)) == ()
    # a MoRIIOConnector class from a package outside vLLM (kv_connector_module_path) binds that package's ports
    assert moriio_listener_ports({**kv, "kv_connector_module_path": "amd_ext.moriio"}, 4, range(1)) == ()
    assert moriio_listener_ports({**kv, "kv_connector_module_path": "vllm.distributed.kv_transfer.kv_connector.v1."
                                  "moriio.moriio_connector"}, 1, range(1)) == (6105, 6301)


@pytest.mark.parametrize(("p_ports", "d_ports", "clash"), [
    ((6301, 6105), (6301, 6105), True),      # copied from the prefill's block
    ((None, None), (None, None), True),      # both on the connector's defaults, 6301 and 61005
    ((6301, 6105), (6302, 6106), True),      # TP 2: the prefill's rank 1 binds 6302 and 6106
    ((6301, 6105), (7301, 7105), False),
])
def test_moriio_engines_of_one_host_need_their_own_listener_ports(tmp_path, capsys, p_ports, d_ports, clash):
    text = (_engine("0,1", 8100, _moriio("kv_producer", 8100, *p_ports), tp=2)
            + _engine("2,3", 8200, _moriio("kv_consumer", 8200, *d_ports), tp=2) + "wait\n")
    code, out = _check(tmp_path, capsys, text)
    assert ("listener-port-conflict" in _rules(out, "error")) is clash
    assert code == (1 if clash else 0)


def test_copied_moriio_ports_on_two_hosts_do_not_clash(tmp_path, capsys):
    kv_p, kv_d = _moriio("kv_producer", 8100, 6301, 6105), _moriio("kv_consumer", 8200, 6301, 6105, host="10.1.2.4")
    text = (f"ssh node1 \"HIP_VISIBLE_DEVICES=0 vllm serve m --port 8100 --kv-transfer-config '{kv_p}'\" &\n"
            f"ssh node2 \"HIP_VISIBLE_DEVICES=0 vllm serve m --port 8200 --kv-transfer-config '{kv_d}'\" &\nwait\n")
    _, out = _check(tmp_path, capsys, text)
    assert "listener-port-conflict" not in _rules(out)


def test_other_connectors_on_one_host_clash_on_the_http_port_too(tmp_path, capsys):
    kv = '{"kv_connector":"MooncakeConnector","kv_role":"%s"}'
    text = ("pip install vllm==0.25.0\n"
            + f"CUDA_VISIBLE_DEVICES=0 vllm serve m --port 8000 --kv-transfer-config '{kv % 'kv_producer'}' &\n"
            + f"CUDA_VISIBLE_DEVICES=1 vllm serve m --port 8000 --kv-transfer-config '{kv % 'kv_consumer'}' &\nwait\n")
    _, out = _check(tmp_path, capsys, text)
    assert _rules(out) & {"listener-port-conflict"}


# --- 4. pasted pairs that declare one host ----------------------------------------------------------------------


def test_pasted_moriio_pair_declaring_one_host_ip_shares_it(tmp_path, capsys):
    text = (_engine("0", 8100, _moriio("kv_producer", 8100, 6301, 6105), background=False)
            + _engine("1", 8200, _moriio("kv_consumer", 8200, 6301, 6105), background=False))
    code, out = _check(tmp_path, capsys, text)
    assert code == 1 and "listener-port-conflict" in _rules(out, "error")


def test_pasted_moriio_pair_on_two_declared_hosts_is_kept_apart(tmp_path, capsys):
    text = (_engine("0", 8100, _moriio("kv_producer", 8100, 6301, 6105), background=False)
            + _engine("0", 8200, _moriio("kv_consumer", 8200, 6301, 6105, host="10.1.2.4"), background=False))
    code, out = _check(tmp_path, capsys, text)
    assert code == 0 and "listener-port-conflict" not in _rules(out)


@pytest.mark.parametrize(("p_host", "d_host", "clash"), [
    ("10.0.0.5", "10.0.0.5", True),    # one host: both side channels on 5600
    ("10.0.0.5", "10.0.0.6", False),
    ("127.0.0.1", "127.0.0.1", False),  # loopback names no one host: placement still unknown
])
def test_pasted_nixl_pair_declaring_one_side_channel_host(tmp_path, capsys, p_host, d_host, clash):
    text = ("pip install vllm==0.24.0\n"
            f"VLLM_NIXL_SIDE_CHANNEL_HOST={p_host} CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3-8B --port 8100 "
            f"--kv-transfer-config '{NIXL}'\n"
            f"VLLM_NIXL_SIDE_CHANNEL_HOST={d_host} CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen3-8B --port 8200 "
            f"--kv-transfer-config '{NIXL}'\n")
    _, out = _check(tmp_path, capsys, text)
    assert ("side-channel-port-conflict" in _rules(out, "error")) is clash


# --- 5. a backslash before a trailing blank ---------------------------------------------------------------------


@pytest.mark.parametrize("blank", [" ", "   ", "\t"])
def test_backslash_before_a_trailing_blank_ends_the_command_with_a_blank_word(blank):
    text = f"vllm serve m \\\n  --port 8100 \\{blank}\n  --tensor-parallel-size 4 \\\n  --enforce-eager\n"
    (launch,) = launches(text, ContainerEnv(kubernetes=False))
    assert launch.argv[:5] == ("vllm", "serve", "m", "--port", "8100") and blank[0] in launch.argv
    assert malformed_options(list(launch.argv)) == (blank[0],)


def test_backslash_newline_and_quoted_blanks_stay_as_they_are():
    text = "vllm serve m \\\n  --port 8100 \\\n  --kv-transfer-config '{\\\n  \"a\": 1}'\n"
    (launch,) = launches(text, ContainerEnv(kubernetes=False))
    assert not malformed_options(list(launch.argv)) and launch.argv[-2] == "--kv-transfer-config"


def _nixl_script(decode_line_end: str) -> str:
    return ("pip install vllm==0.24.0\n"
            f"CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3-8B --port 8100 --kv-transfer-config '{NIXL}' &\n"
            "CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve Qwen/Qwen3-8B \\\n"
            f"  --port 8200{decode_line_end}\n"
            f"  --kv-transfer-config '{NIXL}' &\nwait\n")


def test_broken_continuation_refuses_the_engine_whatever_its_connector(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _nixl_script(" \\  "))
    assert code == 1 and "cli-option-malformed" in _rules(out, "error")
    message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "cli-option-malformed")
    assert message.startswith("decode:") and "backslash" in message


def test_intact_continuation_passes(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _nixl_script(" \\"))
    assert code == 0 and "cli-option-malformed" not in _rules(out)


# --- 6. printf functions as --kv-transfer-config -------------------------------------------------------------------


@pytest.mark.parametrize(("form", "args", "printed"), [
    ('{"kv_role":"%s","port":%d}', ["kv_both", "8100"], '{"kv_role":"kv_both","port":8100}'),
    ("%s-", ["a", "b"], "a-b-"),                  # the format is reused while arguments remain
    ("%s %s", ["a"], "a "),                       # missing arguments are empty
    ("100%% %s", ["x"], "100% x"),
    ("%q", ["x"], None),                          # a conversion this reader does not give
    ("%d", ["x"], None),
])
def test_printf(form, args, printed):
    assert _printf(form, args) == printed


KV_FUNCTION = """kv() {
    printf '{"kv_connector":"NixlConnector","kv_role":"%s"}' "$1"
}
"""


def _function_pair(p_dtype: str = "auto", d_dtype: str = "auto", body: str = KV_FUNCTION) -> str:
    return ("pip install vllm==0.24.0\n" + body
            + f"CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3-8B --port 8100 --kv-cache-dtype {p_dtype} "
              '--kv-transfer-config "$(kv kv_producer)" &\n'
            + f"CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve Qwen/Qwen3-8B --port 8200 "
              f'--kv-cache-dtype {d_dtype} --kv-transfer-config "$(kv kv_consumer)" &\nwait\n')


def test_printf_function_output_is_the_engines_kv_transfer_config(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _function_pair())
    assert code == 0 and not out["notChecked"]
    code, out = _check(tmp_path, capsys, _function_pair("fp8", "auto"))
    assert code == 1 and "kv-cache-dtype-mismatch" in _rules(out, "error")


def test_echo_function_is_read_too(tmp_path, capsys):
    body = "kv() { echo '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"'$1'\"}'; }\n"
    code, out = _check(tmp_path, capsys, _function_pair(body=body))
    assert code == 0 and not out["notChecked"]


def test_a_function_doing_more_than_printing_stays_unknown(tmp_path, capsys):
    body = KV_FUNCTION.replace("    printf", "    logger started\n    printf")
    code, out = _check(tmp_path, capsys, _function_pair(body=body))
    assert code == 3


def test_unknown_version_moriio_pair_in_an_image_naming_no_release_stays_not_checked(tmp_path, capsys):
    # a nightly (or fork, or placeholder) image may hold MoRIIO code past the releases read: not judged
    kv_p, kv_d = _moriio("kv_producer", 8100, 6301, 6105), _moriio("kv_consumer", 8200)
    text = "".join(f"docker run -d --network host --device /dev/kfd -e HIP_VISIBLE_DEVICES={dev} "
                   f"vllm/vllm-openai-rocm:nightly vllm serve m --port {port} --kv-transfer-config '{kv}'\n"
                   for dev, port, kv in (("0", 8100, kv_p), ("1", 8200, kv_d)))
    code, out = _check(tmp_path, capsys, text)
    assert code == 3 and "names none" in json.dumps(out["notChecked"])
