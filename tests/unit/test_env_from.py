"""Issue 9, "no false refusals": a variable that an ``envFrom`` source not in the files may set (a ConfigMap or Secret
the manifest does not hold, Dynamo's ``envFromSecret``; not a Secret named for credentials, ``hf-token-secret``)
is unknown, not vLLM's default. An error must hold with it
unset and with it set (``compat.engine._env_from``); where only the unset reading passes, the pair passes with the
``env-from-not-in-files`` warning. A ConfigMap among the files is read (``compat.config_refs``), and a ``prefix`` that
the variable's name does not start with cannot set it.

Variants: a Pod and a Deployment running both engines, a LeaderWorkerSet, a Dynamo v1alpha1 graph
(``envFromSecret``), a KServe LLMInferenceService with explicit commands. A PDDeployment has no ``envFrom`` (its env is
``spec.engine.env`` / ``spec.<role>.env``, literal), so it has no such variant.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pdd_operator.vllm.expansion import READ_ENV, ContainerEnv
from tests.unit.test_turn2_variants import KV, check, container, rules, workload

PORT_RULE = "side-channel-port-conflict"
CM = {"configMapRef": {"name": "nixl-env"}}


def _config_map(data: dict, name: str = "nixl-env") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def _two_engines(env_from: list[dict]) -> list[dict]:
    """Prefill (with ``env_from``) and decode as two containers of one pod on vLLM 0.28, side-channel ports unset."""
    p = container(["Qwen/Qwen3-8B", "--port", "8100", "--kv-transfer-config", KV], image="vllm/vllm-openai:v0.28.0",
                  envFrom=env_from)
    d = container(["Qwen/Qwen3-8B", "--port", "8200", "--kv-transfer-config", KV], image="vllm/vllm-openai:v0.28.0")
    p["name"], d["name"] = "prefill", "decode"
    return [p, d]


def _pod(containers):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pd"}, "spec": {"containers": containers}}


def _deployment(containers):
    labels = {"app": "pd"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "pd"},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": containers}}}}


def _lws(containers):
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "pd"},
            "spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": {"containers": containers}}}}}


SHAPES = [_pod, _deployment, _lws]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_side_channel_port_an_absent_config_map_may_set_is_not_a_conflict(tmp_path, capsys, shape):
    code, out = check(tmp_path, capsys, shape(_two_engines([CM])))
    assert PORT_RULE not in rules(out, "error") and PORT_RULE in rules(out, "warning"), out
    warning = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == PORT_RULE)
    assert "envFrom ConfigMap nixl-env" in warning, warning


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("data, refused", [({"OTHER": "1"}, True), ({"VLLM_NIXL_SIDE_CHANNEL_PORT": "5700"}, False)])
def test_a_config_map_in_the_files_is_read(tmp_path, capsys, shape, data, refused):
    code, out = check(tmp_path, capsys, shape(_two_engines([CM])), _config_map(data))
    assert (PORT_RULE in rules(out, "error")) is refused and (code == 1) is refused, out
    assert "env-from-not-in-files" not in rules(out), out


@pytest.mark.parametrize("source", [{"configMapRef": {"name": "nixl-env"}, "prefix": "APP_"},
                                    {"secretRef": {"name": "hf"}, "prefix": "HF_"}])
def test_a_prefix_the_name_does_not_start_with_cannot_set_it(tmp_path, capsys, source):
    code, out = check(tmp_path, capsys, _pod(_two_engines([source])))
    assert code == 1 and PORT_RULE in rules(out, "error"), out


def test_a_secret_or_a_source_without_a_name_may_set_it_too(tmp_path, capsys):
    for source in ({"secretRef": {"name": "nixl"}}, {"configMapRef": {}}, {"secretRef": {"name": "x"}, "prefix": "VLLM_"}):
        code, out = check(tmp_path, capsys, _pod(_two_engines([source])))
        assert PORT_RULE not in rules(out, "error"), (source, out)


# --- separate pods: a must-match variable -----------------------------------------------------------------------


def _layout_pair(p_env_from, d_env_from, image="vllm/vllm-openai:v0.30.0"):
    """Deployments whose prefill writes VLLM_KV_CACHE_LAYOUT=NHD (the default with NIXL is HND), the decode none."""
    p = container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV], image=image,
                  env=[{"name": "VLLM_KV_CACHE_LAYOUT", "value": "NHD"}], envFrom=p_env_from)
    d = container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV], image=image, envFrom=d_env_from)
    return [workload("q-prefill", "prefill", p), workload("q-decode", "decode", d)]


@pytest.mark.parametrize("p_from, d_from, refused", [
    ([], [], True),                                   # both in the files: NHD against the default HND
    ([], [CM], False),                                # decode's may come from nixl-env
    ([CM], [CM], False),                              # prefill's literal wins; decode's may still be anything
    ([], [{"configMapRef": {"name": "nixl-env"}, "prefix": "X_"}], True),
])
def test_a_layout_the_decode_may_import_is_not_called_a_mismatch(tmp_path, capsys, p_from, d_from, refused):
    code, out = check(tmp_path, capsys, *_layout_pair(p_from, d_from))
    assert ("kv-layout-mismatch" in rules(out, "error")) is refused, out


def _dynamo(p_secret, d_secret, p_env=()):
    """A Dynamo v1alpha1 graph of vLLM 0.30 workers (vllm-runtime 0.6.1 is not in the tables: the version comes
    from the image tag below), each service with its own ``envFromSecret``."""
    def worker(sub: str, secret: str | None, env) -> dict:
        line = (f"python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B --disaggregation-mode {sub} "
                f"--kv-transfer-config '{json.dumps({'kv_connector': 'NixlConnector', 'kv_role': 'kv_both'})}'")
        service = {"componentType": "worker", "subComponentType": sub, "replicas": 1, "envs": list(env),
                   "resources": {"limits": {"gpu": "1"}},
                   "extraPodSpec": {"mainContainer": {"image": "vllm/vllm-openai:v0.30.0",
                                                      "command": ["/bin/sh", "-c"], "args": [line]}}}
        return {**service, **({"envFromSecret": secret} if secret else {})}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"backendFramework": "vllm", "services": {
                "VllmPrefillWorker": worker("prefill", p_secret, p_env), "VllmDecodeWorker": worker("decode", d_secret, ())}}}


NHD = ({"name": "VLLM_KV_CACHE_LAYOUT", "value": "NHD"},)


@pytest.mark.parametrize("p_secret, d_secret, refused", [
    (None, None, True), (None, "vllm-env", False), ("vllm-env", "vllm-env", False),
    # a credentials Secret (every Dynamo recipe's envFromSecret) holds the token, not engine settings
    (None, "hf-token-secret", True), ("hf-token-secret", "hf-token-secret", True)])
def test_dynamo_env_from_secret_may_set_the_decode_layout(tmp_path, capsys, p_secret, d_secret, refused):
    code, out = check(tmp_path, capsys, _dynamo(p_secret, d_secret, NHD))
    assert ("kv-layout-mismatch" in rules(out, "error")) is refused, out


def test_one_secret_on_both_dynamo_workers_reads_one_value_and_passes(tmp_path, capsys):
    # No literal layout anywhere: the one Secret sets both engines' layout alike (or neither): nothing to refuse or
    # hold, and no warning (both readings agree).
    code, out = check(tmp_path, capsys, _dynamo("vllm-env", "vllm-env"))
    assert code == 0 and "env-from-not-in-files" not in rules(out), out


def test_two_sources_that_may_differ_pass_with_the_env_from_warning(tmp_path, capsys):
    # Read as unset both roles agree (a pass); read as unknown, two different Secrets may set different attention
    # backends and layouts: the pass stands, with the warning naming the sources and variables.
    code, out = check(tmp_path, capsys, _dynamo("secret-a", "secret-b"))
    assert code == 0 and not rules(out, "error") and "env-from-not-in-files" in rules(out, "warning"), out
    warning = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "env-from-not-in-files")
    assert "Secret secret-a" in warning and "Secret secret-b" in warning and "VLLM_KV_CACHE_LAYOUT" in warning, warning


def _kserve(d_env_from):
    def tpl(env=(), env_from=()):
        args = ["Qwen/Qwen3-8B", "--kv-transfer-config", KV]
        c = {"name": "main", "image": "vllm/vllm-openai:v0.30.0", "command": ["vllm", "serve"], "args": args,
             "env": list(env)}
        return {"containers": [{**c, **({"envFrom": list(env_from)} if env_from else {})}]}
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService", "metadata": {"name": "q"},
            "spec": {"template": tpl(env_from=d_env_from), "prefill": {"template": tpl(env=NHD)}}}


@pytest.mark.parametrize("d_env_from, refused", [([], True), ([{"secretRef": {"name": "vllm-env"}}], False)])
def test_kserve_decode_env_from_may_set_the_layout(tmp_path, capsys, d_env_from, refused):
    code, out = check(tmp_path, capsys, _kserve(d_env_from))
    assert ("kv-layout-mismatch" in rules(out, "error")) is refused, out


# --- the pieces -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["hf-token-secret", "hf-secret", "llm-d-hf-token", "ngc-api-key", "HF_TOKEN",
                                  "registry-credentials"])
def test_a_credentials_secret_without_a_prefix_sets_no_engine_variable(name):
    assert ContainerEnv.of([], [{"secretRef": {"name": name}}]).may_define("VLLM_KV_CACHE_LAYOUT") is None
    # with a prefix it was imported for its variables after all; a ConfigMap of that name is no credentials store
    assert ContainerEnv.of([], [{"secretRef": {"name": name}, "prefix": "VLLM_"}]).may_define("VLLM_X")
    assert ContainerEnv.of([], [{"configMapRef": {"name": name}}]).may_define("VLLM_X")


@pytest.mark.parametrize("name", ["vllm-env", "nixl", "engine-settings", "tokenizer-config"])
def test_any_other_secret_may_set_engine_variables(name):
    assert ContainerEnv.of([], [{"secretRef": {"name": name}}]).may_define("VLLM_KV_CACHE_LAYOUT") == f"Secret {name}"


def test_may_define_follows_the_prefix():
    env = ContainerEnv.of([], [{"configMapRef": {"name": "a"}, "prefix": "APP_"}, {"secretRef": {"name": "s"}}])
    assert env.may_define("APP_X") == "ConfigMap a" and env.may_define("VLLM_X") == "Secret s"
    assert ContainerEnv.of([], [{"configMapRef": {"name": "a"}, "prefix": "APP_"}]).may_define("VLLM_X") is None
    assert ContainerEnv.of([], []).may_define("VLLM_X") is None


_OPERATOR = Path(__file__).resolve().parents[2] / "operator" / "pdd_operator"
#: How the rules and the facts they use read a variable: ``env.get("NAME"``, ``env["NAME"]``, ``_env_on(env, "NAME")``
#: and env names in a rule's ``needs``.
_READS = re.compile(r"""env(?:\.get\(|\[)\s*["']([A-Z][A-Z0-9_]+)["']|_env_on\(\s*env,\s*["']([A-Z][A-Z0-9_]+)["']""")
_NEEDS = re.compile(r"needs=\(([^)]*)\)")


def test_every_variable_the_rules_read_is_in_read_env():
    read: set[str] = set()
    for path in [*(_OPERATOR / "compat").rglob("*.py"), *(_OPERATOR / "vllm").rglob("*.py")]:
        text = path.read_text()
        read |= {a or b for a, b in _READS.findall(text)}
        read |= {n for needs in _NEEDS.findall(text) for n in re.findall(r"[\"']([A-Z][A-Z0-9_]+)[\"']", needs)}
    # VLLM_ADDITIONAL_ARGS is read into the command line, not by a rule (see READ_ENV's comment)
    assert read - {"VLLM_ADDITIONAL_ARGS"} <= set(READ_ENV), sorted(read - set(READ_ENV))
    assert "VLLM_NIXL_SIDE_CHANNEL_PORT" in read and "VLLM_KV_CACHE_LAYOUT" in read


def _kv_role_script(env_from):
    """Deployments whose ``sh -c`` script writes ``kv_role`` from ``${KV_ROLE}``, which only ``env_from`` sets."""
    def one(role):
        script = ("vllm serve Qwen/Qwen3-8B --kv-transfer-config "
                  "\"{\\\"kv_connector\\\":\\\"NixlConnector\\\",\\\"kv_role\\\":\\\"${KV_ROLE}\\\"}\"")
        c = container([script], image="vllm/vllm-openai:v0.30.0", command=["sh", "-c"],
                      envFrom=[{"configMapRef": {"name": f"{role}-env"}}] if env_from else [])
        return workload(f"q-{role}", role, c)
    return [one("prefill"), one("decode")]


def test_a_kv_role_from_an_absent_config_map_is_not_checked(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_kv_role_script(True))
    assert code == 3 and not out["results"] and "KV_ROLE" in " ".join(n["reason"] for n in out["notChecked"]), out


def test_a_kv_role_from_a_config_map_in_the_files_is_read(tmp_path, capsys):
    docs = [*_kv_role_script(True), _config_map({"KV_ROLE": "kv_producer"}, "prefill-env"),
            _config_map({"KV_ROLE": "kv_consumer"}, "decode-env")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and len(out["results"]) == 1 and not out["notChecked"], out
