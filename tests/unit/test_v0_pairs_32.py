"""V0 KV connector pairs under the V0 engine (VLLM_USE_V1=0) of vLLM 0.9.0-0.10.0 (compat/rules/v0_pair.py).

Such a pair (PyNcclConnector, MooncakeStoreConnector, MooncakeConnector on both roles) is judged by the engine-alone
rules: ok where none fails, instead of "not checked". ``v0-pynccl-kv-rank``: PyNcclPipe's StatelessProcessGroup
needs one rank 0 (kv_pipe/pynccl_pipe.py 0.9.0 lines 47-76, distributed/utils.py lines 372-402).
``v0-mooncake-config-path``: the Mooncake V0 connectors raise ValueError without MOONCAKE_CONFIG_PATH
(mooncake_store_connector.py 0.9.0 lines 40-47, simple_connector.py lines 48-57).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main

from .test_script_inputs import _check, _errors


def _script(version: str, model: str, connector: str = "PyNcclConnector", ranks: tuple = (0, 1),
            use_v1: str | None = "0", env: str = "", tp: tuple[int, int] = (1, 1), models: tuple | None = None) -> str:
    lines = [f"pip install vllm=={version}"]
    if use_v1 is not None:
        lines.append(f"export VLLM_USE_V1={use_v1}")
    if env:
        lines.append(env)
    for i, (role, rank) in enumerate(zip(("kv_producer", "kv_consumer"), ranks, strict=True)):
        kv = {"kv_connector": connector, "kv_role": role, "kv_parallel_size": 2}
        if rank is not None:
            kv["kv_rank"] = rank
        name = (models or (model, model))[i]
        lines.append(f"CUDA_VISIBLE_DEVICES={i} vllm serve {name} --port {8100 + 100 * i} "
                     f"--tensor-parallel-size {tp[i]} --kv-transfer-config '{json.dumps(kv)}' &")
    return "\n".join(lines) + "\n"


def _verdicts(out: dict) -> list:
    return [r["compatible"] for r in out["results"]]


@pytest.mark.parametrize("version", ["0.9.0", "0.9.1", "0.9.2", "0.10.0"])
@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct"])
def test_a_valid_v0_pynccl_pair_is_judged_ok(tmp_path, capsys, version, model):
    code, out = _check(tmp_path, capsys, _script(version, model))
    assert out["notChecked"] == [] and _verdicts(out) == [True], out


@pytest.mark.parametrize("connector", ["MooncakeStoreConnector", "MooncakeConnector"])
def test_a_valid_v0_mooncake_pair_is_judged_ok(tmp_path, capsys, connector):
    text = _script("0.9.2", "Qwen/Qwen2.5-7B-Instruct", connector, env="export MOONCAKE_CONFIG_PATH=./mooncake.json")
    code, out = _check(tmp_path, capsys, text)
    assert out["notChecked"] == [] and _verdicts(out) == [True], out


@pytest.mark.parametrize("ranks", [(0, 0), (1, 1), (None, None)])
@pytest.mark.parametrize("version", ["0.9.0", "0.10.0"])
def test_pynccl_roles_without_one_rank_zero_fail(tmp_path, capsys, ranks, version):
    code, out = _check(tmp_path, capsys, _script(version, "Qwen/Qwen2.5-7B-Instruct", ranks=ranks))
    assert "v0-pynccl-kv-rank" in _errors(out), out


def test_swapped_ranks_are_fine(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _script("0.9.1", "Qwen/Qwen2.5-7B-Instruct", ranks=(1, 0)))
    assert _verdicts(out) == [True] and not _errors(out), out


@pytest.mark.parametrize("connector", ["MooncakeStoreConnector", "MooncakeConnector"])
def test_mooncake_v0_without_its_config_path_fails(tmp_path, capsys, connector):
    code, out = _check(tmp_path, capsys, _script("0.9.0", "Qwen/Qwen2.5-7B-Instruct", connector))
    assert "v0-mooncake-config-path" in _errors(out), out


@pytest.mark.parametrize("use_v1", [None, "1"])
def test_on_the_v1_engine_the_v0_only_rule_judges_instead(tmp_path, capsys, use_v1):
    code, out = _check(tmp_path, capsys, _script("0.9.2", "Qwen/Qwen2.5-7B-Instruct", use_v1=use_v1))
    assert "kv-connector-v0-only" in _errors(out) and "v0-pynccl-kv-rank" not in _errors(out), out


def test_unequal_tp_or_models_stay_not_checked(tmp_path, capsys):
    for text in (_script("0.9.2", "Qwen/Qwen2.5-7B-Instruct", tp=(1, 2)),
                 _script("0.9.2", "x", models=("Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"))):
        code, out = _check(tmp_path, capsys, text)
        assert True not in _verdicts(out) and out["notChecked"], out



_DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: qwen-{role}, labels: {{app: qwen, role: {role}}}}}
spec:
  selector: {{matchLabels: {{app: qwen, role: {role}}}}}
  template:
    metadata: {{labels: {{app: qwen, role: {role}}}}}
    spec:
      containers:
      - name: vllm
        image: {image}
        command: [vllm, serve, Qwen/Qwen2.5-7B-Instruct, --kv-transfer-config,
                  '{{"kv_connector":"MooncakeStoreConnector","kv_role":"{kv_role}"}}']
        env: [{{name: VLLM_USE_V1, value: "0"}}]
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""


@pytest.mark.parametrize(("image", "severity"), [("vllm/vllm-openai:v0.9.0", "error"),
                                                  ("myorg/vllm-mooncake:v0.9.0", "warning")])
def test_a_missing_config_path_is_an_error_only_where_no_dockerfile_of_the_image_may_set_it(tmp_path, capsys, image,
                                                                                          severity):
    # vLLM's own images set no MOONCAKE_CONFIG_PATH; another image's Dockerfile may (not read): a warning there.
    text = "---\n".join(_DEPLOYMENT.format(role=role, kv_role=kv_role, image=image)
                        for role, kv_role in (("prefill", "kv_producer"), ("decode", "kv_consumer")))
    path = tmp_path / "pair.yaml"
    path.write_text(text)
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "v0-mooncake-config-path"}
    assert found == {severity} and code == (1 if severity == "error" else 0), out
