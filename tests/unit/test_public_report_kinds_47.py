"""The kinds held-out set 47 (tests/unit/data/public_reports_47) found, each with variants of its own (other models,
versions, launchers, orchestrators): P/D deployments as tutorials and guides publish them.

- two engines whose NIXL side-channel listeners bind different specific addresses (each launch script exports its
  own node's IP) never collide on the side-channel port, whatever the port (``side-channel-port-conflict``,
  :func:`pdd_operator.compat.rules.network._bind_addresses_differ`);
- ``--disable-log-requests`` (the series' launch scripts carry it) is still defined, deprecated, by vLLM 0.12.0-0.16.x
  and refused only from 0.17.0 (``cli-flag-removed``, :data:`pdd_operator.vllm.removed_flags.REMOVED_FLAGS`);
- Dynamo's ``vllm-runtime:1.4.0`` (also pinned by digest) ships vLLM 0.26.0 with NIXL 1.3.2, not the 1.3.1 that
  vLLM 0.26.0 pins (``wrapped_vllm_versions.json``; :func:`pdd_operator.vllm.known_bad.nixl_version`), so NIXL
  1.3.1's telemetry fault is not laid on it;
- a checkpoint staged on a volume (``--model /model``) and served under a known Hugging Face id
  (``--served-model-name``) is judged with that id's config.json, so a hybrid SSM model behind a path is no longer an
  unknown architecture (:func:`pdd_operator.vllm.known_models.served_as_known`).
"""

from __future__ import annotations

import pytest

from pdd_operator.vllm.known_bad import nixl_version
from pdd_operator.vllm.known_models import served_as_known
from pdd_operator.vllm.versions import wrapped_vllm_version
from tests.unit.cli_check import check_text


def _check(tmp_path, capsys, text: str, name: str = "pair.sh", *extra: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, name, *extra)


def _rules(out: dict, severity: str) -> set[str]:
    return {f["rule"] for r in out.get("results", []) for f in r["findings"] if f["severity"] == severity}


# --- distinct side-channel bind addresses ------------------------------------------------------------------------


def _node(role: str, host: str, port: int, http: int, model: str = "Qwen/Qwen3-8B") -> str:
    kv_role = "kv_producer" if role == "prefill" else "kv_consumer"
    return (f"# ---- start_{role}.sh (run on the {role} node) ----\n"
            f"export VLLM_NIXL_SIDE_CHANNEL_HOST={host}\n"
            f"export VLLM_NIXL_SIDE_CHANNEL_PORT={port}\n"
            f"nohup vllm serve {model} --port {http} --tensor-parallel-size 2 "
            f"--kv-transfer-config '{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"{kv_role}\"}}' "
            f"> ~/{role}.log 2>&1 &\n")


@pytest.mark.parametrize(("p_host", "d_host", "conflict"), [
    ("10.0.1.15", "10.0.2.27", False),            # each node's own IP: two listeners, two addresses
    ("fd00::15", "fd00::27", False),              # IPv6 likewise
    ("10.0.1.15", "10.0.1.15", True),             # one address twice: the second bind fails
    ("0.0.0.0", "10.0.2.27", True),               # a wildcard holds the port on every address
    ("10.0.1.15", "localhost", True),             # unset-like loopback on one side: may be one host's
])
def test_engines_binding_distinct_addresses_do_not_collide_on_the_side_channel_port(tmp_path, capsys, p_host, d_host,
                                                                                     conflict):
    text = "#!/bin/bash\n" + _node("prefill", p_host, 50100, 8100) + _node("decode", d_host, 50100, 8200)
    _, out = _check(tmp_path, capsys, text, "pair.sh", "--vllm-version", "0.16.0")
    assert ("side-channel-port-conflict" in _rules(out, "error")) is conflict, out


# --- --disable-log-requests: accepted (deprecated) up to 0.16.x, refused from 0.17.0 --------------------------------


def _pair_with_flag(image: str, model: str) -> str:
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    out = []
    for role in ("prefill", "decode"):
        out.append(f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: {role}}}
spec:
  selector: {{matchLabels: {{app: {role}}}}}
  template:
    metadata: {{labels: {{app: {role}, llm-d.ai/role: {role}}}}}
    spec:
      containers:
        - name: vllm
          image: {image}
          command: ["vllm", "serve", "{model}"]
          args: ["--port=8000", "--disable-log-requests", '--kv-transfer-config={kv}']
          env:
            - {{name: VLLM_NIXL_SIDE_CHANNEL_HOST, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}
          resources: {{limits: {{nvidia.com/gpu: "1"}}}}
""")
    return "---\n".join(out)


@pytest.mark.parametrize(("image", "refused"), [
    ("vllm/vllm-openai:v0.12.0", False),   # arg_utils.py still defines it, deprecated=True
    ("vllm/vllm-openai:v0.14.0", False),
    ("vllm/vllm-openai:v0.16.0", False),   # the last release that accepts it
    ("vllm/vllm-openai:v0.17.0", True),    # the first without it: 'unrecognized arguments'
    ("vllm/vllm-openai:v0.26.0", True),
])
def test_disable_log_requests_is_refused_from_0_17_only(tmp_path, capsys, image, refused):
    _, out = _check(tmp_path, capsys, _pair_with_flag(image, "Qwen/Qwen2.5-7B-Instruct"), "pair.yaml")
    assert ("cli-flag-removed" in _rules(out, "error")) is refused, out


# --- Dynamo vllm-runtime 1.4.0 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("image", [
    "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0",
    "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0-cuda13",
    "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0@sha256:8401411dc8e968eff9310462102491509e3f93d3ce03d6febc8d5566f067a7b1",
])
def test_dynamo_1_4_0_runtime_is_vllm_0_26_0(image):
    found = wrapped_vllm_version(image)
    assert found is not None and found[0] == (0, 26, 0), found


@pytest.mark.parametrize(("image", "nixl"), [
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0", (1, 3, 2)),  # Dynamo's own NIXL pin
    ("vllm/vllm-openai:v0.26.0", (1, 3, 1)),                    # vLLM 0.26.0's nixl == 1.3.1
])
def test_a_wrapping_image_names_its_own_nixl(image, nixl):
    assert nixl_version("", image, (0, 26, 0))[0] == nixl


def test_an_unlisted_dynamo_tag_stays_unknown():  # never inferred from a neighbour
    assert wrapped_vllm_version("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.7") is None


# --- a local checkpoint path served as a known id ------------------------------------------------------------------


@pytest.mark.parametrize(("model", "served", "expected"), [
    ("/model", "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4", "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4"),
    ("/mnt/models/nano", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"),
    ("./ckpt", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8"),
    ("/model", "my-llm", None),                                 # an alias the table does not know
    ("/model", None, None),                                     # no served name
    ("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4", "x", None),  # not a path: the model names itself
])
def test_served_as_known(model, served, expected):
    assert served_as_known(model, served) == expected


def _dynamo_pair(model: str, served: dict[str, str], prefix: dict[str, str],
                 image: str = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0") -> str:
    out = []
    for role in ("prefill", "decode"):
        args = (f"exec python3 -m dynamo.vllm --disaggregation-mode {role} --model {model} "
                f"--served-model-name {served[role]} --tensor-parallel-size 4 --block-size 64 "
                f"--{prefix[role]}enable-prefix-caching --no-disable-hybrid-kv-cache-manager "
                """--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'""")
        out.append(f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: {role}}}
spec:
  selector: {{matchLabels: {{app: {role}}}}}
  template:
    metadata: {{labels: {{app: {role}}}}}
    spec:
      containers:
        - name: {role}
          image: {image}
          command: ["bash", "-c"]
          args:
            - |
              {args}
          env:
            - {{name: VLLM_NIXL_SIDE_CHANNEL_HOST, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}
            - {{name: VLLM_SSM_CONV_STATE_LAYOUT, value: DS}}
          resources: {{limits: {{nvidia.com/gpu: "4"}}}}
""")
    return "---\n".join(out)


NANO = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"


@pytest.mark.parametrize(("served", "prefix", "errors", "unknown"), [
    ({"prefill": NANO, "decode": NANO}, {"prefill": "", "decode": ""}, {"hybrid-ssm-prefix-caching"}, False),
    ({"prefill": NANO, "decode": NANO}, {"prefill": "no-", "decode": "no-"}, set(), False),  # control: caching off
    ({"prefill": "nano", "decode": "nano"}, {"prefill": "", "decode": ""}, set(), True),  # an unknown alias
    ({"prefill": NANO, "decode": "nano"}, {"prefill": "", "decode": ""}, set(), True),   # names that differ
])
def test_a_hybrid_model_behind_a_path_is_judged_by_its_served_name(tmp_path, capsys, served, prefix, errors, unknown):
    code, out = _check(tmp_path, capsys, _dynamo_pair("/models/nemotron-nano", served, prefix), "pair.yaml")
    assert out["results"] and not out.get("inputErrors"), out
    assert _rules(out, "error") == errors, out
    assert ("architecture-unknown" in _rules(out, "warning")) is unknown, out
