"""Engine settings behind an indirection the input does not resolve (issue 9, fixW): a setting a rule reads that
comes from a ConfigMap, a Secret, ``envFrom``, a Compose ``.env``/``env_file``, a file a script sources, a shell
command substitution or the environment of whoever runs a script is "not checked" for the rules that read it, with
the indirection named, never a refusal (exit 1) and never a silent pass. Where the source is in the input
(a ConfigMap or Secret in the same YAML stream) the value is read and judged: a mismatch there is an error.

The table moves ONE setting of a valid pair behind each indirection (the base pair of each format is valid: the
``control`` rows), on vLLM 0.11.0, where prefill and decode block sizes must be equal
(``block-size-hetero-unsupported``).
"""

from __future__ import annotations

import base64
import json

import pytest
import yaml

from pdd_operator.cli import main

IMAGE = "vllm/vllm-openai:v0.11.0"
KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
MODEL = "Qwen/Qwen3-8B"

#: setting -> (its flag, the valid value both roles carry, a value for decode that the rules refuse on 0.11.0 or None)
FLAGS = {
    "kv": ("--kv-transfer-config", KV, None),
    "block": ("--block-size", "16", "32"),
    "dtype": ("--kv-cache-dtype", "auto", None),
    "tp": ("--tensor-parallel-size", "1", None),
}
#: env settings a rule reads -> (valid value, a value the rules flag or None)
ENVS = {"UCX_TLS": ("rc,cuda_copy", None), "VLLM_NIXL_SIDE_CHANNEL_PORT": ("5600", None)}


def _run(tmp_path, capsys, files: dict[str, str], main_file: str) -> tuple[int, dict]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    code = main(["check", str(tmp_path / main_file), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def _said(out: dict) -> str:
    """Everything the answer says besides ok: not-checked reasons and warnings."""
    parts = [f"{s.get('object', '')}: {s.get('reason', '')}" for s in out.get("notChecked", [])]
    parts += [f"{f['rule']}: {f['message']}" for r in out["results"] for f in r["findings"]]
    return "\n".join(parts)


def _judged_as_unknown(code: int, out: dict, *names: str) -> bool:
    """The answer is no refusal and no silent ok: exit 3 ("not checked") or a finding; where ``names`` are given,
    what it says names one of them (the indirection)."""
    said = _said(out)
    findings = any(r["findings"] for r in out["results"])
    return (code != 1 and not _errors(out) and bool(out.get("notChecked") or findings)
            and (not names or any(n in said for n in names)))


def _errors(out: dict) -> set[str]:
    return {f["rule"] for r in out["results"] for f in r["findings"] if f["severity"] == "error"}


# --- Kubernetes Deployments -----------------------------------------------------------------------------------------


def _container(role: str, args: list[str], env: list[dict], shell: bool, env_from: list[dict]) -> dict:
    c = {"name": "vllm", "image": IMAGE,
         "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                 *env],
         "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    if shell:
        c["command"] = ["sh", "-c"]
        c["args"] = [" ".join(["vllm", "serve", MODEL, *args])]
    else:
        c["command"] = ["vllm", "serve"]
        c["args"] = [MODEL, *args]
    if env_from:
        c["envFrom"] = env_from
    return c


def _workload(role: str, c: dict) -> dict:
    labels = {"app": "m", "llm-d.ai/role": role}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"m-{role}", "namespace": "default", "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [c]}}}}


def _kube(setting: str, via: str, value: str | None = None, shell: bool = False, present: bool = False) -> list[dict]:
    """A valid Deployment pair whose decode takes ``setting`` through ``via`` (``None``: the control, literal)."""
    docs = []
    for role in ("prefill", "decode"):
        args, env, env_from = [], [], []
        for name, (flag, valid, _) in FLAGS.items():
            v = valid if role == "prefill" or name != setting or via is None else None
            if v is None:
                ref = "$(X)" if not shell else '"$X"'
                args += [flag, ref]
            else:
                args += [flag, f"'{v}'" if shell and name == "kv" else v]
        for name, (valid, _) in ENVS.items():
            if role == "prefill" or name != setting or via is None:
                env.append({"name": name, "value": valid})
        if role == "decode" and via is not None:
            var = setting if setting in ENVS else "X"
            kind = "configMap" if via.startswith("cm") else "secret"
            if via.endswith("key"):
                env.append({"name": var, "valueFrom": {f"{kind}KeyRef": {"name": "src", "key": "k"}}})
            else:
                env_from.append({f"{kind}Ref": {"name": "src"}})
            if present:
                text = value if value is not None else (ENVS[setting][0] if setting in ENVS else FLAGS[setting][1])
                key = "k" if via.endswith("key") else var
                if kind == "configMap":
                    docs.append({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "src", "namespace": "default"}, "data": {key: text}})
                else:
                    docs.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "src"},
                                 "data": {key: base64.b64encode(text.encode()).decode()}})
        docs.append(_workload(role, _container(role, args, env, shell, env_from)))
    return docs


KUBE_VIAS = ["cm-key", "secret-key", "cm-envfrom", "secret-envfrom"]
SETTINGS = [*FLAGS, *ENVS]
#: Settings a rule reads on a pair of pods or containers apart (each its own network namespace, so no rule reads the
#: side-channel port there: its value may stay unknown silently).
APART = [*FLAGS, "UCX_TLS"]


@pytest.mark.parametrize("shell", [False, True], ids=["exec", "sh-c"])
def test_kube_control_pair_is_valid(tmp_path, capsys, shell):
    code, out = _run(tmp_path, capsys, {"in.yaml": yaml.safe_dump_all(_kube("block", None, shell=shell))}, "in.yaml")
    assert code == 0, _said(out)


@pytest.mark.parametrize("shell", [False, True], ids=["exec", "sh-c"])
@pytest.mark.parametrize("via", KUBE_VIAS)
@pytest.mark.parametrize("setting", APART)
def test_kube_setting_from_an_absent_source_is_not_checked(tmp_path, capsys, setting, via, shell):
    code, out = _run(tmp_path, capsys, {"in.yaml": yaml.safe_dump_all(_kube(setting, via, shell=shell))}, "in.yaml")
    assert _judged_as_unknown(code, out, "ConfigMap 'src'", "Secret 'src'", "ConfigMap src", "Secret src"), _said(out)


@pytest.mark.parametrize("shell", [False, True], ids=["exec", "sh-c"])
@pytest.mark.parametrize("via", KUBE_VIAS)
@pytest.mark.parametrize("setting", SETTINGS)
def test_kube_setting_from_a_present_source_is_read(tmp_path, capsys, setting, via, shell):
    docs = _kube(setting, via, shell=shell, present=True)
    code, out = _run(tmp_path, capsys, {"in.yaml": yaml.safe_dump_all(docs)}, "in.yaml")
    assert code == 0, _said(out)


@pytest.mark.parametrize("shell", [False, True], ids=["exec", "sh-c"])
@pytest.mark.parametrize("via", KUBE_VIAS)
def test_kube_mismatch_from_a_present_source_is_an_error(tmp_path, capsys, via, shell):
    docs = _kube("block", via, value="32", shell=shell, present=True)
    code, out = _run(tmp_path, capsys, {"in.yaml": yaml.safe_dump_all(docs)}, "in.yaml")
    assert code == 1 and "block-size-hetero-unsupported" in _errors(out), _said(out)


# --- Compose --------------------------------------------------------------------------------------------------------


def _service(role: str, flags: str, env: str = "", image: str = IMAGE, extra: str = "") -> str:
    return f"""  {role}:
    image: {image}
    ipc: host
    ports: ["{8100 if role == 'prefill' else 8200}:8000"]
    environment:
      - VLLM_NIXL_SIDE_CHANNEL_HOST={role}
{env}    command: >
      --model {MODEL} {flags}
      --kv-transfer-config '{KV}'
{extra}    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: ["{0 if role == 'prefill' else 1}"]
              capabilities: [gpu]
"""


def _compose(setting: str | None, via: str | None) -> dict[str, str]:
    def one(role: str) -> str:
        moved = role == "decode" and via is not None
        flags = " ".join(f"{flag} {'${X}' if moved and name == setting else valid}"
                         for name, (flag, valid, _) in FLAGS.items() if name != "kv")
        env = "".join(f"      - {name}={'${X}' if moved and name == setting and via == 'dotenv' else valid}\n"
                      for name, (valid, _) in ENVS.items() if not (moved and name == setting and via == "env_file"))
        extra = "    env_file: decode.env\n" if moved and via == "env_file" else ""
        image = "vllm/vllm-openai:${TAG}" if moved and setting == "image" else IMAGE
        return _service(role, flags, env, image, extra)
    return {"compose.yml": "services:\n" + one("prefill") + one("decode")}


COMPOSE_ROWS = [(s, "dotenv") for s in ("block", "dtype", "tp", "UCX_TLS", "image")] + [("UCX_TLS", "env_file")]


def test_compose_control_is_valid(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, _compose(None, None), "compose.yml")
    assert code == 0, _said(out)


@pytest.mark.parametrize("setting, via", COMPOSE_ROWS)
def test_compose_setting_from_an_absent_source_is_not_checked(tmp_path, capsys, setting, via):
    code, out = _run(tmp_path, capsys, _compose(setting, via), "compose.yml")
    assert _judged_as_unknown(code, out), _said(out)
    if setting != "image":  # the version warning does not name ${TAG} yet (fixW: left)
        assert _judged_as_unknown(code, out, "decode.env", "$X", "${X}"), _said(out)


# --- shell scripts --------------------------------------------------------------------------------------------------


def _script(setting: str | None, via: str | None) -> str:
    lines = ["#!/usr/bin/env bash"]
    if via == "source":
        lines.append("source ./env.sh")
    elif via == "dot":
        lines.append(". ./env.sh")
    ref = {"source": '"$X"', "dot": '"$X"', "subst": '"$(cat /etc/x)"', "caller": '"${X:?}"'}.get(via or "", "")
    version = "0.11.0"
    if setting == "image":
        lines.append(f"pip install vllm=={ref if via else version}")
    else:
        lines.append(f"pip install vllm=={version}")
    for i, role in enumerate(("prefill", "decode")):
        moved = role == "decode" and via is not None
        flags = " ".join(f"{flag} {ref if moved and name == setting else repr(valid) if name == 'kv' else valid}"
                         for name, (flag, valid, _) in FLAGS.items())
        env = " ".join(f"{name}={ref if moved and name == setting else valid}" for name, (valid, _) in ENVS.items())
        env = env.replace("=5600", f"={5600 + 100 * i}")  # one host: the side-channel ports must differ
        lines.append(f"CUDA_VISIBLE_DEVICES={i} VLLM_NIXL_SIDE_CHANNEL_HOST=localhost {env} "
                     f"vllm serve {MODEL} --port {8100 + 100 * i} {flags} > {role}.log 2>&1 &")
    lines.append("wait")
    return "\n".join(lines) + "\n"


SCRIPT_ROWS = [(s, v) for v in ("source", "dot", "subst", "caller") for s in [*SETTINGS, "image"]]


def test_script_control_is_valid(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, {"run.sh": _script(None, None)}, "run.sh")
    assert code == 0, _said(out)


@pytest.mark.parametrize("setting, via", SCRIPT_ROWS)
def test_script_setting_from_an_absent_source_is_not_checked(tmp_path, capsys, setting, via):
    code, out = _run(tmp_path, capsys, {"run.sh": _script(setting, via)}, "run.sh")
    # the script reader does not yet say which sourced file or command a value comes from (fixW: left), only
    # that it is not in these files
    assert _judged_as_unknown(code, out), _said(out)


# --- Helm templates left unrendered ---------------------------------------------------------------------------------


def _helm(setting: str, shell: bool) -> list[dict]:
    """The valid pair with decode's ``setting`` written as an unrendered Helm action (a chart's template file given
    as it is: the action quoted, so the file is still YAML)."""
    docs = _kube(setting, None, shell=shell)
    c = docs[1]["spec"]["template"]["spec"]["containers"][0]
    action = "{{ .Values.decode.x }}"
    if setting == "image":
        c["image"] = "vllm/vllm-openai:" + action
    elif setting in ENVS:
        next(e for e in c["env"] if e["name"] == setting)["value"] = action
    else:
        flag, valid = FLAGS[setting][:2]
        words = c["args"] if not shell else c["args"][0].split(" ")
        i = words.index(flag) + 1
        words[i] = action if not shell else f"'{action}'"
        if shell:
            c["args"] = [" ".join(words)]
    return docs


@pytest.mark.parametrize("shell", [False, True], ids=["exec", "sh-c"])
@pytest.mark.parametrize("setting", [*APART, "image"])
def test_helm_action_left_unrendered_is_not_checked(tmp_path, capsys, setting, shell):
    code, out = _run(tmp_path, capsys, {"in.yaml": yaml.safe_dump_all(_helm(setting, shell))}, "in.yaml")
    assert _judged_as_unknown(code, out), _said(out)
    if setting != "image":  # the version warning does not name the action yet (fixW: left)
        assert _judged_as_unknown(code, out, "unrendered Helm template action"), _said(out)
