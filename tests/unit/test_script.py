"""Container scripts that start several engines or set their own variables (pdd_operator.vllm.script), and how
``pdd check`` pairs the engines of one script (compat.manifests): one engine per launch, each with its own flags,
ports and env, paired as the roles of one object."""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.compat.manifests import pair_engines, scan
from pdd_operator.vllm.args import container_launches, parse_flags
from pdd_operator.vllm.expansion import ContainerEnv, unknown, unknown_names
from pdd_operator.vllm.script import MAX_ITERATIONS, launches
from tests.unit.cli_check import check_text

PRODUCER = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
CONSUMER = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'


def _flags(launch):
    return parse_flags(list(launch.argv))


@pytest.mark.parametrize("sep", [" & ", " ; ", " && ", "\n", " &\n", " || ", " | tee /tmp/a.log\n"])
def test_each_launch_is_its_own_engine_whatever_separates_them(sep):
    script = f"vllm serve m-a --port 8100 --block-size 16{sep}vllm serve m-b --port 8200 --block-size 32 &\nwait"
    got = launches(script)
    assert [_flags(x)[0] for x in got] == ["m-a", "m-b"]
    assert [_flags(x)[1]["--port"] for x in got] == ["8100", "8200"]
    assert [_flags(x)[1]["--block-size"] for x in got] == ["16", "32"]


def test_env_prefixes_belong_to_their_line_and_exports_to_all_later_lines():
    script = ("export VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1\n"
              "CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve m --port 8100 &\n"
              "CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 python3 -m vllm.entrypoints.openai.api_server "
              "--model m --port 8200 &\n"
              "env CUDA_VISIBLE_DEVICES=2 vllm serve m --port 8300\n")
    a, b, c = launches(script)
    assert a.env == {"VLLM_NIXL_SIDE_CHANNEL_HOST": "10.0.0.1", "CUDA_VISIBLE_DEVICES": "0",
                     "VLLM_NIXL_SIDE_CHANNEL_PORT": "5600"}
    assert b.env["CUDA_VISIBLE_DEVICES"] == "1" and b.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5601"
    assert c.env == {"VLLM_NIXL_SIDE_CHANNEL_HOST": "10.0.0.1", "CUDA_VISIBLE_DEVICES": "2"}
    assert (a.line, b.line, c.line) == (2, 3, 4)
    assert b.argv[0] == "vllm.entrypoints.openai.api_server"


def test_a_plain_assignment_is_not_exported_to_the_engine():
    (got,) = launches("VLLM_NIXL_SIDE_CHANNEL_PORT=5600\nvllm serve m --port $VLLM_NIXL_SIDE_CHANNEL_PORT")
    assert got.env == {} and _flags(got)[1]["--port"] == "5600"


def test_a_loop_starts_one_engine_per_word_with_its_arithmetic():
    script = ("p=8100; c=5600\nfor g in 0 1 2; do\n"
              "  CUDA_VISIBLE_DEVICES=$g VLLM_NIXL_SIDE_CHANNEL_PORT=$c vllm serve m --port $p &\n"
              "  p=$((p+1)); c=$((c + 2))\ndone\nwait")
    got = launches(script)
    assert [x.env["CUDA_VISIBLE_DEVICES"] for x in got] == ["0", "1", "2"]
    assert [x.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] for x in got] == ["5600", "5602", "5604"]
    assert [_flags(x)[1]["--port"] for x in got] == ["8100", "8101", "8102"]


def test_loops_are_bounded():
    words = " ".join(map(str, range(200)))
    script = f"for a in 1 2 3 4; do vllm serve m & done; for i in {words}; do vllm serve m & done"
    assert len(launches(script)) == MAX_ITERATIONS  # all loops together
    (one,) = launches("for n in $(seq $N); do vllm serve m --port $n; done")  # words not known: one pass, unknown
    assert _flags(one)[1]["--port"] == unknown("seq") and "runs once per word of $(seq $N)" in one.repeats


def test_a_function_runs_with_its_arguments():
    script = 'start() { vllm serve "$1" --port "$2" --tensor-parallel-size ${3:-1}; }\nstart m-p 8100 2 &\nstart m-d 8200'
    got = launches(script)
    assert [(_flags(x)[0], _flags(x)[1]["--port"], _flags(x)[1]["--tensor-parallel-size"]) for x in got] == [
        ("m-p", "8100", "2"), ("m-d", "8200", "1")]


def test_the_branch_the_shell_takes_is_read_and_an_unknown_condition_leaves_the_flag_unknown():
    # POSIX 2.9.4.4 (if) and 2.9.4.3 (case): the first branch whose condition holds runs; where the condition reads
    # a variable the manifest does not set, every possible branch is read and a flag they set differently is unknown.
    script = ('if [ "$ROLE" = prefill ]; then vllm serve m --port 1; elif true; then vllm serve m --port 2; '
              "else vllm serve m --port 3; fi")
    assert [_flags(x)[1]["--port"] for x in launches(script)] == [unknown("ROLE")]
    assert [_flags(x)[1]["--port"] for x in launches(script, ContainerEnv({"ROLE": "prefill"}))] == ["1"]
    assert [_flags(x)[1]["--port"] for x in launches(script, ContainerEnv({"ROLE": "decode"}))] == ["2"]
    case = 'case "$ROLE" in prefill) echo p ;; decode) vllm serve m --port 4 ;; *) vllm serve m --port 5 ;; esac'
    assert [_flags(x)[1]["--port"] for x in launches(case)] == [unknown("ROLE")]
    assert [_flags(x)[1]["--port"] for x in launches(case, ContainerEnv({"ROLE": "decode"}))] == ["4"]
    assert [_flags(x)[1]["--port"] for x in launches(case, ContainerEnv({"ROLE": "other"}))] == ["5"]
    assert launches(case, ContainerEnv({"ROLE": "prefill"})) == []


def test_a_nested_sh_c_is_read():
    (got,) = launches("pip install nixl==0.6.0 && exec bash -c 'vllm serve m --port 8100'")
    assert _flags(got) == ("m", {"--port": "8100"})


@pytest.mark.parametrize("model", ["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-70B-Instruct"])
def test_a_variable_holding_several_flags_is_split_into_words_unless_quoted(model):
    script = f'M="--model {model} --tensor-parallel-size 4 --block-size 64"\nvllm serve $M --port 1 & vllm serve "$M"'
    split, quoted = launches(script)
    assert _flags(split) == (model, {"--model": model, "--tensor-parallel-size": "4", "--block-size": "64",
                                     "--port": "1"})
    assert split.argv[2:4] == ("--model", model)
    assert quoted.argv == ("vllm", "serve", f"--model {model} --tensor-parallel-size 4 --block-size 64")


@pytest.mark.parametrize("script, flag, want", [
    ("export TP=4; vllm serve m --tensor-parallel-size $TP", "--tensor-parallel-size", "4"),
    ("TP=2 && vllm serve m --tensor-parallel-size ${TP}", "--tensor-parallel-size", "2"),
    ("BS=; vllm serve m --block-size ${BS:-16}", "--block-size", "16"),
    ("BS=; vllm serve m --block-size ${BS-16}x", "--block-size", "x"),
    ("BS=; : ${BS:=128}; vllm serve m --block-size $BS", "--block-size", "128"),
    ("BS=; vllm serve m --block-size ${BS:+64}16", "--block-size", "16"),
    ("BS=8; vllm serve m --block-size ${BS:+64}", "--block-size", "64"),
    ("export BS=32; vllm serve m --block-size ${BS:-16}", "--block-size", "32"),
    ("N=3; vllm serve m --port $((8000 + N * 2))", "--port", "8006"),
    ("vllm serve m --kv-transfer-config '{\"kv_role\":\"$ROLE\"}'", "--kv-transfer-config", '{"kv_role":"$ROLE"}'),
    ('R=kv_producer; vllm serve m --kv-transfer-config "{\\"kv_role\\":\\"$R\\"}"', "--kv-transfer-config",
     '{"kv_role":"kv_producer"}'),
])
def test_known_values_are_expanded(script, flag, want):
    (got,) = launches(script)
    assert _flags(got)[1][flag] == want


@pytest.mark.parametrize("script, flag, name", [
    ("vllm serve m --tensor-parallel-size $TP", "--tensor-parallel-size", "TP"),    # the image's ENV may set it
    ("vllm serve m --tensor-parallel-size $(nproc)", "--tensor-parallel-size", "nproc"),
    ("vllm serve m --port $((BASE + 1))", "--port", "BASE"),
    ("for p in 1; do :; done; vllm serve m --block-size ${BS#x}", "--block-size", "BS"),
])
def test_unknown_values_are_named_not_guessed(script, flag, name):
    (got,) = launches(script)
    assert unknown_names(str(_flags(got)[1][flag])) == [name]


@pytest.mark.parametrize("form, want", [("${BS:-32}", "32"), ("${BS-32}", "32"), ("${BS:=32}", "32"),
                                        ("${BS:+32}", True), ("$BS", unknown("BS")), ("${BS}", unknown("BS"))])
def test_a_variable_nothing_sets_takes_its_default(form, want):
    # nothing the files show sets BS and the image's ENV is not known to: the shell applies the default (POSIX 2.6.2;
    # ${BS:+32} expands to nothing, leaving a bare --block-size);
    # a bare $BS stays unknown (issue 9, session 26: a default was read as unknown, hiding faulty pairs)
    (got,) = launches(f"vllm serve m --block-size {form}")
    assert _flags(got)[1].get("--block-size") == want


def test_one_variable_read_both_ways():
    # ${TP:-1} is 1 where nothing sets TP; a bare "$TP" of the same unset variable stays unknown (never "")
    (got,) = launches('vllm serve m --tensor-parallel-size ${TP:-1} --pipeline-parallel-size "$TP"')
    flags = _flags(got)[1]
    assert flags["--tensor-parallel-size"] == "1" and flags["--pipeline-parallel-size"] == unknown("TP")


def test_a_default_on_an_unknown_condition_leaves_both_branches():
    # ENABLE_SPEC may be set by an envFrom source not in the files: both branches are read, the flag they disagree on
    # is unknown
    script = ('if [ "${ENABLE_SPEC:-0}" = 1 ]; then S=--enforce-eager; else S=--no-enforce-eager; fi\n'
              "vllm serve m $S --block-size 16")
    (got,) = launches(script, ContainerEnv.of([], [{"configMapRef": {"name": "c"}}]))
    assert unknown_names(str(_flags(got)[1]["--enforce-eager"])) and _flags(got)[1]["--block-size"] == "16"


def test_a_default_does_not_win_over_a_value_the_manifest_hides():
    env = ContainerEnv.of([{"name": "TP", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "tp"}}}])
    (got,) = launches("vllm serve m --tensor-parallel-size ${TP:-8}", env)
    assert _flags(got)[1]["--tensor-parallel-size"] == unknown("TP")
    (opened,) = launches("vllm serve m --block-size ${BS:-8}", ContainerEnv.of([], [{"configMapRef": {"name": "c"}}]))
    assert _flags(opened)[1]["--block-size"] == unknown("BS")


def test_positional_arguments_after_the_script_are_its_parameters():
    (got,) = container_launches({"command": ["sh", "-c", 'exec vllm serve "$@"', "--"],
                                 "args": ["Qwen/Qwen3-8B", "--port", "8100"]}, image_runs_vllm=False)
    assert got.argv == ("vllm", "serve", "Qwen/Qwen3-8B", "--port", "8100")


def test_a_retry_loop_around_the_engine_is_one_engine():
    (got,) = launches("until vllm serve m --port 2; do echo restarting; sleep 5; done")
    assert _flags(got) == ("m", {"--port": "2"})


def test_a_plain_command_is_one_launch_and_non_engines_none():
    (one,) = container_launches({"command": ["vllm", "serve", "m"], "args": ["--port", "1"]}, image_runs_vllm=False)
    assert one.argv == ("vllm", "serve", "m", "--port", "1") and one.env == {}
    assert container_launches({"command": ["sh", "-c", "python3 -m dynamo.frontend & sleep 1"]},
                              image_runs_vllm=False) == []


# --- pairing and verdicts through pdd check -------------------------------------------------------------------


def _two_engine_pod(image="vllm/vllm-openai:v0.28.0", model="Qwen/Qwen3-8B", decode_extra="", ports=(5600, 5601),
                    kind="Deployment"):
    script = (f'M="{model} --tensor-parallel-size 1 --block-size 16"\n'
              f"CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT={ports[0]} vllm serve $M --port 8100 "
              f"--kv-transfer-config '{PRODUCER}' &\n"
              f"CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT={ports[1]} vllm serve $M --port 8200 "
              f"--kv-transfer-config '{CONSUMER}' {decode_extra}&\n"
              "wait\n")
    container = {"name": "engines", "image": image, "command": ["/bin/bash", "-c", script],
                 "resources": {"limits": {"nvidia.com/gpu": "2"}}}
    pod = {"metadata": {"labels": {"app": "pd"}}, "spec": {"containers": [container]}}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pd", "namespace": "ns"}, **{"spec": pod["spec"]}}
    if kind == "LeaderWorkerSet":
        return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                "metadata": {"name": "pd", "namespace": "ns"},
                "spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": pod}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "pd", "namespace": "ns"},
            "spec": {"template": pod}}


def _check(tmp_path, capsys, doc):
    return check_text(tmp_path, capsys, yaml.safe_dump(doc), "pd.yaml")


def test_two_engines_of_one_script_become_one_pair_of_one_object():
    engines, unreadable = scan(_two_engine_pod())
    assert unreadable == [] and [e.role for e in engines] == ["prefill", "decode"]
    assert [e.config.env["CUDA_VISIBLE_DEVICES"] for e in engines] == ["0", "1"]
    assert [e.config.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] for e in engines] == ["5600", "5601"]
    assert [e.config.block_size for e in engines] == [16, 16]
    assert engines[0].where.endswith("line 2") and engines[1].where.endswith("line 3")
    [(pair, _, _)], unpaired = pair_engines(engines)
    assert unpaired == [] and pair.paired_by == "both roles are in one object" and pair.shared_network


@pytest.mark.parametrize("kind", ["Deployment", "Pod", "LeaderWorkerSet"])
@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.28.0", "vllm/vllm-openai:v0.11.0"])
def test_a_valid_two_engine_script_passes(tmp_path, capsys, kind, image):
    code, report = _check(tmp_path, capsys, _two_engine_pod(image=image, kind=kind))
    errors = [f["rule"] for r in report["results"] for f in r["findings"] if f["severity"] == "error"]
    assert (code, errors, len(report["results"])) == (0, [], 1), report


@pytest.mark.parametrize("model", ["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct"])
def test_each_engine_is_judged_on_its_own_flags(tmp_path, capsys, model):
    code, report = _check(tmp_path, capsys, _two_engine_pod(model=model, decode_extra="--kv-cache-dtype fp8 "))
    errors = {f["rule"] for r in report["results"] for f in r["findings"] if f["severity"] == "error"}
    assert code == 1 and "kv-cache-dtype-mismatch" in errors, report


def test_engines_of_one_pod_on_one_side_channel_port_conflict(tmp_path, capsys):
    code, report = _check(tmp_path, capsys, _two_engine_pod(ports=(5600, 5600)))
    errors = {f["rule"] for r in report["results"] for f in r["findings"] if f["severity"] == "error"}
    assert code == 1 and "side-channel-port-conflict" in errors, report


def test_engines_of_different_models_in_one_script_are_one_broken_pair(tmp_path, capsys):
    doc = _two_engine_pod()
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["command"][2] = container["command"][2].replace("vllm serve $M --port 8200",
                                                              "vllm serve other/model --port 8200")
    code, report = _check(tmp_path, capsys, doc)
    errors = {f["rule"] for r in report["results"] for f in r["findings"] if f["severity"] == "error"}
    assert code == 1 and "model-mismatch" in errors, report


def _one_container(lines, gpus="2"):
    script = "\n".join(lines) + "\nwait\n"
    container = {"name": "engines", "image": "vllm/vllm-openai:v0.28.0", "command": ["bash", "-c", script],
                 "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pd", "namespace": "ns"},
            "spec": {"containers": [container]}}


def _launch(role, prefix="", extra=""):
    kv = PRODUCER if role == "prefill" else CONSUMER
    port = 8100 if role == "prefill" else 8200
    side = 5600 if role == "prefill" else 5601
    return (f"{prefix} VLLM_NIXL_SIDE_CHANNEL_PORT={side} vllm serve Qwen/Qwen3-8B --port {port} {extra} "
            f"--kv-transfer-config '{kv}' &")


@pytest.mark.parametrize("prefill, decode, refused", [
    (("", ""), ("", ""), True),                                        # both on GPU 0 at 0.9 each
    (("CUDA_VISIBLE_DEVICES=1", ""), ("CUDA_VISIBLE_DEVICES=1", ""), True),
    (("CUDA_VISIBLE_DEVICES=0,1", "-tp 2"), ("CUDA_VISIBLE_DEVICES=1", ""), True),  # TP 2 takes GPU 1 too
    (("", "--gpu-memory-utilization 0.45"), ("", "--gpu-memory-utilization 0.5"), False),
    (("CUDA_VISIBLE_DEVICES=0", ""), ("CUDA_VISIBLE_DEVICES=1", ""), False),
    (("CUDA_VISIBLE_DEVICES=$(pick)", ""), ("", ""), False),               # not known: not judged
])
def test_engines_of_one_container_on_one_gpu_must_fit_its_memory(tmp_path, capsys, prefill, decode, refused):
    doc = _one_container([_launch("prefill", *prefill), _launch("decode", *decode)])
    code, report = _check(tmp_path, capsys, doc)
    errors = {f["rule"] for r in report["results"] for f in r["findings"] if f["severity"] == "error"}
    assert ("engines-share-gpu" in errors) is refused and code == (1 if refused else 0), report


def test_engines_in_separate_containers_of_one_pod_are_not_judged_for_gpus(tmp_path, capsys):
    doc = _one_container([_launch("prefill")])
    second = json.loads(json.dumps(doc["spec"]["containers"][0]))
    second["name"], second["command"][2] = "decode", _launch("decode") + "\nwait\n"
    doc["spec"]["containers"].append(second)
    code, report = _check(tmp_path, capsys, doc)
    assert code == 0 and all(f["rule"] != "engines-share-gpu" for r in report["results"] for f in r["findings"])


@pytest.mark.parametrize("image", ["nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.0", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1"])
def test_two_dynamo_worker_lines_in_one_container_are_a_pair(tmp_path, capsys, image):
    # Dynamo 0.7.0's worker has no --disaggregation-mode and builds NIXL from its own --connector (no
    # --kv-transfer-config beside it): its role flags instead (dynamo-connector-flag, cli-flag-not-yet, set 67)
    kv = "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"
    old = image.endswith(":0.7.0")
    role = {"prefill": "--is-prefill-worker" if old else f"--disaggregation-mode prefill {kv}",
            "decode": "--is-decode-worker" if old else f"--disaggregation-mode decode {kv}"}
    lines = ["python3 -m dynamo.frontend --http-port 8000 &"] + [
        f"CUDA_VISIBLE_DEVICES={i} VLLM_NIXL_SIDE_CHANNEL_PORT={5600 + i} python3 -m dynamo.vllm --model "
        f"meta-llama/Llama-3.1-8B-Instruct {role[mode]} &" for i, mode in enumerate(["prefill", "decode"])]
    doc = _one_container(lines)
    doc["spec"]["containers"][0]["image"] = image
    engines, _ = scan(doc)
    assert [(e.role, e.role_from, e.config.env["CUDA_VISIBLE_DEVICES"]) for e in engines] == [
        ("prefill", "flag", "0"), ("decode", "flag", "1")]
    code, report = _check(tmp_path, capsys, doc)
    assert len(report["results"]) == 1 and report["results"][0]["pairedBy"] == "both roles are in one object", report
    assert not [f for r in report["results"] for f in r["findings"] if f["severity"] == "error"], report


@pytest.mark.parametrize("decode_port, refused", [("", True), ("--port 8000", True), ("--port 5600", True),
                                                  ("--port 8200", False)])
def test_engines_of_one_container_listen_on_their_own_ports(tmp_path, capsys, decode_port, refused):
    kv = "'" + '{"kv_connector":"NixlConnector","kv_role":"%s"}' + "'"
    lines = [f"CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve Qwen/Qwen3-8B --kv-transfer-config "
             f"{kv % 'kv_producer'} &",
             f"CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5700 vllm serve Qwen/Qwen3-8B {decode_port} "
             f"--kv-transfer-config {kv % 'kv_consumer'} &"]
    code, report = _check(tmp_path, capsys, _one_container(lines))
    found = [f for r in report["results"] for f in r["findings"] if f["rule"] == "listener-port-conflict"]
    assert bool(found) is refused and code == (1 if refused else 0), report
    if found:
        assert "engines of one container" in found[0]["message"] and "line of the script" in found[0]["fix"]


def test_two_containers_of_one_pod_on_the_default_http_port_conflict(tmp_path, capsys):
    doc = _one_container([_launch("prefill").replace("--port 8100", "")])
    second = json.loads(json.dumps(doc["spec"]["containers"][0]))
    second["name"], second["command"][2] = "decode", _launch("decode").replace("--port 8200", "") + "\nwait\n"
    doc["spec"]["containers"].append(second)
    code, report = _check(tmp_path, capsys, doc)
    found = [f for r in report["results"] for f in r["findings"] if f["rule"] == "listener-port-conflict"]
    assert code == 1 and found and "containers of one pod" in found[0]["message"], report
