"""Push mode with data parallelism in one pod (issue 9): no rule, because vLLM's code pairs each request with the DP
rank that served it. Read in the wheels 0.24.0-0.33.0: each DP rank's engine id is ``<engine_id>_dp<rank>``
(v1/engine/core.py, v1/engine/utils.py) and its side-channel port ``VLLM_NIXL_SIDE_CHANNEL_PORT +
data_parallel_index`` (nixl/base_scheduler.py); the prefill's ``request_finished`` returns its own
``remote_engine_id`` and ``remote_port`` (nixl/push_scheduler.py), which the push decode's registration handshakes
with (push_worker.py ``_send_registration_to_p`` -> ``_ensure_handshake``, which refuses a different engine id). One
HTTP endpoint in front of the ranks is therefore not a fault: the accepted verdict is pinned here, with the source
lines it rests on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.test_turn2_variants import check, container, rules, workload

SRC = Path("/tmp/i9-src")


def _kv(role):
    return json.dumps({"kv_connector": "NixlPushConnector", "kv_role": role})


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.24.0", "vllm/vllm-openai:v0.28.0", "vllm/vllm-openai:v0.33.0"])
def test_a_push_prefill_with_data_parallel_ranks_in_one_pod_is_accepted(tmp_path, capsys, image):
    docs = [workload("m-prefill", "prefill", container(["Qwen/Qwen3-8B", "--data-parallel-size", "4",
                                                        "--kv-transfer-config", _kv("kv_producer")], image=image,
                                                       gpus=4)),
            workload("m-decode", "decode", container(["Qwen/Qwen3-8B", "-tp", "4", "--kv-transfer-config",
                                                      _kv("kv_consumer")], image=image, gpus=4))]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and not rules(out, "error"), out


@pytest.mark.skipif(not (SRC / "0.33.0").is_dir(), reason="the unpacked vLLM wheels are not on this machine")
@pytest.mark.parametrize("version", ["0.24.0", "0.28.0", "0.33.0"])
def test_the_push_pairing_names_the_serving_rank(version):
    root = SRC / version / "vllm"
    nixl = root / "distributed/kv_transfer/kv_connector/v1/nixl"
    assert '_dp{dp_rank}"' in (root / "v1/engine/core.py").read_text() + (root / "v1/engine/utils.py").read_text()
    assert "+ vllm_config.parallel_config.data_parallel_index" in (nixl / "base_scheduler.py").read_text()
    push = (nixl / "push_scheduler.py").read_text()
    assert "remote_engine_id=self.engine_id" in push and "remote_port=self.side_channel_port" in push
    assert '"remote_engine_id": params["remote_engine_id"]' in push
    assert 'reg_data["remote_engine_id"]' in (nixl / "push_worker.py").read_text()
