"""Variants of what the seventy-ninth public-report set (tests/unit/data/public_reports_79) taught, with negative
controls: multimodal models in P/D pairs and vLLM's encoder/prefill/decode (E/P/D) disaggregation.

Two kinds:

- ``ec-connector-unregistered``: the encoder-cache connector a prefill names in ``--ec-transfer-config`` must be one its
  release's ``ECConnectorFactory`` registers (:mod:`pdd_operator.vllm.ec_connectors`): ``ECSharedStorageConnector``
  0.11.1-0.12.0, ``ECExampleConnector`` from 0.13.0, ``ECCPUConnector`` from 0.26.0, ``ECMooncakeConnector`` from
  0.30.0; otherwise the scheduler raises 'Unsupported connector type' while the engine starts.
- the block size vLLM gives a role without ``--block-size`` is pinned for a multimodal checkpoint whose config.json
  shows a plain-attention language model (``ModelTraits.kv_family``): only the language model's layers hold KV cache,
  so the block-size rules (``block-size-tp-shrink``, ``block-size-direction``) judge it as they judge a text model.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.ec_connectors import ec_names, ec_registered
from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
RULE = "ec-connector-unregistered"


def _ec(name: str, role: str = "ec_consumer", **extra) -> str:
    return json.dumps({"ec_connector": name, "ec_role": role, **extra})


def _pair(image: str, ec: str | None, model: str = "Qwen/Qwen2.5-VL-3B-Instruct") -> list[dict]:
    docs = []
    for role in ("prefill", "decode"):
        args = [model, "--kv-transfer-config", KV]
        if role == "prefill" and ec is not None:
            args += ["--ec-transfer-config", ec]
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"], "args": args, "env": [POD_IP],
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        docs.append(workload(f"vl-{role}", role, c, app="vl"))
    return docs


# --- the registry, as a pure function ---------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "version", "expected"), [
    ("ECSharedStorageConnector", (0, 11, 1), True),
    ("ECSharedStorageConnector", (0, 12, 0), True),
    ("ECSharedStorageConnector", (0, 13, 0), False),   # renamed ECExampleConnector, no alias
    ("ECExampleConnector", (0, 12, 0), False),
    ("ECExampleConnector", (0, 34, 0), True),
    ("ECCPUConnector", (0, 25, 1), False),
    ("ECCPUConnector", (0, 26, 0), True),
    ("ECMooncakeConnector", (0, 29, 0), False),
    ("ECMooncakeConnector", (0, 30, 0), True),
    ("MyProductionConnector", (0, 30, 0), False),
    ("ECCPUConnector", (0, 11, 0), None),              # no EC transfer yet: cli-flag-not-yet's
    ("MyProductionConnector", (0, 35, 0), None),       # after the newest release read
])
def test_the_registry_per_release(name, version, expected):
    assert ec_registered(name, version) is expected


def test_the_names_a_release_registers():
    assert ec_names((0, 12, 0)) == ("ECSharedStorageConnector",)
    assert ec_names((0, 30, 0)) == ("ECCPUConnector", "ECExampleConnector", "ECMooncakeConnector")


# --- Deployments ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("image", "ec", "refused"), [
    ("vllm/vllm-openai:v0.25.0", _ec("ECCPUConnector", ec_connector_extra_config={"ec_cpu_bytes": 1 << 30}), True),
    ("vllm/vllm-openai:v0.26.0", _ec("ECCPUConnector"), False),
    ("docker.io/vllm/vllm-openai:v0.20.0", _ec("ECSharedStorageConnector"), True),
    ("vllm/vllm-openai:v0.12.0", _ec("ECSharedStorageConnector"), False),
    ("vllm/vllm-openai:v0.12.0", _ec("ECExampleConnector"), True),       # the new name before the rename
    ("vllm/vllm-openai:v0.29.0", _ec("ECMooncakeConnector"), True),
    ("vllm/vllm-openai:v0.30.0", _ec("ECMooncakeConnector"), False),
    ("vllm/vllm-openai:v0.30.0", _ec("MyProductionConnector"), True),
    # loaded from a module path: the factory imports it, nothing to judge
    ("vllm/vllm-openai:v0.30.0", _ec("MyProductionConnector", ec_connector_module_path="my.ec"), False),
    # a fork's image may register more (llm-d's ec-cpu-connector-support build)
    ("ghcr.io/llm-d/vllm-openai:ec-cpu-connector-support", _ec("ECCPUConnector"), False),
    ("vllm/vllm-openai:v0.24.0", None, False),                           # no EC transfer at all
])
def test_an_ec_connector_the_release_does_not_register_stops_the_prefill(tmp_path, capsys, image, ec, refused):
    code, out = check(tmp_path, capsys, *_pair(image, ec))
    assert (RULE in rules(out, "error")) is refused, out
    if refused:
        assert code == 1
        (msg,) = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == RULE]
        assert msg.startswith("prefill: ") and "Unsupported connector type" in msg


def test_the_renamed_example_connector_is_named_in_the_fix(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.13.0", _ec("ECSharedStorageConnector")))
    (finding,) = [f for r in out["results"] for f in r["findings"] if f["rule"] == RULE]
    assert "ECExampleConnector" in finding["message"] and '"ec_connector":"ECExampleConnector"' in finding["fix"]


# --- a launch script (vllm serve, pip pin) ------------------------------------------------------------------------


def _script(tmp_path, capsys, version: str, model: str, prefill_extra: str = "", decode_extra: str = "",
            tps: tuple[int, int] = (1, 1)) -> tuple[int, dict]:
    lines = [f"pip install vllm=={version}"]
    gpu = 0
    for role, port, side, tp, extra in (("prefill", 8100, 5600, tps[0], prefill_extra),
                                        ("decode", 8200, 5601, tps[1], decode_extra)):
        devices = ",".join(str(gpu + i) for i in range(tp))
        gpu += tp
        kv = KV.replace("kv_both", "kv_producer" if role == "prefill" else "kv_consumer")
        lines.append(f"CUDA_VISIBLE_DEVICES={devices} VLLM_NIXL_SIDE_CHANNEL_PORT={side} vllm serve {model} "
                     f"--port {port} --tensor-parallel-size {tp} {extra} --kv-transfer-config '{kv}' &")
    lines.append("wait")
    return check_text(tmp_path, capsys, "\n".join(lines) + "\n", "pd.sh")


def test_an_epd_script_on_a_release_without_the_cpu_connector(tmp_path, capsys):
    ec = _ec("ECCPUConnector", ec_connector_extra_config={"ec_enable_nixl": True, "ec_cpu_bytes": 1 << 30})
    code, out = _script(tmp_path, capsys, "0.28.0", "Qwen/Qwen3-VL-8B-Instruct", f"--ec-transfer-config '{ec}'")
    assert code == 0 and RULE not in rules(out), out     # 0.26.0+ registers it
    code, out = _script(tmp_path, capsys, "0.24.0", "Qwen/Qwen3-VL-8B-Instruct", f"--ec-transfer-config '{ec}'")
    assert code == 1 and RULE in rules(out, "error"), out


# --- the default block size of a multimodal checkpoint ------------------------------------------------------------


@pytest.mark.parametrize(("model", "version", "tps", "decode_block", "rule"), [
    # Qwen2.5-VL-3B (known config.json, head size 128): the prefill's default is 16 on CUDA before 0.34
    ("Qwen/Qwen2.5-VL-3B-Instruct", "0.28.0", (2, 1), 32, "block-size-tp-shrink"),
    # Qwen3-VL-8B: pull needs the decode's size to be a multiple of the prefill's default 16
    ("Qwen/Qwen3-VL-8B-Instruct", "0.30.0", (1, 1), 24, "block-size-direction"),
    # from 0.34.0 the default is 64
    ("Qwen/Qwen3-VL-4B-Instruct", "0.34.0", (2, 1), 128, "block-size-tp-shrink"),
])
def test_a_multimodal_role_without_block_size_runs_the_default_of_its_language_model(
        tmp_path, capsys, model, version, tps, decode_block, rule):
    code, out = _script(tmp_path, capsys, version, model, decode_extra=f"--block-size {decode_block}", tps=tps)
    assert code == 1 and rule in rules(out, "error"), out


def test_the_same_sizes_pass(tmp_path, capsys):
    code, out = _script(tmp_path, capsys, "0.28.0", "Qwen/Qwen2.5-VL-3B-Instruct", decode_extra="--block-size 16",
                        tps=(2, 1))
    assert code == 0 and not {"block-size-tp-shrink", "block-size-partial"} & rules(out), out


def test_a_multimodal_model_known_by_name_only_stays_a_warning(tmp_path, capsys):
    # no config.json: its language model may be MLA (Kimi-VL, DeepSeek-VL2), whose backends pick their own size
    code, out = _script(tmp_path, capsys, "0.28.0", "example-org/Private-VL-7B", decode_extra="--block-size 32",
                        tps=(2, 1))
    assert "block-size-tp-shrink" not in rules(out, "error") and "block-size-partial" in rules(out, "warning"), out
