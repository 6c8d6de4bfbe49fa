"""Variants of what the ninety-second public-report set (tests/unit/data/public_reports_92) taught, with negative
controls.

Engines whose settings come from ``vllm serve --config <file>.yaml`` were read from their command line alone, so a
P/D pair whose connector is in the file was refused with ``kv-connector-missing`` and one whose file is not in the
input passed as "nothing to check" (:mod:`pdd_operator.compat.config_files`):

1. A file that is a key of a ConfigMap among the files, mounted into the container, is read as vLLM reads it
   (vllm/utils/argparse_utils.py ``load_config_file`` and ``_pull_args_from_config``): its arguments come after
   ``serve`` and the positional model and before the rest of the command line (the command line wins), keys with
   underscores or dashes alike, a mapping as ``str(dict)`` up to 0.14.1 (not JSON: ``engine-args-invalid``) and as
   JSON from 0.16.0, a list as one ``str(list)`` word up to 0.10.1.1, ``false`` dropped (``--no-<key>`` from 0.28.0);
   in a container's ``sh -c`` script the file's arguments go after that command's ``serve`` and model.
2. A ``--config`` whose file is not among the files (a ConfigMap left out, a file in the image, a script's path) is
   "not checked", with the file named; ``--config=<file>`` is not read by vLLM at all (only the word ``--config``
   is), so such an engine is judged from its command line.
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.compat.config_files import config_file_args
from tests.unit.test_turn2_variants import POD_IP, check, rules

NIXL = {"prefill": {"kv_connector": "NixlConnector", "kv_role": "kv_producer"},
        "decode": {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}}


def _cm(files: dict[str, dict], name: str = "engine-config", namespace: str | None = None) -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "data": {k: yaml.safe_dump(v, sort_keys=False) for k, v in files.items()}}


def _workload(role: str, image: str, command: list[str] | None, args: list[str] | None, mount: dict,
              kind: str = "Deployment", cm_name: str = "engine-config", items: list | None = None,
              gpus: int = 1) -> dict:
    c = {"name": "engine", "image": image, "env": [POD_IP],
         "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}, "volumeMounts": [{"name": "cfg", **mount}]}
    if command is not None:
        c["command"] = command
    if args is not None:
        c["args"] = args
    volume = {"name": "cfg", "configMap": {"name": cm_name, **({"items": items} if items else {})}}
    labels = {"app": "pd", "role": role}
    spec = {"replicas": 1, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [c], "volumes": [volume]}}}
    if kind == "StatefulSet":
        spec["serviceName"] = f"pd-{role}"
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": f"pd-{role}", "labels": labels}, "spec": spec}


def _engine_file(model: str, role: str, nested: bool = False, **extra) -> dict:
    kv = NIXL[role]
    return {"model": model, "tensor-parallel-size": 1, **extra, "kv-transfer-config": kv if nested else json.dumps(kv)}


def _pair(files: dict[str, dict], image: str, command=("vllm", "serve"), prefill_args=(), decode_args=(),
          kind: str = "Deployment", **kw) -> list[dict]:
    docs = [_cm(files)]
    for role, extra in (("prefill", prefill_args), ("decode", decode_args)):
        cmd = [*command, "--config", f"/etc/engine/{role}.yaml", *extra] if command else None
        args = None if command else ["--config", f"/etc/engine/{role}.yaml", *extra]
        docs.append(_workload(role, image, cmd, args, {"mountPath": "/etc/engine"}, kind=kind, **kw))
    return docs


MODELS = ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct"]


# --- 1. the file of a ConfigMap among the files is read as vLLM reads it -------------------------------------------


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.20.0", "vllm/vllm-openai:v0.26.0", "vllm/vllm-openai:v0.34.0"])
def test_a_pair_configured_in_mounted_config_files_is_read_and_passes(tmp_path, capsys, model, kind, image):
    files = {f"{r}.yaml": _engine_file(model, r) for r in ("prefill", "decode")}
    code, out = check(tmp_path, capsys, *_pair(files, image, kind=kind))
    assert code == 0 and not rules(out, "error"), out


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("where", ["file", "command line"])
def test_a_kv_dtype_set_on_one_role_in_its_file_or_over_it_is_a_mismatch(tmp_path, capsys, model, where):
    files = {f"{r}.yaml": _engine_file(model, r) for r in ("prefill", "decode")}
    extra: tuple = ()
    if where == "file":
        files["decode.yaml"]["kv-cache-dtype"] = "fp8"
    else:
        extra = ("--kv-cache-dtype", "fp8")
    code, out = check(tmp_path, capsys, *_pair(files, "vllm/vllm-openai:v0.22.0", decode_args=extra))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out


def test_the_command_line_wins_over_the_file_even_when_written_before_config(tmp_path, capsys):
    """vLLM puts the file's arguments right after ``serve`` (and the model), so a flag before ``--config`` still
    comes after them: the decode's fp8 wins over its file's auto, the prefill's auto over its file's fp8."""
    files = {f"{r}.yaml": _engine_file(MODELS[0], r, **{"kv-cache-dtype": "fp8" if r == "prefill" else "auto"})
             for r in ("prefill", "decode")}
    docs = [_cm(files)]
    for role, dtype in (("prefill", "auto"), ("decode", "fp8")):
        cmd = ["vllm", "serve", "--kv-cache-dtype", dtype, "--config", f"/etc/engine/{role}.yaml"]
        docs.append(_workload(role, "vllm/vllm-openai:v0.22.0", cmd, None, {"mountPath": "/etc/engine"}))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out
    same = {f"{r}.yaml": _engine_file(MODELS[0], r, **{"kv-cache-dtype": "fp8"}) for r in ("prefill", "decode")}
    code, out = check(tmp_path, capsys, *_pair(same, "vllm/vllm-openai:v0.22.0"))
    assert code == 0, out  # negative control: fp8 on both, from the files


def test_the_positional_model_wins_over_the_files_model(tmp_path, capsys):
    files = {"prefill.yaml": _engine_file("Qwen/Qwen2.5-7B-Instruct", "prefill"),
             "decode.yaml": _engine_file("Qwen/Qwen2.5-3B-Instruct", "decode")}  # a stale model in one file
    docs = [_cm(files)]
    for role in ("prefill", "decode"):
        cmd = ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--config", f"/etc/engine/{role}.yaml"]
        docs.append(_workload(role, "vllm/vllm-openai:v0.20.0", cmd, None, {"mountPath": "/etc/engine"}))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and "model-mismatch" not in rules(out), out


@pytest.mark.parametrize("style", ["underscores", "dashes"])
def test_underscore_and_dash_keys_read_alike(tmp_path, capsys, style):
    files = {f"{r}.yaml": _engine_file(MODELS[1], r) for r in ("prefill", "decode")}
    if style == "underscores":
        files["decode.yaml"] = {k.replace("-", "_"): v for k, v in files["decode.yaml"].items()}
    code, out = check(tmp_path, capsys, *_pair(files, "vllm/vllm-openai:v0.20.0"))
    assert code == 0 and not rules(out, "error"), out


@pytest.mark.parametrize(("image", "refused"), [
    ("vllm/vllm-openai:v0.12.0", True), ("vllm/vllm-openai:v0.14.1", True),
    ("vllm/vllm-openai:v0.16.0", False), ("vllm/vllm-openai:v0.24.0", False),
])
def test_a_nested_kv_transfer_config_mapping_parses_from_0_16_0(tmp_path, capsys, image, refused):
    files = {f"{r}.yaml": _engine_file(MODELS[0], r, nested=True) for r in ("prefill", "decode")}
    code, out = check(tmp_path, capsys, *_pair(files, image))
    if refused:
        assert code == 1 and "engine-args-invalid" in rules(out, "error"), out
        assert any("str() of a mapping" in f["message"] for r in out["results"] for f in r["findings"])
    else:
        assert code == 0 and not rules(out, "error"), out


def test_a_dotted_flag_on_the_command_line_replaces_the_files_whole_json(tmp_path, capsys):
    files = {f"{r}.yaml": {"model": MODELS[0], "kv-transfer-config": {"kv_connector": "NixlConnector",
                                                                      "kv_role": "kv_both"}}
             for r in ("prefill", "decode")}
    docs = _pair(files, "vllm/vllm-openai:v0.22.0", decode_args=("--kv-transfer-config.kv_role", "kv_consumer"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-connector-missing" in rules(out, "error"), out


def test_an_image_entrypoint_with_args_only_and_an_items_path_is_read(tmp_path, capsys):
    """``args: [--config, ...]`` on vLLM's image (its ENTRYPOINT runs them) and a ConfigMap key projected under
    another name by ``items``."""
    files = {"p": _engine_file(MODELS[1], "prefill"), "d": _engine_file(MODELS[1], "decode", **{"kv-cache-dtype": "fp8"})}
    docs = [_cm(files)]
    for role, key in (("prefill", "p"), ("decode", "d")):
        docs.append(_workload(role, "vllm/vllm-openai:v0.20.0", None, ["--config", f"/cfg/{role}.yml"],
                              {"mountPath": "/cfg"}, items=[{"key": key, "path": f"{role}.yml"}]))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out


# --- 2. a file not among the files is "not checked" ----------------------------------------------------------------


@pytest.mark.parametrize("case", ["configmap left out", "another namespace", "file not a key", "subPath of another key"])
def test_a_config_file_not_in_the_input_is_not_checked(tmp_path, capsys, case):
    files = {f"{r}.yaml": _engine_file(MODELS[0], r) for r in ("prefill", "decode")}
    docs = _pair(files, "vllm/vllm-openai:v0.20.0")
    if case == "configmap left out":
        docs = docs[1:]
    elif case == "another namespace":
        docs[0]["metadata"]["namespace"] = "other"
    elif case == "file not a key":
        docs[0]["data"] = {"engine.yaml": docs[0]["data"]["prefill.yaml"]}
    else:
        for d in docs[1:]:
            d["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["subPath"] = "nothing.yaml"
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and not rules(out, "error"), out
    assert any("/etc/engine/" in n["reason"] and "--config" in n["reason"] for n in out["notChecked"]), out


def test_a_script_starting_vllm_with_a_config_file_is_not_checked(tmp_path, capsys):
    from pdd_operator.cli import main

    path = tmp_path / "serve.sh"
    path.write_text("#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0\nvllm serve --config /srv/vllm/decode.yaml --port 8200\n")
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and any("/srv/vllm/decode.yaml" in n["reason"] for n in out["notChecked"]), out


def test_config_with_an_equals_sign_is_not_read_by_vllm(tmp_path, capsys):
    """``--config=<file>``: vLLM looks for the word ``--config`` only, and argparse's ``--config`` option takes the
    value without reading the file, so the engines run without the file's connector."""
    files = {f"{r}.yaml": _engine_file(MODELS[0], r) for r in ("prefill", "decode")}
    docs = [_cm(files)]
    for role in ("prefill", "decode"):
        cmd = ["vllm", "serve", MODELS[0], f"--config=/etc/engine/{role}.yaml"]
        docs.append(_workload(role, "vllm/vllm-openai:v0.20.0", cmd, None, {"mountPath": "/etc/engine"}))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-connector-missing" in rules(out, "error"), out


# --- load_config_file, release by release --------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "expected"), [
    ((0, 9, 2), ["--kv-transfer-config", "{'kv_connector': 'NixlConnector'}"]),
    ((0, 14, 1), ["--kv-transfer-config", "{'kv_connector': 'NixlConnector'}"]),
    ((0, 16, 0), ["--kv-transfer-config", '{"kv_connector": "NixlConnector"}']),
    (None, ["--kv-transfer-config", '{"kv_connector": "NixlConnector"}']),
])
def test_a_mapping_per_release(version, expected):
    assert config_file_args("kv-transfer-config:\n  kv_connector: NixlConnector\n", version) == expected


@pytest.mark.parametrize(("version", "expected"), [
    ((0, 10, 1), ["--cudagraph-capture-sizes", "[1, 2, 4]", "--served-model-name", "[]"]),
    ((0, 10, 2), ["--cudagraph-capture-sizes", "1", "2", "4"]),
    ((0, 34, 0), ["--cudagraph-capture-sizes", "1", "2", "4"]),
])
def test_a_list_per_release(version, expected):
    assert config_file_args("cudagraph-capture-sizes: [1, 2, 4]\nserved-model-name: []\n", version) == expected


@pytest.mark.parametrize(("version", "expected"), [
    ((0, 27, 1), ["--trust-remote-code"]),
    ((0, 28, 0), ["--trust-remote-code", "--no-enable-prefix-caching"]),
])
def test_false_per_release(version, expected):
    text = "trust-remote-code: true\nenable-prefix-caching: false\nenable_chunked_prefill: false\n"
    assert config_file_args(text, version) == expected


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "", "a: [\n"])
def test_a_file_that_is_no_mapping_gives_no_arguments(text):
    assert config_file_args(text, (0, 20, 0)) is None


@pytest.mark.parametrize("layout", ["one line", "continued lines", "quoted path"])
@pytest.mark.parametrize(("decode_dtype", "code_expected"), [("fp8", 1), ("auto", 0)])
def test_a_config_file_named_in_an_sh_c_script_is_read(tmp_path, capsys, layout, decode_dtype, code_expected):
    """``sh -c 'vllm serve ... --config <file> ...'`` (a Helm chart's or an entrypoint's script): the mounted file's
    arguments go after ``serve`` and the model of that command, shell-quoted; the model key of the file yields to the
    positional one."""
    files = {"prefill.yaml": _engine_file("Qwen/Qwen2.5-3B-Instruct", "prefill", **{"kv-cache-dtype": "auto"}),
             "decode.yaml": _engine_file("Qwen/Qwen2.5-3B-Instruct", "decode", **{"kv-cache-dtype": decode_dtype})}
    docs = [_cm(files)]
    for role in ("prefill", "decode"):
        path = f"/etc/engine/{role}.yaml"
        script = {"one line": f"exec vllm serve Qwen/Qwen2.5-7B-Instruct --config {path} --port 8000",
                  "continued lines": f"set -e\nexec vllm serve Qwen/Qwen2.5-7B-Instruct \\\n  --config {path} \\\n"
                                     "  --port 8000\n",
                  "quoted path": f'vllm serve "Qwen/Qwen2.5-7B-Instruct" --config "{path}"'}[layout]
        docs.append(_workload(role, "vllm/vllm-openai:v0.22.0", ["/bin/sh", "-c", script], None,
                              {"mountPath": "/etc/engine"}))
    code, out = check(tmp_path, capsys, *docs)
    assert code == code_expected, out
    assert ("kv-cache-dtype-mismatch" in rules(out, "error")) == (code_expected == 1)
    assert "model-mismatch" not in rules(out)


def test_an_sh_c_script_whose_config_file_is_not_mounted_is_not_checked(tmp_path, capsys):
    files = {f"{r}.yaml": _engine_file(MODELS[0], r) for r in ("prefill", "decode")}
    docs = [_cm(files, name="unrelated")]
    for role in ("prefill", "decode"):
        docs.append(_workload(role, "vllm/vllm-openai:v0.22.0",
                              ["bash", "-c", f"vllm serve --config /etc/engine/{role}.yaml"], None,
                              {"mountPath": "/etc/engine"}))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and any("/etc/engine/" in n["reason"] for n in out["notChecked"]), out
