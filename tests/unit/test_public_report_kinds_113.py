"""Variants of what the hundred-and-thirteenth public-report set (tests/unit/data/public_reports_113) taught, with
negative controls.

The NIXL side-channel host is read as vLLM binds and advertises it (:func:`pdd_operator.compat.rules.network.host_kind`):
an IPv6 address in brackets is the address inside them, because vLLM's ``make_zmq_path`` keeps a host that is not a
bare IPv6 address as written (``tcp://[::]:5600``) and ``split_zmq_path`` reads that path's host without the
brackets (0.10.0 vllm/utils/__init__.py lines 2747-2783; 0.23.0 vllm/utils/network_utils.py). So ``[::]`` binds the
IPv6 wildcard and ``[::1]`` the IPv6 loopback, and the peer in another pod dials its own host for either, as for
``::`` and ``::1``; other spellings of those addresses (``0:0:0:0:0:0:0:0``, ``::ffff:127.0.0.1``, ``127.0.1.1``)
alike. Before, only the bare everyday spellings were judged and the rest taken for a literal address (a silent pass on
set 113's ``[::]``). A bracketed specific address (``[fd00::5]``) stays a literal address, not judged; in one network
namespace (one host's script) the loopback and wildcard spellings still pass; behind the AIBrix gateway a wildcard
spelling stays a warning.
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.rules.network import host_kind
from tests.unit.test_turn2_variants import KV, check, container, rules, workload

WILDCARDS = ["[::]", "0:0:0:0:0:0:0:0", "[0:0:0:0:0:0:0:0]"]
LOOPBACKS = ["[::1]", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "[::ffff:127.0.0.1]", "127.0.1.1", "LOCALHOST"]


@pytest.mark.parametrize(("host", "kind"), [
    *((h, "wildcard") for h in ["0.0.0.0", "::", *WILDCARDS]),
    *((h, "loopback") for h in [None, "localhost", "127.0.0.1", "::1", *LOOPBACKS]),
    ("", "empty"), ("  ", "empty"),
    ("10.0.0.12", None), ("[fd00::5]", None), ("fd00::5", None), ("prefill-0.svc", None), ("[10.0.0.1]", None),
])
def test_host_kind_reads_every_spelling_of_the_wildcard_and_loopback(host, kind):
    assert host_kind(host) == kind


def _pair(host: str, image: str, model: str = "Qwen/Qwen3-8B") -> list[dict]:
    """Two Deployments of one model whose engines set VLLM_NIXL_SIDE_CHANNEL_HOST to ``host``."""
    docs = []
    for role in ("prefill", "decode"):
        c = container([model, "--kv-transfer-config", KV], image=image)
        c["env"] = [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": host},
                    *(e for e in c["env"] if e["name"] != "VLLM_NIXL_SIDE_CHANNEL_HOST")]
        docs.append(workload(f"q-{role}", role, c))
    return docs


@pytest.mark.parametrize("host", WILDCARDS + LOOPBACKS)
@pytest.mark.parametrize(("image", "model"), [("vllm/vllm-openai:v0.10.1.1", "Qwen/Qwen3-8B"),
                                              ("vllm/vllm-openai:v0.23.0", "meta-llama/Llama-3.1-8B-Instruct"),
                                              ("vllm/vllm-openai:v0.34.0", "Qwen/Qwen3-0.6B")])
def test_a_wildcard_or_loopback_spelling_in_separate_pods_is_refused(tmp_path, capsys, host, image, model):
    code, out = check(tmp_path, capsys, *_pair(host, image, model))
    assert code == 1 and "side-channel-host-not-routable" in rules(out, "error"), out


@pytest.mark.parametrize("host", ["[fd00::5]", "fd00::12", "10.0.0.12"])
def test_a_specific_address_in_or_out_of_brackets_is_not_judged(tmp_path, capsys, host):
    code, out = check(tmp_path, capsys, *_pair(host, "vllm/vllm-openai:v0.23.0"))
    assert "side-channel-host-not-routable" not in rules(out), out


def _script_pod(host: str) -> dict:
    """One container starting both engines on one host with VLLM_NIXL_SIDE_CHANNEL_HOST ``host`` exported."""
    line = f"Qwen/Qwen3-0.6B --kv-transfer-config '{KV}'"
    script = (f"set -xe\nexport VLLM_NIXL_SIDE_CHANNEL_HOST='{host}'\n"
              f"CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve {line} --port 8100 &\n"
              f"CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5659 vllm serve {line} --port 8200 &\nwait\n")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t", "labels": {"app": "t"}},
            "spec": {"containers": [{"name": "test", "image": "vllm/vllm-openai:v0.23.0", "command": ["bash", "-c"],
                                     "args": [script], "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}


@pytest.mark.parametrize("host", ["[::]", "[::1]", "0:0:0:0:0:0:0:1"])
def test_the_same_spellings_in_one_network_namespace_pass(tmp_path, capsys, host):
    code, out = check(tmp_path, capsys, _script_pod(host))
    assert code == 0 and "side-channel-host-not-routable" not in rules(out), out


def _storm(host: str) -> list[dict]:
    """The pair as the roles of an AIBrix StormService (whose gateway rewrites a wildcard remote_host)."""
    roles = []
    for role in ("prefill", "decode"):
        c = container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV], image="vllm/vllm-openai:v0.10.2", name=role)
        c["env"] = [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": host},
                    *(e for e in c["env"] if e["name"] != "VLLM_NIXL_SIDE_CHANNEL_HOST")]
        roles.append({"name": role, "replicas": 1, "template": {"metadata": {"labels": {"model.aibrix.ai/name": "q"}},
                                                                 "spec": {"containers": [c]}}})
    return [{"apiVersion": "orchestration.aibrix.ai/v1alpha1", "kind": "StormService", "metadata": {"name": "s"},
             "spec": {"replicas": 1, "template": {"spec": {"roles": roles}}}}]


@pytest.mark.parametrize(("host", "severity"), [("[::]", "warning"), ("0:0:0:0:0:0:0:0", "warning"),
                                                ("[::1]", "error")])
def test_behind_the_aibrix_gateway_a_wildcard_spelling_is_a_warning_and_loopback_an_error(tmp_path, capsys, host,
                                                                                           severity):
    code, out = check(tmp_path, capsys, *_storm(host))
    assert "side-channel-host-not-routable" in rules(out, severity), out
    assert code == (1 if severity == "error" else 0)
