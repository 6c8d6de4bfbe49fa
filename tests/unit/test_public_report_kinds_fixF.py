"""Variants of what sets 114 and 120 taught (issue 9, fixF), with negative controls.

Service-link-shaped defaults (set 114, Dynamo's disagg_flexkv.sh): ``${DYN_VLLM_KV_EVENT_PORT:-20081}`` in a pod's
script was never taken at its default, because a Service named ``dyn-vllm-kv-event`` would make the kubelet set
``DYN_VLLM_KV_EVENT_PORT=tcp://<ip>:<port>``. The files checked are now read as the whole deployment
(:mod:`pdd_operator.compat.service_links`): for a plain workload's pods the default is what the shell expands unless
a Service among the files produces that name (then unknown), ``enableServiceLinks: false`` makes it the default
always, and an ``envFrom`` source that may set it keeps it unknown.

A batch shell's array read inside a single-quoted ``bash -c '...'`` (set 120, NeMo Gym's data-parallel Slurm fixture):
the inner shell is another process, which gets exported scalar variables only (bash exports no arrays), so
``--data-parallel-address ${gym_nodes[0]}`` is left without its value and argparse exits 2 ("expected one
argument"): ``cli-option-missing-value``.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from pdd_operator.cli import main
from pdd_operator.compat.service_links import service_link_names
from pdd_operator.vllm.expansion import ContainerEnv
from pdd_operator.vllm.flags import missing_values
from pdd_operator.vllm.script import launches
from tests.unit.test_turn2_variants import check, container, rules, workload

DATA = Path(__file__).parent / "data"
FLEXKV = DATA / "public_reports_114" / "inputs" / "dynamo-launch-disagg-flexkv-qwen3-06b-v150.yaml"
KVP = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KVD = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'


def _service(name, ports=({"port": 80},), namespace=None, **spec):
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"ports": list(ports), **spec}}


def _flexkv(**pod):
    doc = yaml.safe_load(FLEXKV.read_text())
    doc["spec"]["template"]["spec"].update(pod)
    return doc


# --- service-link-shaped defaults ------------------------------------------------------------------------------


def test_flexkv_kv_event_port_default_is_taken_without_such_a_service(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _flexkv())
    assert code == 0, out
    assert "DYN_VLLM_KV_EVENT_PORT" not in str(out)


def test_flexkv_with_a_service_of_that_name_keeps_the_port_unknown(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _flexkv(), _service("dyn-vllm-kv-event"))
    assert code == 3 and "DYN_VLLM_KV_EVENT_PORT" in str(out)


def test_flexkv_service_in_another_namespace_does_not_count(tmp_path, capsys):
    code, _ = check(tmp_path, capsys, _flexkv(), _service("dyn-vllm-kv-event", namespace="other"))
    assert code == 0


def test_flexkv_headless_service_of_that_name_gives_no_variables(tmp_path, capsys):
    code, _ = check(tmp_path, capsys, _flexkv(), _service("dyn-vllm-kv-event", clusterIP="None"))
    assert code == 0


def test_flexkv_service_links_off_takes_the_default_even_with_the_service(tmp_path, capsys):
    code, _ = check(tmp_path, capsys, _flexkv(enableServiceLinks=False), _service("dyn-vllm-kv-event"))
    assert code == 0


def test_flexkv_env_from_a_config_map_not_in_the_files_keeps_it_unknown(tmp_path, capsys):
    doc = _flexkv()
    doc["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "dynamo-env"}}]
    code, out = check(tmp_path, capsys, doc)
    assert code == 3 and "DYN_VLLM_KV_EVENT_PORT" in str(out)


def _one_pod_pair(kind="Deployment", **pod):
    script = ("P=${PREFILL_NIXL_PORT:-5600}\nD=${DECODE_NIXL_PORT:-5600}\n"
              f"CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=$P vllm serve Qwen/Qwen3-8B --port 8100 "
              f"--kv-transfer-config '{KVP}' &\n"
              f"CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=$D vllm serve Qwen/Qwen3-8B --port 8200 "
              f"--kv-transfer-config '{KVD}' &\nwait\n")
    c = container([script], command=["bash", "-c"], gpus=2)
    return workload("qwen-pd", "pd", c, kind=kind, labels_key="example.com/tier", pod=pod or None)


def test_one_pod_side_channel_defaults_that_collide_are_an_error(tmp_path, capsys):
    """Both defaults are 5600 in one network namespace: the second engine's side channel cannot bind."""
    for kind in ("Deployment", "StatefulSet"):
        code, out = check(tmp_path, capsys, _one_pod_pair(kind), _service("model-api"))
        assert code == 1 and "side-channel-port-conflict" in rules(out, "error"), kind


def test_one_pod_side_channel_default_behind_a_service_of_that_name_is_not_judged(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _one_pod_pair(), _service("decode-nixl"))
    assert code != 1 and "side-channel-port-conflict" not in rules(out, "error")


def test_one_pod_side_channel_defaults_with_service_links_off(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _one_pod_pair(enableServiceLinks=False), _service("decode-nixl"))
    assert code == 1 and "side-channel-port-conflict" in rules(out, "error")


def test_service_link_names_follow_the_kubelet():
    names = service_link_names(_service("dyn-vllm-kv-event", ports=[{"port": 20081, "name": "zmq-pub"},
                                                                     {"port": 53, "protocol": "UDP"}]))
    assert {"DYN_VLLM_KV_EVENT_SERVICE_HOST", "DYN_VLLM_KV_EVENT_SERVICE_PORT", "DYN_VLLM_KV_EVENT_PORT",
            "DYN_VLLM_KV_EVENT_SERVICE_PORT_ZMQ_PUB", "DYN_VLLM_KV_EVENT_PORT_20081_TCP",
            "DYN_VLLM_KV_EVENT_PORT_53_UDP_ADDR"} <= names
    assert service_link_names(_service("x", type="ExternalName")) == frozenset()


def test_unknown_services_keep_every_service_name_possible():
    """Without the files' Services (a Dynamo graph's pods, whose operator adds Services) nothing changes."""
    assert not ContainerEnv().unset("DYN_VLLM_KV_EVENT_PORT")
    assert ContainerEnv(service_links=frozenset()).unset("DYN_VLLM_KV_EVENT_PORT")
    assert not ContainerEnv(service_links=frozenset()).unset("KUBERNETES_SERVICE_PORT")
    assert not ContainerEnv(service_links=frozenset()).unset("LWS_LEADER_ADDRESS")
    assert not ContainerEnv(service_links=frozenset({"DYN_VLLM_KV_EVENT_PORT"})).unset("DYN_VLLM_KV_EVENT_PORT")


# --- an outer shell's array inside srun/ssh bash -c; options left without their value -----------------------------

SRUN = ("srun --nodelist={node} --nodes=1 {srun_opts}--container-image=vllm/vllm-openai:v0.34.0 bash -c "
        "{q}export VLLM_NIXL_SIDE_CHANNEL_HOST=$(hostname)\nexec vllm serve Qwen/Qwen3-8B --port {port} "
        "--data-parallel-size 1 {dpa} {addr} --data-parallel-rpc-port {rpc} --kv-transfer-config {kv}{q} &\n")
SBATCH = "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=1\nnodes=(node-a node-b)\n{pre}\n"


def _sbatch(tmp_path, capsys, *, quote="'", pre="", srun_opts="", dpa="--data-parallel-address",
            p_addr="${nodes[0]}", d_addr="${nodes[1]}"):
    if quote == "'":
        kvp, kvd = "'\"'\"'" + KVP + "'\"'\"'", "'\"'\"'" + KVD + "'\"'\"'"
    else:
        kvp, kvd = "'" + KVP.replace('"', '\\"') + "'", "'" + KVD.replace('"', '\\"') + "'"
    path = tmp_path / "job.sbatch"
    common = {"q": quote, "srun_opts": srun_opts, "dpa": dpa}
    path.write_text(SBATCH.format(pre=pre)
                    + SRUN.format(node="node-a", port=8001, addr=p_addr, rpc=13345, kv=kvp, **common)
                    + SRUN.format(node="node-b", port=8002, addr=d_addr, rpc=13346, kv=kvd, **common) + "wait\n")
    code = main(["check", str(path), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_batch_array_inside_single_quoted_srun_bash_c_leaves_the_address_empty(tmp_path, capsys):
    code, out = _sbatch(tmp_path, capsys)
    assert code == 1 and "cli-option-missing-value" in rules(out, "error")


def test_short_option_and_srun_export_all_do_not_carry_arrays(tmp_path, capsys):
    code, out = _sbatch(tmp_path, capsys, dpa="-dpa", srun_opts="--export=ALL ")
    assert code == 1 and "cli-option-missing-value" in rules(out, "error")


def test_double_quoted_bash_c_expands_the_array_in_the_batch_shell(tmp_path, capsys):
    code, out = _sbatch(tmp_path, capsys, quote='"')
    assert out["results"] and "cli-option-missing-value" not in rules(out), out


def test_exported_scalar_crosses_into_the_srun_shell(tmp_path, capsys):
    code, out = _sbatch(tmp_path, capsys, pre='export P_HEAD="${nodes[0]}"\nexport D_HEAD="${nodes[1]}"',
                        p_addr="$P_HEAD", d_addr="$D_HEAD")
    assert out["results"] and "cli-option-missing-value" not in rules(out), out


def test_array_the_inner_shell_sets_itself_is_its_own():
    found = launches("nodes=(a b)\nbash -c 'heads=(h0 h1); vllm serve m --data-parallel-address ${heads[1]} "
                     "--data-parallel-rpc-port 1'", ContainerEnv(kubernetes=False))
    assert list(found[0].argv[3:5]) == ["--data-parallel-address", "h1"]


def test_ssh_remote_shell_gets_no_arrays_either():
    found = launches("nodes=(a b)\nssh b 'vllm serve m --data-parallel-address ${nodes[0]} --data-parallel-rpc-port 1'",
                     ContainerEnv(kubernetes=False))
    assert missing_values(list(found[0].argv)) == ("--data-parallel-address",)
    outer = launches("nodes=(a b)\nvllm serve m --data-parallel-address ${nodes[0]} --data-parallel-rpc-port 1",
                     ContainerEnv(kubernetes=False))
    assert missing_values(list(outer[0].argv)) == ()


def test_an_array_from_a_command_has_unknown_elements():
    """``($(scontrol show hostnames ...))`` splits into a number of words not known: ``${a[4]}`` is not empty."""
    found = launches('a=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))\nexport H="${a[4]}"\n'
                     "bash -c 'vllm serve m --data-parallel-address $H --data-parallel-rpc-port 1'",
                     ContainerEnv(kubernetes=False))
    assert missing_values(list(found[0].argv)) == ()


def test_missing_values_reads_argparse_words():
    assert missing_values(["vllm", "serve", "m", "--data-parallel-address"]) == ("--data-parallel-address",)
    assert missing_values(["vllm", "serve", "m", "-dpp", "--port", "1"]) == ("-dpp",)
    assert missing_values(["vllm", "serve", "m", "--data-parallel-address=", "--port", "1"]) == ()
    assert missing_values(["vllm", "serve", "m", "--data-parallel-address", "10.0.0.1", "--port", "1"]) == ()
    assert missing_values(["vllm", "serve", "m", "--data-parallel-address", "<unknown:H>", "--port", "1"]) == ()
    assert missing_values(["vllm", "serve", "m", "--data-parallel-size", "--", "2"]) == ()
    assert missing_values(["vllm", "serve", "m", "--max-model-len", "--port", "1"]) == ()  # not in the table


def test_missing_value_in_a_kubernetes_container_is_an_error(tmp_path, capsys):
    docs = [workload(f"q-{role}", role, container(["Qwen/Qwen3-8B", "--kv-transfer-config", kv,
                                                    "--data-parallel-size", "1", "--data-parallel-address",
                                                    *(["10.0.0.1"] if role == "prefill" else []),
                                                    "--data-parallel-rpc-port", "13345"]))
            for role, kv in (("prefill", KVP), ("decode", KVD))]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "cli-option-missing-value" in rules(out, "error")
    assert "decode: --data-parallel-address" in str(out) and "prefill: --data-parallel-address" not in str(out)


# --- srun node pools: where each role runs --------------------------------------------------------------------------

POOL_SRUN = ("srun {opts} --container-image=vllm/vllm-openai:v0.34.0 bash -c '{host}export VLLM_NIXL_SIDE_CHANNEL_PORT="
             "{side}\nexec vllm serve Qwen/Qwen3-8B "
             "--port {port} --kv-transfer-config '\"'\"'{kv}'\"'\"'' &\n")
HOST = "export VLLM_NIXL_SIDE_CHANNEL_HOST=$(hostname)\n"


def _pools(tmp_path, capsys, p_opts, d_opts, *, prefill_host=False, pre=""):
    """A Slurm job of four nodes whose prefill and decode srun steps take ``p_opts`` / ``d_opts``; the prefill
    advertises vLLM's default side-channel host (localhost) unless ``prefill_host``."""
    path = tmp_path / "pools.sbatch"
    path.write_text("#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --gpus-per-node=1\n" + pre + "\n"
                    + POOL_SRUN.format(opts=p_opts, host=HOST if prefill_host else "", side=5600, port=8001, kv=KVP)
                    + POOL_SRUN.format(opts=d_opts, host=HOST, side=5601, port=8002, kv=KVD) + "wait\n")
    code = main(["check", str(path), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


NODES = 'nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))\n'


def _refused(out) -> bool:
    return "side-channel-host-not-routable" in rules(out, "error")


def _warned(out) -> bool:
    return "side-channel-host-not-routable" in rules(out, "warning")


def test_disjoint_literal_nodelists_make_a_loopback_host_an_error(tmp_path, capsys):
    code, out = _pools(tmp_path, capsys, "--nodelist=node-a,node-b -N 2", "--nodelist=node-c,node-d -N 2")
    assert code == 1 and _refused(out)


def test_disjoint_slices_of_the_job_nodes_make_a_loopback_host_an_error(tmp_path, capsys):
    pre = NODES + 'export P_NODES="$(IFS=,; echo "${nodes[*]:0:2}")"\nexport D_NODES="$(IFS=,; echo "${nodes[*]:2:2}")"'
    code, out = _pools(tmp_path, capsys, '--nodelist="${P_NODES}" --nodes=2', '--nodelist="${D_NODES}" --nodes=2',
                       pre=pre)
    assert code == 1 and _refused(out)


def test_slices_written_on_the_srun_line_and_single_elements(tmp_path, capsys):
    code, out = _pools(tmp_path, capsys, '-w "${nodes[@]:0:1}"', '-w "${nodes[@]:1:3}"', pre=NODES)
    assert code == 1 and _refused(out)
    code, out = _pools(tmp_path, capsys, '--nodelist=${nodes[0]}', '--nodelist=${nodes[3]}', pre=NODES)
    assert code == 1 and _refused(out)


def test_relative_steps_on_disjoint_nodes(tmp_path, capsys):
    code, out = _pools(tmp_path, capsys, "--relative=0 -N 2", "--relative=2 -N 2")
    assert code == 1 and _refused(out)


def test_exclude_keeps_the_decode_off_the_prefill_node(tmp_path, capsys):
    code, out = _pools(tmp_path, capsys, "-w node-a", "--exclude=node-a -N 3")
    assert code == 1 and _refused(out)


def test_overlapping_pools_stay_a_warning(tmp_path, capsys):
    for p, d, pre in (("--nodelist=node-a,node-b", "--nodelist=node-b,node-c", ""),
                      ('--nodelist="${nodes[*]:0:3}"', '--nodelist="${nodes[*]:2:2}"', NODES),
                      ("--relative=0 -N 3", "--relative=2 -N 2", "")):
        code, out = _pools(tmp_path, capsys, p, d, pre=pre)
        assert code != 1 and not _refused(out) and _warned(out), (p, d)


def test_unknown_pools_stay_a_warning(tmp_path, capsys):
    for p, d, pre in (('--nodelist="$PREFILL_NODES"', '--nodelist="$DECODE_NODES"', ""),
                      ('--nodelist="${nodes[*]:$K:2}"', '--nodelist="${nodes[*]:2:2}"', NODES),
                      ("--nodelist=node[1-2]", "--nodelist=node[3-4]", "")):
        code, out = _pools(tmp_path, capsys, p, d, pre=pre)
        assert code != 1 and not _refused(out) and _warned(out), (p, d)


def test_disjoint_pools_with_a_routable_host_are_fine(tmp_path, capsys):
    code, out = _pools(tmp_path, capsys, "--nodelist=node-a,node-b", "--nodelist=node-c,node-d", prefill_host=True)
    assert code == 0 and "side-channel-host-not-routable" not in rules(out), out


def test_the_job_nodes_array_does_not_cross_into_the_srun_shell_either(tmp_path, capsys):
    """The array of scontrol's node names is a batch-shell array like any other: empty inside ``bash -c '...'``."""
    found = launches(NODES + "srun -N1 bash -c 'vllm serve m --data-parallel-address ${nodes[0]} "
                     "--data-parallel-rpc-port 1'", ContainerEnv(kubernetes=False))
    assert missing_values(list(found[0].argv)) == ("--data-parallel-address",)


def test_a_script_argument_is_not_an_empty_value():
    """``$5`` of a template its caller runs with arguments (vllm-ascend's external DP templates) is not known, so the
    option before it is not left without its value; inside a function, ``$N`` is the call's own argument."""
    found = launches("vllm serve m --data-parallel-address $5 --data-parallel-rpc-port $6",
                     ContainerEnv(kubernetes=False))
    assert missing_values(list(found[0].argv)) == () and "<unknown:ARG5>" in found[0].argv
    found = launches("f() { vllm serve m --data-parallel-address $2 --data-parallel-rpc-port 1; }\nf a",
                     ContainerEnv(kubernetes=False))
    assert missing_values(list(found[0].argv)) == ("--data-parallel-address",)


def test_service_links_leave_a_document_of_any_kind_value_as_it_is():
    # the API may carry any JSON under kind (the check fuzz found a list): never a TypeError
    from pdd_operator.compat.service_links import with_service_links
    for kind in (["Deployment"], {"a": 1}, None, 3):
        doc = {"kind": kind, "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}
        assert with_service_links(doc, {"default": frozenset({"A_PORT"})}) is doc
