"""The strict xfails left in the held-out sets, fixed as kinds (branch i9-fixG), and one structural clean-up.

1. ``Rule.one_engine`` (pdd_operator/compat/rules/base.py) is the one definition of "a rule that judges an engine by its
   own argv and image": :func:`pdd_operator.compat.engine.evaluate_alone` selects by it (no hand list of ids in
   compat/engine.py), and each such rule is declared so where it is declared.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from pdd_operator.cli import main
from pdd_operator.compat import engine
from pdd_operator.compat.manifests import lone_pair, scan
from pdd_operator.compat.rules import CHECKS

#: The rules that judged a lone engine before the attribute (compat/engine.py's former ONE_ENGINE_RULES).
_ONE_ENGINE = {"engine-args-invalid", "cli-flag-removed", "cli-flag-not-yet", "entrypoint-repeated",
               "kv-transfer-config-removed-field", "kv-connector-unregistered", "attention-backend-unsupported",
               "kv-cache-dtype-unknown", "speculative-config-removed-field", "tp-heads-indivisible"}


# --- 1. Rule.one_engine ------------------------------------------------------------------------------------------


def test_one_engine_rules_are_declared_where_the_rules_are():
    marked = {r.id for r in CHECKS if r.one_engine}
    assert marked == _ONE_ENGINE
    assert all(r.without_connector for r in CHECKS if r.one_engine)  # an engine alone has no counterpart either
    assert not hasattr(engine, "ONE_ENGINE_RULES")


def _lone_engine(args):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "m-prefill", "labels": {"role": "prefill"}},
           "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.20.0", "command": ["vllm", "serve"],
                                    "args": ["Qwen/Qwen3-0.6B", *args],
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    engines, _ = scan(pod)
    return engines[0]


def test_evaluate_alone_selects_by_the_attribute():
    e = _lone_engine(["--kv-transfer-config", '{"kv_connector":"NoSuchConnector","kv_role":"kv_producer"}'])
    role = "prefill"
    found = {f.rule for f in engine.evaluate_alone(lone_pair(e), role)}
    assert found == {"kv-connector-unregistered"}
    # the same rule, not marked: no longer run on a lone engine (the selection is the attribute, not an id list)
    unmarked = tuple(dataclasses.replace(r, one_engine=False) if r.id == "kv-connector-unregistered" else r
                     for r in CHECKS)
    assert not engine.evaluate_alone(lone_pair(e), role, unmarked)
    # a rule marked that no list named is run
    marked = tuple(dataclasses.replace(r, one_engine=True) if r.id == "kv-connector-unregistered" else r
                   for r in CHECKS if r.id == "kv-connector-unregistered")
    assert {f.rule for f in engine.evaluate_alone(lone_pair(e), role, marked)} == {"kv-connector-unregistered"}


# --- 2. commands typed into an interactive container run in its image --------------------------------------------


def _check_script(tmp_path, capsys, text: str) -> tuple[int, dict]:
    path = tmp_path / "pd.sh"
    path.write_text(text)
    code = main(["check", str(path), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def _findings(out, severity=None) -> set[str]:
    return {f["rule"] for r in out["results"] for f in r["findings"] if severity in (None, f["severity"])}


def _versions(out) -> set[str]:
    return {r["vllmVersion"] for r in out["results"]}


def _session(container: str, connector: str, model: str = "Qwen/Qwen2.5-7B-Instruct", between: str = "") -> str:
    """A pasted session: the container, then each engine's command "inside the container" (Mooncake#3061's shape)."""
    kv = '{"kv_connector":"%s","kv_role":"%s"}'
    return (f"#!/bin/bash\n{container}\n{between}\n# Prefiller node, inside the container:\n"
            f"vllm serve {model} --port 8010 --kv-transfer-config '{kv % (connector, 'kv_producer')}'\n\n"
            f"# Decoder node, inside the container:\n"
            f"vllm serve {model} --port 8020 --kv-transfer-config '{kv % (connector, 'kv_consumer')}'\n\n"
            "python toy_proxy_server.py --port 8000 --prefiller-ports 8010 --decoder-ports 8020\n")


@pytest.mark.parametrize(("container", "connector", "rule"), [
    # --entrypoint=/bin/bash on vLLM's ROCm image: 0.12.0 registers no MooncakeConnector (it arrived in 0.13.0)
    ("docker run -it --ipc=host --entrypoint=/bin/bash vllm/vllm-openai-rocm:v0.12.0", "MooncakeConnector",
     "kv-connector-unregistered"),
    # bash as the command after the image, CUDA image, another connector gone from the V1 registry
    ("docker run -it --rm --gpus all vllm/vllm-openai:v0.11.0 bash", "PyNcclConnector", "kv-connector-unregistered"),
    # podman, --interactive spelled out, /bin/sh; the storage connector's 0.13.0 name on 0.12.0
    ("podman run --interactive --tty --entrypoint /bin/sh docker.io/vllm/vllm-openai:v0.12.0", "ExampleConnector",
     "kv-connector-unregistered"),
])
def test_engines_typed_into_an_interactive_container_run_its_release(tmp_path, capsys, container, connector, rule):
    code, out = _check_script(tmp_path, capsys, _session(container, connector))
    assert code == 1 and rule in _findings(out, "error"), out


def test_an_interactive_container_of_a_judged_release_passes_a_valid_pair(tmp_path, capsys):
    code, out = _check_script(tmp_path, capsys, _session(
        "docker run -it --entrypoint=/bin/bash vllm/vllm-openai-rocm:v0.20.0", "MooncakeConnector"))
    assert code == 0 and not _findings(out, "error") and _versions(out) == {"0.20.0"}, out


@pytest.mark.parametrize("container", [
    # not interactive: bash reads no commands and exits; the later lines run on the host
    "docker run -d --entrypoint=/bin/bash vllm/vllm-openai:v0.12.0",
    # a shell that runs a script of its own, not the session's later lines
    "docker run -it vllm/vllm-openai:v0.12.0 bash -c 'nvidia-smi'",
])
def test_a_container_that_takes_no_typed_commands_gives_them_no_image(tmp_path, capsys, container):
    code, out = _check_script(tmp_path, capsys, _session(container, "MooncakeConnector"))
    assert code == 3 and not _findings(out, "error"), out


def test_a_pin_installed_inside_the_container_replaces_its_release(tmp_path, capsys):
    code, out = _check_script(tmp_path, capsys, _session(
        "docker run -it --entrypoint=/bin/bash vllm/vllm-openai:v0.20.0", "MooncakeConnector",
        between="pip install vllm==0.12.0"))
    assert code == 1 and "kv-connector-unregistered" in _findings(out, "error"), out
