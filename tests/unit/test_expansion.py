"""Variable expansion before vLLM reads its flags: the kubelet's ``$(VAR)`` and the shell's ``$VAR``.

Each case is a container as people write it; the expected argv is what the engine receives (kubelet:
third_party/forked/golang/expansion/expand.go; shell: POSIX parameter expansion).
"""

from __future__ import annotations

import pytest

from pdd_operator.compat import evaluate
from pdd_operator.compat.manifests import find_engines, pair_engines
from pdd_operator.vllm.args import POD_IP, container_argv, env_values, parse_flags
from pdd_operator.vllm.expansion import ContainerEnv, kube_expand, unknown, unknown_names
from pdd_operator.vllm.script import launches

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _lookup(values):
    return ContainerEnv(values).kube


@pytest.mark.parametrize(("text", "values", "want"), [
    ("$(A)", {"A": "x"}, "x"),
    ("--tp=$(TP)", {"TP": "4"}, "--tp=4"),
    ("$$(A)", {"A": "x"}, "$(A)"),          # escaped
    ("$$$(A)", {"A": "x"}, "$x"),
    ("$(B)", {"A": "x"}, "$(B)"),           # undefined stays literal
    ("$(A", {"A": "x"}, "$(A"),             # unclosed
    ("$A ${A}", {"A": "x"}, "$A ${A}"),     # shell syntax is not the kubelet's
    ("a$", {}, "a$"),
    ("$(A)$(A)-$(C)", {"A": "1", "C": "2"}, "11-2"),
])
def test_kube_expand_follows_the_kubelet(text, values, want):
    assert kube_expand(text, _lookup(values)) == want


@pytest.mark.parametrize("name", ["LWS_GROUP_SIZE", "LWS_LEADER_ADDRESS", "ETCD_SERVICE_HOST", "NATS_SERVICE_PORT_CLIENT",
                                  "REDIS_PORT_6379_TCP_ADDR"])
def test_platform_injected_variables_are_unknown_not_literal(name):
    assert kube_expand(f"$({name})", ContainerEnv().kube) == unknown(name)
    (launch,) = launches(f"vllm serve m --block-size ${{{name}:-1}}", ContainerEnv())
    assert launch.argv[-1] == unknown(name)


def test_env_values_expand_from_earlier_variables_only():
    env = [{"name": "HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
           {"name": "SIDE", "value": "$(HOST)"},
           {"name": "EARLY", "value": "$(LATE)"},
           {"name": "LATE", "value": "v"}]
    got = env_values(env)
    assert got["SIDE"] == POD_IP
    assert got["EARLY"] == "$(LATE)"  # LATE is defined after EARLY: the kubelet leaves the reference


def _container(command=None, args=None, env=(), env_from=(), image="vllm/vllm-openai:v0.28.0"):
    c = {"name": "vllm", "image": image, "env": list(env)}
    if command is not None:
        c["command"] = command
    if args is not None:
        c["args"] = args
    if env_from:
        c["envFrom"] = list(env_from)
    return c


def _flags(container):
    return parse_flags(container_argv(container, image_runs_vllm=True))


@pytest.mark.parametrize("model", ["Qwen/Qwen3-8B", "deepseek-ai/DeepSeek-V3", "google/gemma-3-27b-it"])
def test_args_take_the_model_and_flags_from_env(model):
    c = _container(args=["$(MODEL)", "--tensor-parallel-size", "$(TP)", "--kv-transfer-config", "$(KV)"],
                   env=[{"name": "MODEL", "value": model}, {"name": "TP", "value": "2"}, {"name": "KV", "value": KV}])
    got_model, flags = _flags(c)
    assert got_model == model
    assert flags["--tensor-parallel-size"] == "2"
    assert flags["--kv-transfer-config"] == KV


def test_value_from_a_configmap_is_unknown_not_a_literal_name():
    c = _container(command=["vllm", "serve", "$(MODEL)"],
                   env=[{"name": "MODEL", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "model"}}}])
    model, _ = _flags(c)
    assert model == unknown("MODEL") and unknown_names(model) == ["MODEL"]


def test_env_from_makes_other_names_unknown_and_without_it_they_stay_literal():
    args = ["$(MODEL)"]
    assert _flags(_container(args=args))[0] == "$(MODEL)"
    assert _flags(_container(args=args, env_from=[{"configMapRef": {"name": "c"}}]))[0] == unknown("MODEL")


@pytest.mark.parametrize("shell", ["sh", "/bin/bash"])
def test_sh_c_scripts_expand_from_literal_env_and_own_assignments(shell):
    script = ('export TP=4 && vllm serve ${MODEL} --tensor-parallel-size $TP --block-size ${BS:-32} '
              "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"$ROLE\"}'")
    c = _container(command=[shell, "-c"], args=[script], env=[{"name": "MODEL", "value": "meta-llama/Llama-3.1-8B"}])
    model, flags = _flags(c)
    assert model == "meta-llama/Llama-3.1-8B"
    assert flags["--tensor-parallel-size"] == "4"
    assert flags["--block-size"] == "32"  # ${BS:-32}: nothing sets BS (not the env, no envFrom, not the image)
    assert '"$ROLE"' in str(flags["--kv-transfer-config"])  # single quotes: the shell leaves it


def test_sh_c_secret_and_undefined_variables_are_unknown():
    script = "vllm serve ${MODEL_PATH} --tensor-parallel-size ${TP:-8}"
    c = _container(command=["sh", "-c", script],
                   env=[{"name": "MODEL_PATH", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                        {"name": "TP", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "tp"}}}])
    model, flags = _flags(c)
    assert unknown_names(model) == ["MODEL_PATH"]
    assert unknown_names(str(flags["--tensor-parallel-size"])) == ["TP"]  # a default does not win over valueFrom
    assert unknown_names(_flags(_container(command=["sh", "-c", "vllm serve $M"]))[0]) == ["M"]


def _deployment(name, role, container):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"template": {"metadata": {"labels": {"app": "m", "role": role}},
                                  "spec": {"containers": [container]}}}}


def _pd(model_env):
    docs = []
    for role, kv_role in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
        kv = KV.replace("kv_both", kv_role)
        c = _container(args=["$(MODEL)", "--kv-transfer-config", kv],
                       env=[model_env, {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
                                        "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}])
        c["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        docs.append(_deployment(f"m-{role}", role, c))
    pairs, _ = pair_engines([e for d in docs for e in find_engines(d)])
    assert len(pairs) == 1
    return pairs[0][0]


def test_unknown_model_says_why_architecture_rules_did_not_run():
    pair = _pd({"name": "MODEL", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "model"}}})
    found = {f.rule: f for f in evaluate(pair).findings}
    assert "environment variable MODEL" in found["architecture-unknown"].message


def test_known_model_through_env_reaches_the_architecture_rules():
    pair = _pd({"name": "MODEL", "value": "deepseek-ai/DeepSeek-V3"})
    assert pair.prefill.model == "deepseek-ai/DeepSeek-V3"
    assert pair.model.architecture is not None
    assert "architecture-unknown" not in {f.rule for f in evaluate(pair).findings}
