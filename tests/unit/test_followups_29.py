"""Follow-ups of sets 43 and 44 (issue 9, round 29): the operator's own path reads the NIXL transfer mode as vLLM
resolves it (pdd_operator.vllm.transfer_mode), and the buffer-device rules read the NIXL child's own config."""

from __future__ import annotations

import json

import celpy
import pytest

from pdd_operator.api.spec import CEL_RULES
from pdd_operator.compat.engine import evaluate
from pdd_operator.render.engine import router_pod_annotations, spec_transfer_mode
from pdd_operator.render.workloads import Owner, router_deployment
from tests.helpers import make_spec
from tests.unit.test_public_report_kinds_44 import _pair
from tests.unit.test_turn2_variants import check, rules

V34, V33, UNKNOWN = "vllm/vllm-openai:v0.34.0", "vllm/vllm-openai:v0.33.0", "registry.example/engine:latest"
PUSH_OPTION = {"connector": "NixlConnector", "extraConfig": {"transfer_mode": "push"}}


def _spec(image, kv=PUSH_OPTION, **patch):
    return make_spec(engine={"image": image}, kvTransfer=kv, **patch)


def _kv_mode(spec) -> str:
    command = router_deployment(Owner("demo", "serving", uid="u1", generation=1), spec)["spec"]["template"]["spec"][
        "containers"][0]["command"]
    return command[command.index("--kv-mode") + 1]


def _found(spec) -> set[tuple[str, str]]:
    return {(f.rule, f.severity) for f in evaluate(spec).findings}


@pytest.mark.parametrize(("image", "kv", "mode"), [
    (V34, PUSH_OPTION, "push"),                                            # 0.34 factory: NixlPushConnector
    (V33, PUSH_OPTION, "pull"),                                            # 0.33 ignores the key
    (UNKNOWN, PUSH_OPTION, "pull"),                                        # cannot tell: pull, and a warning
    (V34, {"connector": "NixlConnector", "extraConfig": {"transfer_mode": "pull"}}, "pull"),
    (V34, {"connector": "NixlConnector"}, "pull"),
    (V34, {"connector": "NixlPushConnector"}, "push"),
    (V33, {"connector": "NixlPushConnector"}, "push"),
])
def test_the_router_mode_follows_the_mode_the_engines_run(image, kv, mode):
    spec = _spec(image, kv)
    assert _kv_mode(spec) == mode
    assert bool(router_pod_annotations(spec, "prefill")) == (mode == "push")


def test_spec_transfer_mode_is_none_where_vllm_cannot_be_told_or_refuses():
    assert spec_transfer_mode(_spec(UNKNOWN)) is None
    assert spec_transfer_mode(_spec(V34, {"connector": "NixlConnector", "extraConfig": {"transfer_mode": "write"}})) is None


def test_the_managed_warning_is_only_for_an_unknown_release():
    assert ("transfer-mode-option-managed", "warning") in _found(_spec(UNKNOWN))
    for image in (V34, V33):
        assert "transfer-mode-option-managed" not in {r for r, _ in _found(_spec(image))}


def test_push_by_option_gets_the_push_validations_on_0_34_and_the_pull_ones_on_0_33():
    pp = {"prefill": {"pipelineParallelSize": 2}}
    assert "pp-pull-unsupported" not in {r for r, _ in _found(_spec(V34, **pp))}
    assert ("pp-pull-unsupported", "error") in _found(_spec(V33, **pp))
    blocks = {"prefill": {"blockSize": 16}, "decode": {"blockSize": 32}}
    assert ("block-size-push-equal", "error") in _found(_spec(V34, **blocks))
    assert "block-size-push-equal" not in {r for r, _ in _found(_spec(V33, **blocks))}
    reverse = {"prefill": {"blockSize": 32}, "decode": {"blockSize": 16}}
    assert ("block-size-direction", "error") in _found(_spec(V33, **reverse))
    assert "block-size-direction" not in {r for r, _ in _found(_spec(V34, **reverse))}


def _cel(rule_id: str, spec) -> bool:
    (rule,) = [r for r in CEL_RULES if r["message"].startswith(f"[{rule_id}]")]
    env = celpy.Environment()
    doc = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    return bool(env.program(env.compile(rule["rule"])).evaluate({"self": celpy.json_to_cel(doc)}))


def test_the_api_server_holds_push_by_option_to_the_pull_invariants():
    """The apiserver's CEL cannot read extraConfig (preserve-unknown-fields: "found no matching overload for '@in'"
    from kube-apiserver 1.37 when the CRD was applied), so push by transfer_mode is held to the pull-only
    invariants there, and the message names NixlPushConnector, which pushes on every release."""
    pp = {"prefill": {"pipelineParallelSize": 2}}
    assert not _cel("pp-pull-unsupported", _spec(V34, **pp))
    assert not _cel("pp-pull-unsupported", _spec(V34, {"connector": "NixlConnector"}, **pp))
    assert _cel("pp-pull-unsupported", _spec(V34, {"connector": "NixlPushConnector"}, **pp))
    reverse = {"prefill": {"blockSize": 32}, "decode": {"blockSize": 16}}
    assert not _cel("block-size-direction", _spec(V34, **reverse))
    assert _cel("block-size-direction", _spec(V34, {"connector": "NixlPushConnector"}, **reverse))
    assert all("extraConfig" not in r["rule"] for r in CEL_RULES)


# --- kv_buffer_device of a NIXL child of MultiConnector ------------------------------------------------------------
# vLLM builds each child's config from its own dict alone: MultiConnector._get_connector_classes_and_configs does
# ``KVTransferConfig(**ktc, engine_id=engine_id)`` (kv_connector/v1/multi_connector.py; 0.20.0 lines 195-200, 0.25.0
# lines 222-227, 0.34.0 lines 274-279; the same in every sdist read from 0.10.1.1), so the child runs its own
# kv_buffer_device, else KVTransferConfig's default (cuda to 0.17.x, the platform's device_type from 0.18.0); the
# parent's is never copied into it.


def _multi(parent=None, child=None, kv_role="kv_both"):
    nixl = {"kv_connector": "NixlConnector", "kv_role": kv_role}
    if child:
        nixl["kv_buffer_device"] = child
    cfg = {"kv_connector": "MultiConnector", "kv_role": kv_role,
           "kv_connector_extra_config": {"connectors": [nixl, {"kv_connector": "OffloadingConnector",
                                                               "kv_role": kv_role}]}}
    if parent:
        cfg["kv_buffer_device"] = parent
    return json.dumps(cfg)


CPU_IMAGE = "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v{}"


def _cpu_pair(version, kv_p, kv_d):
    return _pair("Qwen/Qwen3-0.6B", CPU_IMAGE.format(version), kv_p, kv_d, {"cpu": "16", "memory": "32Gi"},
                 kind="StatefulSet")


def test_a_nixl_child_does_not_inherit_the_parents_host_buffer(tmp_path, capsys):
    # 0.12.0: the child's default is cuda, which a CPU engine refuses, whatever the parent says
    code, out = check(tmp_path, capsys, *_cpu_pair("0.12.0", _multi(parent="cpu"), _multi(parent="cpu")))
    assert code == 1 and "kv-buffer-device-unsupported" in rules(out, "error")
    # control: the child's own cpu is what runs, a parent's cuda is not read
    code, out = check(tmp_path, capsys, *_cpu_pair("0.12.0", _multi(parent="cuda", child="cpu"),
                                                   _multi(parent="cuda", child="cpu")))
    assert "kv-buffer-device-unsupported" not in rules(out)
    # 0.18.0+: the child's default is the platform's device_type (cpu)
    code, out = check(tmp_path, capsys, *_cpu_pair("0.19.1", _multi(parent="cuda"), _multi(parent="cuda")))
    assert "kv-buffer-device-unsupported" not in rules(out)


def test_the_memory_type_of_a_nixl_child_is_its_own(tmp_path, capsys):
    gpu = {"nvidia.com/gpu": "1"}
    model, image = "Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.32.0"
    # prefill's child stages in host memory, decode's registers device memory: the parents say nothing / the same
    code, out = check(tmp_path, capsys, *_pair(model, image, _multi(parent="cuda", child="cpu"),
                                               _multi(parent="cuda"), gpu))
    assert code == 1 and "kv-buffer-device-mismatch" in rules(out, "error")
    # control: both children cpu, parents differ (never read)
    code, out = check(tmp_path, capsys, *_pair(model, image, _multi(parent="cuda", child="cpu"),
                                               _multi(child="cpu"), gpu))
    assert "kv-buffer-device-mismatch" not in rules(out)


# --- triton-attn-hetero-tp-layout (vllm#35444) ----------------------------------------------------------------------


def _tp_pair(image, tp_p=1, tp_d=2, backend="TRITON_ATTN", env=(), model="meta-llama/Llama-3.1-8B-Instruct"):
    from tests.unit.test_turn2_variants import POD_IP, workload

    docs = []
    for role, tp in (("prefill", tp_p), ("decode", tp_d)):
        args = [model, "--tensor-parallel-size", str(tp), "--kv-transfer-config",
                json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})]
        if backend:
            args += ["--attention-backend", backend]
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"], "args": args, "env": [POD_IP, *env],
             "resources": {"limits": {"nvidia.com/gpu": str(tp)}}}
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return docs


def test_triton_under_hetero_tp_before_0_20_is_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_tp_pair("vllm/vllm-openai:v0.19.1"))
    assert "triton-attn-hetero-tp-layout" in rules(out, "warning")
    assert "triton-attn-hetero-tp-layout" not in rules(out, "error")
    code, out = check(tmp_path, capsys, *_tp_pair("registry.example/vllm:latest"))
    assert "triton-attn-hetero-tp-layout" in rules(out, "warning")


@pytest.mark.parametrize("variant", [
    {"image": "vllm/vllm-openai:v0.20.0"},                                   # the backend follows the layout
    {"image": "vllm/vllm-openai:v0.19.1", "tp_d": 1},                        # whole blocks move
    {"image": "vllm/vllm-openai:v0.19.1", "backend": "FLASH_ATTN"},
    {"image": "vllm/vllm-openai:v0.19.1", "backend": None},                  # the default is not judged
    {"image": "vllm/vllm-openai:v0.19.1", "env": ({"name": "VLLM_KV_CACHE_LAYOUT", "value": "NHD"},)},
])
def test_triton_hetero_tp_controls(tmp_path, capsys, variant):
    variant = dict(variant)
    code, out = check(tmp_path, capsys, *_tp_pair(variant.pop("image"), **variant))
    assert "triton-attn-hetero-tp-layout" not in rules(out)
