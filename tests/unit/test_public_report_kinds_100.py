"""Variants of what the hundredth public-report set (tests/unit/data/public_reports_100: the images and environment
files users build around vLLM's image) taught, with negative controls.

1. A folder is an input. ``pdd check <repo folder>`` reads the manifests, scripts, Dockerfiles and Makefiles under it
   (hidden files and env files aside: Compose reads an env file where its file names it), as users keep them apart;
   it was an input error ("Is a directory"), and Dockerfiles and Makefiles given as files were "not valid YAML".

2. An image built from a Dockerfile among the files runs as that Dockerfile says (Dockerfile reference: ``FROM`` with
   ``ARG`` defaults and ``--build-arg`` values, ``ENV``, ``ENTRYPOINT``, ``CMD``, ``COPY``): the base image's tag is the
   vLLM release (so a decode built ``FROM vllm/vllm-openai:v0.23.0`` against a prefill ``FROM ...:v0.22.1`` fails the
   NIXL compatibility hash, nixl/metadata.py 0.22.1 l.99-108, worker.py l.543), the image's ``ENV`` sits below the
   container's env (Compose ``environment`` and ``env_file`` win), and its ``ENTRYPOINT``/``CMD`` run where the
   container sets no command. Which tag a Dockerfile builds: a Compose ``build`` section, or a Makefile's
   ``docker build -t <tag> -f <file>`` line. An entrypoint script the image copies in from the repository is read as
   ``/bin/bash -c <script>``, so flags it builds from environment variables are seen (in a Compose service too,
   where the image's words are kept from Compose's ``$VAR`` interpolation).

3. ``$(nvidia-smi -L | wc -l)`` (or ``--list-gpus``) in a container's script is the GPUs the container is handed: its
   ``nvidia.com/gpu`` limit (a Compose service's ``device_ids``), as entrypoint scripts size ``--tensor-parallel-size``
   (substratusai/vllm-docker, hommayushi3/vllm-huggingface). It was "computed by a command", leaving TP rules unchecked.
   Without a GPU limit it stays unknown.

4. A container of a user's own image (no ``command``, no ``args``) whose environment carries a KV transfer config
   (``EXTRA_ARGS='--kv-transfer-config ...'``) is "not checked" naming the image whose entrypoint is not read, not
   "nothing to check": an entrypoint script may pass it to vLLM. Even an image named ``vllm`` in the user's registry
   (``ghcr.io/<user>/vllm``) runs its own entrypoint; vLLM's own images (Docker Hub ``vllm/``) run ``vllm serve``,
   which reads no such variable.

5. A Makefile whose recipes run the engines (``docker run ... $(IMAGE) ... --kv-transfer-config $(KV)``) is read as
   the shell script its recipes make: make's simple variables expanded, ``$$`` as ``$``, ``@``/``-`` prefixes dropped
   (GNU make manual, "Recipe Syntax"); it was "not checked" as a shell script whose ``$(VAR)`` were unknown. One
   whose engines are not found there (a ``$(MAKE)`` into another folder) stays "not checked".
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.image_builds import makefile_builds, parse_dockerfile


def _run(capsys, *paths):
    from pdd_operator.cli import main

    code = main(["check", *[str(p) for p in paths], "-o", "json"])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else {})


def _errors(report):
    return {f["rule"] for r in report.get("results", []) for f in r["findings"] if f["severity"] == "error"}


KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'

COMPOSE = """services:
  prefill:
    build: {prefill_build}
    image: local/pd:prefill
    network_mode: host
    environment:
      VLLM_NIXL_SIDE_CHANNEL_HOST: 127.0.0.1
{prefill_env}    command: ["{model}", "--port", "8100", "--kv-transfer-config", '{kv}']
    deploy: {{resources: {{reservations: {{devices: [{{driver: nvidia, device_ids: ["0"], capabilities: [gpu]}}]}}}}}}
  decode:
{decode_image}    network_mode: host
    environment:
      VLLM_NIXL_SIDE_CHANNEL_HOST: 127.0.0.1
{decode_env}    command: ["{model}", "--port", "8200", "--kv-transfer-config", '{kv}']
    deploy: {{resources: {{reservations: {{devices: [{{driver: nvidia, device_ids: ["1"], capabilities: [gpu]}}]}}}}}}
"""


def _compose_repo(tmp_path, *, model="meta-llama/Llama-3.1-8B-Instruct", prefill_from="vllm/vllm-openai:v0.20.0",
                  decode_image="    build: .\n    image: local/pd:decode\n", prefill_port_env="5600",
                  decode_port_env="5601", dockerfile_env="", env_file=None):
    prefill_build = "{context: ., dockerfile: Dockerfile.prefill}"
    (tmp_path / "Dockerfile.prefill").write_text(f"ARG BASE={prefill_from}\nFROM ${{BASE}}\n{dockerfile_env}")
    (tmp_path / "Dockerfile").write_text(f"FROM vllm/vllm-openai:v0.20.0\n{dockerfile_env}")
    pe = f"      VLLM_NIXL_SIDE_CHANNEL_PORT: '{prefill_port_env}'\n" if prefill_port_env else ""
    de = f"      VLLM_NIXL_SIDE_CHANNEL_PORT: '{decode_port_env}'\n" if decode_port_env else ""
    if env_file is not None:
        de += "    env_file: decode.env\n"
        if env_file:
            (tmp_path / "decode.env").write_text(env_file)
    (tmp_path / "compose.yaml").write_text(COMPOSE.format(prefill_build=prefill_build, prefill_env=pe,
                                                          decode_image=decode_image, decode_env=de, model=model, kv=KV))
    return tmp_path


# 1. a folder is an input ------------------------------------------------------------------------------------------

def test_a_folder_is_read_as_the_files_under_it(tmp_path, capsys):
    code, report = _run(capsys, _compose_repo(tmp_path))
    assert code == 0 and not report["inputErrors"], report


def test_a_folder_with_nothing_to_read_is_an_input_error(tmp_path, capsys):
    (tmp_path / "README.md").write_text("# notes\n")
    code, report = _run(capsys, tmp_path)
    assert code == 2 and report["inputErrors"]


def test_dockerfiles_and_build_makefiles_given_as_files_are_no_input_errors(tmp_path, capsys):
    repo = _compose_repo(tmp_path)
    (repo / "Makefile").write_text("build:\n\tdocker build -t local/pd:decode .\n")
    code, report = _run(capsys, repo / "compose.yaml", repo / "Dockerfile", repo / "Dockerfile.prefill",
                        repo / "Makefile")
    assert code == 0 and not report["inputErrors"], report


def test_env_files_and_hidden_files_of_a_folder_are_not_inputs(tmp_path, capsys):
    repo = _compose_repo(tmp_path, env_file="VLLM_NIXL_SIDE_CHANNEL_PORT=5601\n")
    (repo / ".env").write_text("PORT=8000\n")
    (repo / ".github").mkdir()
    (repo / ".github" / "ci.yaml").write_text("on: push\n")
    code, report = _run(capsys, repo)
    assert code == 0 and not report["inputErrors"], report


# 2. the image a Dockerfile builds --------------------------------------------------------------------------------

@pytest.mark.parametrize(("prefill_from", "wrong"), [("vllm/vllm-openai:v0.20.0", False),
                                                      ("vllm/vllm-openai:v0.21.0", True)])
def test_a_compose_build_runs_the_release_of_its_dockerfile(tmp_path, capsys, prefill_from, wrong):
    code, report = _run(capsys, _compose_repo(tmp_path, prefill_from=prefill_from))
    assert ("vllm-version-mismatch" in _errors(report)) is wrong, report
    assert code == (1 if wrong else 0)


def test_a_built_role_against_an_upstream_image_of_another_release(tmp_path, capsys):
    repo = _compose_repo(tmp_path, model="Qwen/Qwen3-8B", prefill_from="vllm/vllm-openai:v0.22.1",
                         decode_image="    image: vllm/vllm-openai:v0.23.0\n")
    code, report = _run(capsys, repo)
    assert code == 1 and "vllm-version-mismatch" in _errors(report), report


def test_the_image_env_sits_below_the_service_env_and_env_file(tmp_path, capsys):
    # both images set the side-channel port; only the decode's env file moves it: no conflict on the host network
    env = "ENV VLLM_NIXL_SIDE_CHANNEL_PORT=5600\n"
    repo = _compose_repo(tmp_path, prefill_port_env="", decode_port_env="", dockerfile_env=env,
                         env_file="VLLM_NIXL_SIDE_CHANNEL_PORT=5601\n")
    code, report = _run(capsys, repo)
    assert code == 0, report


def test_the_image_env_reaches_the_engine(tmp_path, capsys):
    env = "ENV VLLM_NIXL_SIDE_CHANNEL_PORT=5600\n"
    repo = _compose_repo(tmp_path, prefill_port_env="", decode_port_env="", dockerfile_env=env)
    code, report = _run(capsys, repo)
    assert code == 1 and "side-channel-port-conflict" in _errors(report), report


def test_a_missing_env_file_is_named_not_guessed(tmp_path, capsys):
    repo = _compose_repo(tmp_path, prefill_port_env="", decode_port_env="", env_file="")
    code, report = _run(capsys, repo)
    assert code == 3, report
    assert any("decode.env" in json.dumps(n) for n in report["notChecked"]), report


DEPLOY = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: m-{role}}}
spec:
  selector: {{matchLabels: {{app: m, role: {role}}}}}
  template:
    metadata: {{labels: {{app: m, role: {role}}}}}
    spec:
      containers:
      - name: vllm
        image: {image}
{command}        env:
        - {{name: VLLM_NIXL_SIDE_CHANNEL_HOST, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}
{env}        resources: {{limits: {{nvidia.com/gpu: "1"}}}}
"""


def _k8s_repo(tmp_path, *, prefill_from, decode_from, model="Qwen/Qwen2.5-7B-Instruct", command=True,
              decode_env="", entrypoint=None):
    reg = "registry.example.com/team/vllm-pd"
    (tmp_path / "Dockerfile.prefill").write_text(f"FROM {prefill_from}\n" + (entrypoint or ""))
    (tmp_path / "Dockerfile.decode").write_text(f"FROM {decode_from}\n" + (entrypoint or ""))
    (tmp_path / "Makefile").write_text(
        f"REG ?= {reg}\nTAG := v1\n\nimages:\n\tdocker build -t $(REG):prefill-$(TAG) -f Dockerfile.prefill .\n"
        "\tdocker build --platform linux/amd64 -t ${REG}:decode-$(TAG) -f Dockerfile.decode .\n")
    cmd = (f"        command: [vllm, serve]\n        args: [{model}, --kv-transfer-config, '{KV}']\n"
           if command else "")
    docs = [DEPLOY.format(role=r, image=f"{reg}:{r}-v1", command=cmd, env=e)
            for r, e in (("prefill", ""), ("decode", decode_env))]
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "pd.yaml").write_text("---\n".join(docs))
    return tmp_path


@pytest.mark.parametrize(("decode_from", "wrong"), [("vllm/vllm-openai:v0.22.1", False),
                                                    ("vllm/vllm-openai:v0.23.0", True)])
def test_a_makefile_names_the_dockerfile_of_a_deployment_image(tmp_path, capsys, decode_from, wrong):
    code, report = _run(capsys, _k8s_repo(tmp_path, prefill_from="vllm/vllm-openai:v0.22.1", decode_from=decode_from))
    assert ("vllm-version-mismatch" in _errors(report)) is wrong, report
    assert code == (1 if wrong else 0), report


ENTRY = """#!/bin/bash
MODEL=${MODEL:-Qwen/Qwen2.5-7B-Instruct}
KV_CACHE_DTYPE=${KV_CACHE_DTYPE:-auto}
CMD="vllm serve $MODEL --tensor-parallel-size 1 --kv-cache-dtype $KV_CACHE_DTYPE"
if [ -n "$KV_TRANSFER_CONFIG" ]; then
    CMD="$CMD --kv-transfer-config '$KV_TRANSFER_CONFIG'"
fi
eval $CMD
"""


@pytest.mark.parametrize(("decode_env", "wrong"), [("", False),
                                                   ("        - {name: KV_CACHE_DTYPE, value: fp8}\n", True)])
def test_an_entrypoint_script_copied_into_the_image_reads_the_container_env(tmp_path, capsys, decode_env, wrong):
    entry = 'COPY entrypoint.sh /usr/local/bin/entrypoint.sh\nENTRYPOINT ["/bin/bash", "/usr/local/bin/entrypoint.sh"]\n'
    repo = _k8s_repo(tmp_path, prefill_from="vllm/vllm-openai:v0.20.0", decode_from="vllm/vllm-openai:v0.20.0",
                     command=False, entrypoint=entry,
                     decode_env=decode_env + f"        - {{name: KV_TRANSFER_CONFIG, value: '{KV}'}}\n")
    (repo / "entrypoint.sh").write_text(ENTRY)
    text = (repo / "k8s" / "pd.yaml").read_text().replace(
        "        resources:", f"        - {{name: KV_TRANSFER_CONFIG, value: '{KV}'}}\n        resources:", 1)
    (repo / "k8s" / "pd.yaml").write_text(text)
    code, report = _run(capsys, repo)
    assert ("kv-cache-dtype-mismatch" in _errors(report)) is wrong, report
    assert code == (1 if wrong else 0), report


# the readers -----------------------------------------------------------------------------------------------------

def test_parse_dockerfile_final_stage_args_env_entrypoint():
    text = ("ARG VERSION=v0.6.2\n# base\nFROM python:3.12 AS tools\nENV A=1\n"
            "FROM vllm/vllm-openai:${VERSION}\nENV PORT 8080\nENV X=1 Y=\"two words\"\n"
            "COPY entrypoint.sh /usr/local/bin/\nENTRYPOINT [ \"entrypoint.sh\" ]\n")
    b = parse_dockerfile("Dockerfile", text)
    assert b.base == "vllm/vllm-openai:v0.6.2"
    assert b.env == {"PORT": "8080", "X": "1", "Y": "two words"}
    assert b.entrypoint == ["entrypoint.sh"] and b.cmd is None
    assert b.copies == {"/usr/local/bin/entrypoint.sh": "entrypoint.sh"}
    assert parse_dockerfile("Dockerfile", text, {"VERSION": "v0.10.1.1"}).base == "vllm/vllm-openai:v0.10.1.1"
    shell = parse_dockerfile("Dockerfile", "FROM vllm/vllm-openai:v0.20.0\nCMD vllm serve m --port 80\n")
    assert shell.cmd == ["/bin/sh", "-c", "vllm serve m --port 80"] and shell.entrypoint is None


def test_makefile_builds_expand_variables_and_find_the_context():
    text = ("ACCOUNT ?= 1234\nIMAGE := $(ACCOUNT).dkr.ecr.us-west-2.amazonaws.com/pd:x\n\nimage:\n"
            "\tdocker build --build-arg V=1 -t $(IMAGE) \\\n\t\t-f docker/Dockerfile.pd .\n"
            "\tpodman build -t other:y ctx\n")
    got = makefile_builds(text)
    assert got["1234.dkr.ecr.us-west-2.amazonaws.com/pd:x"] == ("docker/Dockerfile.pd", ".", {"V": "1"})
    assert got["other:y"][0] == "ctx/Dockerfile"


# 3. the GPU count of a container ---------------------------------------------------------------------------------

GPU_DEPLOY = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: m-{role}}}
spec:
  selector: {{matchLabels: {{app: m, role: {role}}}}}
  template:
    metadata: {{labels: {{app: m, role: {role}}}}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:{version}
        command: [/bin/bash, -c]
        args:
        - |
          NUM_GPU=$(nvidia-smi -L | wc -l)
          exec vllm serve {model} --tensor-parallel-size $NUM_GPU --kv-transfer-config '{kv}'
        env: [{{name: VLLM_NIXL_SIDE_CHANNEL_HOST, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}]
{limit}"""


def _gpu_script_pair(tmp_path, prefill_gpus, decode_gpus, version="v0.13.0", model="meta-llama/Llama-3.1-8B-Instruct"):
    def dep(role, gpus):
        limit = f"        resources: {{limits: {{nvidia.com/gpu: '{gpus}'}}}}\n" if gpus else ""
        return GPU_DEPLOY.format(role=role, version=version, model=model, kv=KV, limit=limit)
    path = tmp_path / "pd.yaml"
    path.write_text(dep("prefill", prefill_gpus) + "---\n" + dep("decode", decode_gpus))
    return path


@pytest.mark.parametrize(("gpus", "code_wanted", "rule"), [
    (("2", "2"), 0, None),
    (("4", "2"), 1, "hetero-tp-p-gt-d-unsupported"),  # prefill TP 4 > decode TP 2 before 0.14.0
])
def test_the_gpu_count_command_is_the_gpu_limit(tmp_path, capsys, gpus, code_wanted, rule):
    code, report = _run(capsys, _gpu_script_pair(tmp_path, *gpus))
    assert code == code_wanted, report
    assert rule is None or rule in _errors(report), report


def test_without_a_gpu_limit_the_gpu_count_stays_unknown(tmp_path, capsys):
    code, report = _run(capsys, _gpu_script_pair(tmp_path, None, None))
    assert code == 3 and "tensor-parallel-size" in json.dumps(report["notChecked"]), report


# 4. a KV transfer config carried in the environment of a user's image -------------------------------------------

@pytest.mark.parametrize(("image", "code_wanted"), [("ghcr.io/someone/vllm:v0.20.0", 3),
                                                    ("registry.example.com/llm/serving:1.4", 3),
                                                    ("vllm/vllm-openai:v0.20.0", 4)])
def test_a_kv_config_in_the_env_of_a_users_image_is_not_checked(tmp_path, capsys, image, code_wanted):
    docs = [DEPLOY.format(role=r, image=image, command="",
                          env=f"        - {{name: EXTRA_ARGS, value: '--kv-transfer-config {KV}'}}\n")
            for r in ("prefill", "decode")]
    path = tmp_path / "pd.yaml"
    path.write_text("---\n".join(docs))
    code, report = _run(capsys, path)
    assert code == code_wanted, report
    if code_wanted == 3:
        assert all("EXTRA_ARGS" in n["reason"] and image in n["reason"] for n in report["notChecked"]), report


# 5. a Makefile's recipes that run the engines ---------------------------------------------------------------------

MAKEFILE_PD = """IMAGE := vllm/vllm-openai:v0.20.0
DECODE_IMAGE := {decode_image}
MODEL ?= Qwen/Qwen3-8B
KV := '{kv}'

run-prefill:
\tdocker run -d --name p --network host --gpus '"device=0"' \\
\t\t-e VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \\
\t\t$(IMAGE) $(MODEL) --port 8100 --kv-transfer-config $(KV)

run-decode:
\t@docker run -d --name d --network host --gpus '"device=1"' \\
\t\t-e VLLM_NIXL_SIDE_CHANNEL_PORT=5601 \\
\t\t$(DECODE_IMAGE) $(MODEL) --port 8200 --kv-transfer-config $(KV)
"""


@pytest.mark.parametrize(("decode_image", "code_wanted"), [("$(IMAGE)", 0), ("vllm/vllm-openai:v0.21.0", 1)])
def test_a_makefile_that_runs_the_engines_is_read_as_its_recipes(tmp_path, capsys, decode_image, code_wanted):
    path = tmp_path / "Makefile"
    path.write_text(MAKEFILE_PD.format(decode_image=decode_image, kv=KV))
    code, report = _run(capsys, path)
    assert code == code_wanted, report
    assert code_wanted == 0 or "vllm-version-mismatch" in _errors(report), report


def test_a_makefile_whose_pd_engines_are_not_found_is_not_checked(tmp_path, capsys):
    path = tmp_path / "Makefile"
    path.write_text(f"KV := '{KV}'\npd:\n\t$(MAKE) -C deploy apply KV_CONFIG=$(KV)\n")
    code, report = _run(capsys, path)
    assert code == 3 and report["notChecked"], report


def test_file_names_that_are_dockerfiles_and_makefiles():
    from pdd_operator.compat.image_builds import is_dockerfile, is_makefile

    assert all(is_dockerfile(n) for n in ("Dockerfile", "a/Dockerfile.decode", "prefill.Dockerfile", "Containerfile"))
    assert not any(is_dockerfile(n) for n in ("Dockerfile.yaml", "dockerfile-notes.md", "compose.yaml"))
    assert all(is_makefile(n) for n in ("Makefile", "makefile", "GNUmakefile", "build/pd.mk"))
    assert not is_makefile("Makefile.yaml")


@pytest.mark.parametrize(("decode_dtype", "code_wanted"), [("", 0), ("      KV_CACHE_DTYPE: fp8\n", 1)])
def test_a_compose_service_runs_the_entrypoint_script_of_its_build(tmp_path, capsys, decode_dtype, code_wanted):
    # the script's ${VAR:-default} belong to the container's shell, not to Compose's interpolation
    (tmp_path / "entrypoint.sh").write_text(ENTRY)
    (tmp_path / "Dockerfile").write_text("FROM vllm/vllm-openai:v0.20.0\nCOPY entrypoint.sh /usr/local/bin/\n"
                                         'ENTRYPOINT ["entrypoint.sh"]\n')
    services = "".join(
        f"  {role}:\n    build: .\n    network_mode: host\n    environment:\n"
        f"      KV_TRANSFER_CONFIG: '{KV}'\n      VLLM_NIXL_SIDE_CHANNEL_HOST: 127.0.0.1\n"
        f"      VLLM_NIXL_SIDE_CHANNEL_PORT: '{port}'\n{extra}"
        f"    deploy: {{resources: {{reservations: {{devices: [{{driver: nvidia, device_ids: ['{gpu}'], "
        f"capabilities: [gpu]}}]}}}}}}\n"
        for role, port, gpu, extra in (("prefill", 5600, 0, ""), ("decode", 5601, 1, decode_dtype)))
    (tmp_path / "compose.yaml").write_text("services:\n" + services)
    code, report = _run(capsys, tmp_path)
    assert code == code_wanted, report
    assert code_wanted == 0 or "kv-cache-dtype-mismatch" in _errors(report), report
