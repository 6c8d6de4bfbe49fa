"""Variants of what the ninety-fifth public-report set (tests/unit/data/public_reports_95) taught, with negative
controls.

1. dstack run configurations (``type: service`` with replica groups; dstack's own P/D examples) were read as Helm
   values and left "not checked". Each replica group is now one engine of its own (its ``commands``, ``image``, the
   configuration's ``env``, ``resources.gpu``), never in another group's network namespace (each replica is a job
   of its own, dstack ``jobs_submitted.py`` ``_prepare_job_runtime_data``), so the rules judge dstack engines as
   Kubernetes ones and name the groups' keys; another engine's P/D workers (SGLang) are "not checked", as in a pod.
2. vLLM's gRPC server (``python -m vllm.entrypoints.grpc_server``, what SMG's gRPC workers run; from 0.30.0 also
   ``vllm.entrypoints.launchers.grpc_server``) was not taken for a vLLM engine: it parses ``AsyncEngineArgs`` as
   ``vllm serve`` does (0.18.0 grpc_server.py l.140-161, 0.34.0 launchers/grpc_server.py l.289-310), in a dstack
   group, a shell script or a Kubernetes container alike.
3. SkyPilot tasks on one node are read through their ``setup`` + ``run`` scripts (``envs`` exported first, inside the
   ``resources.image_id`` container), as shell scripts are; tasks on several nodes stay "not checked" (each node's
   ``SKYPILOT_NODE_RANK`` is not in the files).
4. Infrastructure-as-code files that configure a P/D pair in a form these rules do not read (Terraform HCL, Ansible
   playbooks and task files) were "nothing to check" (exit 4): they are "not checked", named by their format, with
   what to check instead.
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.cli import main
from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

NIXL = '{"kv_connector":"NixlConnector","kv_role":"%s"}'
HOST = "export VLLM_NIXL_SIDE_CHANNEL_HOST=$(hostname -I | awk '{print $1}')"
GRPC = "python3 -m vllm.entrypoints.grpc_server"


def _group(role: str, image: str | None, extra: str = "", entry: str = GRPC, host: bool = True, gpu="H200",
           **keys) -> dict:
    line = f"{entry} --model \"$MODEL_ID\" --host 0.0.0.0 --port 8000 --kv-transfer-config '{NIXL % role}' {extra}"
    group = {"count": "1..4", "scaling": {"metric": "rps", "target": 3},
             "commands": ([HOST] if host else []) + [line.strip()], "resources": {"gpu": gpu}, **keys}
    if image is not None:
        group["image"] = image
    return group


def _service(prefill: dict, decode: dict, model: str = "zai-org/GLM-4.5-Air-FP8", **top) -> dict:
    router = {"count": 1, "python": "3.12", "commands": ["pip install smg", "smg launch --pd-disaggregation"],
              "router": {"type": "sglang"}, "resources": {"cpu": 4}}
    return {"type": "service", "name": "prefill-decode", "env": ["HF_TOKEN", f"MODEL_ID={model}"],
            "replicas": [router, prefill, decode], "port": 8000, **top}


def _check(tmp_path, capsys, *docs, name: str = "pd.dstack.yml") -> tuple[int, dict]:
    return check_text(tmp_path, capsys, yaml.safe_dump_all(list(docs), sort_keys=False), name)


def _fields(out: dict) -> list[str]:
    return [f for r in out["results"] for finding in r["findings"] for f in finding["fields"]]


SMG_18, SMG_19 = "ghcr.io/lightseekorg/smg:1.4.1-vllm-v0.18.0", "ghcr.io/lightseekorg/smg:1.4.1-vllm-v0.19.0"
OPENAI_22 = "vllm/vllm-openai:v0.22.0"


# --- 1. dstack configurations: each replica group an engine, apart from the others ---------------------------------


@pytest.mark.parametrize(("image", "model"), [
    (SMG_18, "zai-org/GLM-4.5-Air-FP8"),
    (SMG_19, "Qwen/Qwen3-8B"),
    (OPENAI_22, "meta-llama/Llama-3.1-8B-Instruct"),
])
def test_the_loopback_side_channel_host_of_replica_groups_is_refused_and_fixed_in_their_commands(
        tmp_path, capsys, image, model):
    code, out = _check(tmp_path, capsys, _service(_group("kv_producer", image, host=False),
                                                  _group("kv_consumer", image, host=False), model=model))
    assert code == 1 and rules(out, "error") == {"side-channel-host-not-routable"}, out
    finding = next(f for r in out["results"] for f in r["findings"])
    assert "replica group's commands" in finding["fix"] and "downward API" not in finding["fix"], finding
    assert all(" (dstack) replicas[" in f and not f.startswith("spec.") for f in _fields(out)), _fields(out)


@pytest.mark.parametrize("image", [SMG_18, SMG_19, OPENAI_22])
def test_groups_that_export_their_own_host_are_a_valid_pair(tmp_path, capsys, image):
    code, out = _check(tmp_path, capsys, _service(_group("kv_producer", image), _group("kv_consumer", image)))
    assert code == 0 and not rules(out, "error"), out
    assert out["results"][0]["vllmVersion"] in image, out  # the release the group's image names


@pytest.mark.parametrize(("p_image", "d_image"), [(SMG_18, SMG_19), (SMG_19, OPENAI_22), ("vllm/vllm-openai:v0.20.0",
                                                                                            SMG_18)])
def test_one_groups_image_on_another_release_is_a_version_mismatch(tmp_path, capsys, p_image, d_image):
    code, out = _check(tmp_path, capsys, _service(_group("kv_producer", p_image), _group("kv_consumer", d_image)))
    assert code == 1 and "vllm-version-mismatch" in rules(out, "error"), out
    assert any(f.endswith("].image") for f in _fields(out)), _fields(out)


@pytest.mark.parametrize(("p_extra", "d_extra", "rule"), [
    ("", "--kv-cache-dtype fp8", "kv-cache-dtype-mismatch"),
    ("--kv-cache-dtype fp8", "", "kv-cache-dtype-mismatch"),
    ("--block-size 32", "", "block-size-direction"),
    ("--block-size 64", "--block-size 16", "block-size-direction"),
])
def test_one_groups_kv_geometry_is_judged_as_in_a_pod(tmp_path, capsys, p_extra, d_extra, rule):
    code, out = _check(tmp_path, capsys, _service(_group("kv_producer", SMG_18, p_extra),
                                                  _group("kv_consumer", SMG_18, d_extra)))
    assert code == 1 and rule in rules(out, "error"), out


@pytest.mark.parametrize(("p_extra", "d_extra"), [
    ("", "--block-size 32"),
    ("--kv-cache-dtype fp8", "--kv-cache-dtype fp8"),
    ("--no-enable-prefix-caching", "--enforce-eager"),
    ("--max-model-len 32768", "--max-model-len 32768"),
])
def test_flags_nixl_does_not_compare_or_that_agree_stay_valid(tmp_path, capsys, p_extra, d_extra):
    code, out = _check(tmp_path, capsys, _service(_group("kv_producer", SMG_18, p_extra),
                                                  _group("kv_consumer", SMG_18, d_extra)))
    assert code == 0 and not rules(out, "error"), out


@pytest.mark.parametrize(("image", "flag"), [(SMG_18, "--scheduler-reserve-full-isl"),
                                             (SMG_18, "--kv-cache-dtype-skip-layers attn.0")])
def test_a_flag_of_a_later_release_in_one_group_is_refused(tmp_path, capsys, image, flag):
    code, out = _check(tmp_path, capsys, _service(_group("kv_producer", image), _group("kv_consumer", image, flag)))
    assert code == 1 and rules(out, "error") & {"cli-flag-not-yet", "engine-args-invalid"}, out


def test_a_group_on_dstacks_python_image_has_no_known_release_and_the_image_of_the_configuration_is_used(
        tmp_path, capsys):
    # python: groups run dstack's base image: no vLLM release is named there; the configuration's image is taken
    # by a group that names none.
    py = _group("kv_producer", None, python="3.12")
    py["commands"].insert(0, "pip install 'vllm[grpc]==0.18.0'")
    code, out = _check(tmp_path, capsys, _service(py, _group("kv_consumer", None), image=SMG_19))
    assert "vllm-version-mismatch" not in rules(out, "error"), out
    code, out = _check(tmp_path, capsys, _service(_group("kv_producer", None), _group("kv_consumer", None),
                                                  image=SMG_18))
    assert code == 0 and not rules(out, "error"), out


@pytest.mark.parametrize(("gpu", "tp", "refused"), [("H200:2", 2, False), ("H200", 2, True), ("2", 2, False),
                                                    ({"name": "H100", "count": 4}, 4, False), ("80GB:1", 2, True),
                                                    ("H200:1..2", 2, False), ("24GB..80GB", 2, True),
                                                    ("MI300X:8", 8, False), ("amd:MI300X:1", 2, True)])
def test_a_groups_gpus_are_its_resources_gpu(tmp_path, capsys, gpu, tp, refused):
    model = "Qwen/Qwen3-8B"
    p = _group("kv_producer", SMG_18, f"--tensor-parallel-size {tp}", gpu=gpu)
    d = _group("kv_consumer", SMG_18, f"--tensor-parallel-size {tp}", gpu=gpu)
    code, out = _check(tmp_path, capsys, _service(p, d, model=model))
    assert ("parallelism-gpu-count" in rules(out, "error")) is refused, out


@pytest.mark.parametrize(("d_port", "d_extra", "rule"), [(5601, "", None), (5601, "--block-size 8", "block-size-direction"),
                                                         (5600, "", "side-channel-port-conflict")])
def test_a_configuration_without_replica_groups_runs_its_commands_on_one_instance(tmp_path, capsys, d_port, d_extra,
                                                                                 rule):
    # both engines in the top-level commands of one task: one instance, one network namespace (loopback works, but
    # the two listeners need their own ports)
    line = ("CUDA_VISIBLE_DEVICES={gpu} VLLM_NIXL_SIDE_CHANNEL_PORT={side} " + GRPC +
            " --model $MODEL_ID --port {port} --kv-transfer-config '{kv}' {extra} &")
    doc = {"type": "task", "name": "pd-one-node", "image": SMG_18, "env": ["MODEL_ID=Qwen/Qwen3-8B"],
           "commands": [line.format(gpu=0, side=5600, port=50051, kv=NIXL % "kv_producer", extra=""),
                        line.format(gpu=1, side=d_port, port=50052, kv=NIXL % "kv_consumer", extra=d_extra), "wait"],
           "resources": {"gpu": "H100:2"}}
    code, out = _check(tmp_path, capsys, doc)
    assert rules(out, "error") == ({rule} if rule else set()) and code == (1 if rule else 0), out
    assert all(" (dstack).commands" in f for f in _fields(out)), _fields(out)
    assert all("container" not in f["message"] for r in out["results"] for f in r["findings"]), out


@pytest.mark.parametrize("engine", [
    "python -m sglang.launch_server --model-path $MODEL_ID --disaggregation-mode {mode} "
    "--disaggregation-transfer-backend nixl --port 8000",
    "python3 -m dynamo.sglang --model-path $MODEL_ID --disaggregation-mode {mode} --disaggregation-transfer-backend nixl",
])
def test_sglang_replica_groups_are_not_checked_not_nothing_to_check(tmp_path, capsys, engine):
    groups = [{"count": "1..4", "scaling": {"metric": "rps", "target": 3}, "resources": {"gpu": "H200"},
               "commands": [engine.format(mode=mode)]} for mode in ("prefill", "decode")]
    doc = _service(*groups, image="lmsysorg/sglang:v0.5.10.post1")
    code, out = _check(tmp_path, capsys, doc)
    assert code == 3 and not rules(out) and len(out["notChecked"]) == 2, out
    assert all("SGLang" in n["reason"] and "(dstack) replicas[" in n["object"] for n in out["notChecked"]), out


def test_a_dstack_configuration_without_pd_engines_keeps_todays_answer(tmp_path, capsys):
    # an aggregated vLLM service: no KV connector, no role: nothing to check, as before
    doc = {"type": "service", "name": "qwen", "image": OPENAI_22, "commands": ["vllm serve Qwen/Qwen3-8B"],
           "port": 8000, "resources": {"gpu": "H100"}}
    code, out = _check(tmp_path, capsys, doc)
    assert code == 4, out


def test_a_pd_marked_configuration_whose_commands_hold_no_engine_is_named_as_dstack(tmp_path, capsys):
    # the engines come from a script the configuration does not hold: not checked, named as what it is
    doc = {"type": "service", "name": "pd", "image": SMG_18, "env": [f"KV={NIXL % 'kv_both'}"],
           "replicas": [{"count": 1, "commands": ["bash /workspace/start.sh"]}], "port": 8000}
    code, out = _check(tmp_path, capsys, doc)
    assert code == 3 and out["notChecked"][0]["object"].startswith("dstack run configuration"), out


@pytest.mark.parametrize("doc", [
    {"type": "service", "image": SMG_18, "commands": ["x"], "spec": {}},          # a key dstack does not have
    {"type": "Opaque", "commands": ["x"]},                                         # another type
    {"apiVersion": "v1", "kind": "ConfigMap", "type": "service", "commands": []},  # a Kubernetes object
])
def test_documents_that_only_look_like_dstack_are_not_read_as_it(doc):
    from pdd_operator.compat.manifests import is_dstack_configuration

    assert not is_dstack_configuration(doc)


# --- 2. vLLM's gRPC server is a vLLM engine ------------------------------------------------------------------------


@pytest.mark.parametrize(("module", "image"), [
    ("vllm.entrypoints.grpc_server", "vllm/vllm-openai:v0.18.0"),
    ("vllm.entrypoints.grpc_server", SMG_18),
    ("vllm.entrypoints.launchers.grpc_server", "vllm/vllm-openai:v0.30.0"),
])
@pytest.mark.parametrize("shell", [False, True])
def test_the_grpc_server_in_a_kubernetes_container_is_judged(tmp_path, capsys, module, image, shell):
    def c(role: str, extra: list[str]) -> dict:
        argv = ["python3", "-m", module, "--model", "Qwen/Qwen3-8B", "--host", "0.0.0.0", "--port", "50051",
                "--kv-transfer-config", NIXL % role, *extra]
        command = ["/bin/sh", "-c", " ".join(a if a[0] != "{" else f"'{a}'" for a in argv)] if shell else argv
        return {"name": "vllm", "image": image, "command": command, "env": [POD_IP],
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}

    code, out = check(tmp_path, capsys, workload("qwen-prefill", "prefill", c("kv_producer", [])),
                      workload("qwen-decode", "decode", c("kv_consumer", ["--kv-cache-dtype", "fp8"])))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out
    code, out = check(tmp_path, capsys, workload("qwen-prefill", "prefill", c("kv_producer", [])),
                      workload("qwen-decode", "decode", c("kv_consumer", [])))
    assert code == 0 and not rules(out, "error"), out


def test_the_grpc_server_in_a_shell_script_is_read(tmp_path, capsys):
    script = tmp_path / "pd.sh"
    script.write_text("#!/bin/bash\n"
                      f"CUDA_VISIBLE_DEVICES=0 {GRPC} --model Qwen/Qwen3-8B --port 50051 "
                      f"--kv-transfer-config '{NIXL % 'kv_producer'}' &\n"
                      f"CUDA_VISIBLE_DEVICES=1 {GRPC} --model Qwen/Qwen3-8B --port 50052 --block-size 8 "
                      f"--kv-transfer-config '{NIXL % 'kv_consumer'}' &\nwait\n")
    code = main(["check", str(script), "-o", "json", "--vllm-version", "0.18.0"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and "block-size-direction" in rules(out, "error"), out


# --- 3. SkyPilot tasks on one node --------------------------------------------------------------------------------


def _sky(d_extra: str = "", image: str | None = "docker:vllm/vllm-openai:v0.18.0", setup: str | None = None,
         nodes: int | None = None, d_side: int = 5601) -> dict:
    line = ("CUDA_VISIBLE_DEVICES={gpu} VLLM_NIXL_SIDE_CHANNEL_PORT={side} vllm serve $MODEL --port {port} "
            "--kv-transfer-config '{kv}' {extra} &")
    task = {"resources": {"accelerators": "H100:2", **({"image_id": image} if image else {})},
            "envs": {"MODEL": "Qwen/Qwen3-8B", "HF_TOKEN": ""},
            "run": "\n".join([line.format(gpu=0, side=5600, port=8100, kv=NIXL % "kv_producer", extra=""),
                              line.format(gpu=1, side=d_side, port=8200, kv=NIXL % "kv_consumer", extra=d_extra),
                              "python toy_proxy_server.py --prefiller-port 8100 --decoder-port 8200"])}
    if setup is not None:
        task["setup"] = setup
    if nodes is not None:
        task["num_nodes"] = nodes
    return task


@pytest.mark.parametrize(("d_extra", "d_side", "rule"), [
    ("", 5601, None),
    ("--block-size 8", 5601, "block-size-direction"),
    ("--kv-cache-dtype fp8", 5601, "kv-cache-dtype-mismatch"),
    ("", 5600, "side-channel-port-conflict"),
])
def test_a_single_node_skypilot_task_is_read_through_its_run_script(tmp_path, capsys, d_extra, d_side, rule):
    code, out = _check(tmp_path, capsys, _sky(d_extra, d_side=d_side), name="task.sky.yaml")
    assert rules(out, "error") == ({rule} if rule else set()) and code == (1 if rule else 0), out
    assert out["results"][0]["vllmVersion"] == "0.18.0", out  # the image_id container's release
    assert "(SkyPilot task setup+run)" in out["results"][0]["object"], out


@pytest.mark.parametrize(("image", "setup", "version"), [
    (None, "pip install vllm==0.20.0", "0.20.0"),                                  # setup installs the release
    ("docker:vllm/vllm-openai:v0.18.0", "pip install vllm==0.19.1", "0.19.1"),    # which replaces the image's
    ("docker:vllm/vllm-openai:v0.22.0", None, "0.22.0"),
])
def test_the_release_comes_from_setup_pins_then_the_image(tmp_path, capsys, image, setup, version):
    code, out = _check(tmp_path, capsys, _sky(image=image, setup=setup), name="task.sky.yaml")
    assert code == 0 and out["results"][0]["vllmVersion"] == version, out


def test_a_task_on_several_nodes_stays_not_checked_as_a_skypilot_task(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _sky(nodes=2), name="task.sky.yaml")
    assert code == 3 and not rules(out) and out["notChecked"][0]["object"] == "SkyPilot task", out


def test_skypilot_sglang_workers_without_a_disaggregation_mode_are_nothing_to_check(capsys):
    # set 95's SkyPilot Dynamo example: aggregated SGLang workers (no --disaggregation-mode), no vLLM engine
    from tests.unit.test_public_reports import SETS

    path = SETS / "public_reports_95" / "inputs" / "skypilot-dynamo-sglang-nixl-multinode.sky.yaml"
    assert main(["check", str(path), "-o", "json"]) == 4
    capsys.readouterr()


# --- 4. Terraform and Ansible: not checked, by name -----------------------------------------------------------------

KV_HCL = 'jsonencode({ kv_connector = "NixlConnector", kv_role = "%s" })'
TERRAFORM = {
    "kubernetes_deployment": '''resource "kubernetes_deployment" "%(role)s" {
  metadata { name = "vllm-%(role)s" }
  spec {
    template {
      spec {
        container {
          name  = "vllm"
          image = "vllm/vllm-openai:v0.18.0"
          args  = ["Qwen/Qwen3-8B", "--kv-transfer-config", %(kv)s]
        }
      }
    }
  }
}
''',
    "kubernetes_manifest": '''resource "kubernetes_manifest" "%(role)s" {
  manifest = {
    apiVersion = "apps/v1"
    kind       = "Deployment"
    metadata   = { name = "vllm-%(role)s", namespace = "default" }
    spec = { template = { spec = { containers = [{ name = "vllm", image = "vllm/vllm-openai:v0.18.0",
      args = ["Qwen/Qwen3-8B", "--kv-transfer-config", %(kv)s] }] } } }
  }
}
''',
    "helm_release": '''module "llm_d" {
  source = "./modules/llm-d"
}
resource "helm_release" "%(role)s" {
  name       = "ms-pd"
  chart      = "llm-d-modelservice"
  values     = [yamlencode({ decode = { extraArgs = ["--kv-transfer-config", %(kv)s] } })]
}
''',
}


@pytest.mark.parametrize("resource", sorted(TERRAFORM))
def test_terraform_that_configures_a_pd_pair_is_not_checked_by_name(tmp_path, capsys, resource):
    text = "".join(TERRAFORM[resource] % {"role": r, "kv": KV_HCL % f"kv_{r}"} for r in ("producer", "consumer"))
    path = tmp_path / "main.tf"
    path.write_text(text)
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and out["notChecked"][0]["object"].endswith("(Terraform configuration (HCL))"), out
    assert "terraform" in out["notChecked"][0]["reason"].lower() or "Terraform" in out["notChecked"][0]["reason"]


ANSIBLE = {
    "playbook": '''- name: Start the vLLM P/D pair
  hosts: gpu_nodes
  become: true
  tasks:
    - name: prefill
      ansible.builtin.shell: >
        nohup vllm serve Qwen/Qwen3-8B --port 8100
        --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}' &
      when: inventory_hostname in groups['prefill']
''',
    "task file": '''- name: decode container
  community.docker.docker_container:
    name: vllm-decode
    image: "vllm/vllm-openai:{{ vllm_version }}"
    command: "Qwen/Qwen3-8B --kv-transfer-config '{\\"kv_connector\\":\\"NixlConnector\\",\\"kv_role\\":\\"kv_consumer\\"}'"
''',
    "k8s task": '''- name: apply the decode Deployment
  kubernetes.core.k8s:
    state: present
    definition: "{{ lookup('template', 'decode.yaml.j2') | from_yaml }}"
  vars:
    kv_transfer_config: '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
''',
}


@pytest.mark.parametrize("kind", sorted(ANSIBLE))
def test_ansible_that_configures_a_pd_pair_is_not_checked_by_name(tmp_path, capsys, kind):
    path = tmp_path / "site.yml"
    path.write_text(ANSIBLE[kind])
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and out["notChecked"][0]["object"].endswith("(Ansible playbook or task file)"), out


def test_ansible_or_terraform_without_a_kv_transfer_setting_stays_nothing_to_check_or_unread(tmp_path, capsys):
    path = tmp_path / "site.yml"
    path.write_text("- hosts: all\n  tasks:\n    - ansible.builtin.shell: vllm serve Qwen/Qwen3-8B\n")
    assert main(["check", str(path), "-o", "json"]) == 4
    capsys.readouterr()
