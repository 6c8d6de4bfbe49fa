"""Variants of what the forty-eighth public-report set (tests/unit/data/public_reports_48) taught, with negative
controls: KV connectors and transports beyond one plain NixlConnector pair.

- vLLM's ``FlexibleArgumentParser`` gathers dotted flags (``--kv-transfer-config.kv_role kv_both``,
  ``--kv-transfer-config.kv_connector_extra_config.backends+ LIBFABRIC``) into the flag's JSON object
  (vllm/utils/argparse_utils.py 0.14.0, 0.22.0): an engine configured so has a connector and its settings.
"""

from __future__ import annotations

import json

from pdd_operator.vllm.flags import parse_flags
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload


def _pair(args_p, args_d, image="vllm/vllm-openai:v0.17.0", model="Qwen/Qwen3-0.6B", gpus=1, kind="Deployment", env=()):
    docs = []
    for role, args, n in (("prefill", args_p, gpus), ("decode", args_d, 1)):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"], "args": [model, *args],
             "env": [POD_IP, *env], "resources": {"limits": {"nvidia.com/gpu": str(n)}}}
        docs.append(workload(f"m-{role}", role, c, kind=kind, app="m"))
    return docs


def _dotted(backend_flags=()):
    return ["--kv-transfer-config.kv_connector", "NixlConnector", "--kv_transfer_config.kv_role", "kv_both",
            *backend_flags]


# --- dotted --kv-transfer-config.<key> arguments ------------------------------------------------------------


def test_dotted_kv_transfer_config_keys_nest_and_append_as_vllm_parses_them():
    _, flags = parse_flags(["vllm", "serve", "m", "--kv_transfer_config.kv_connector=NixlConnector",
                            "--kv-transfer-config.kv_connector_extra_config.backends+", "UCX,GDS",
                            "--kv-transfer-config.kv_connector_extra_config.backends+", "LIBFABRIC",
                            "--kv-transfer-config.kv_connector_extra_config.num_threads", "8"])
    assert json.loads(flags["--kv-transfer-config"]) == {
        "kv_connector": "NixlConnector",
        "kv_connector_extra_config": {"backends": ["UCX", "GDS", "LIBFABRIC"], "num_threads": 8}}


def test_a_statefulset_pair_configured_by_dotted_arguments_is_checked_not_refused(tmp_path, capsys):
    lib = ["--kv-transfer-config.kv_connector_extra_config.backends+", "LIBFABRIC"]
    code, out = check(tmp_path, capsys, *_pair(_dotted(lib), _dotted(lib), image="vllm/vllm-openai:v0.24.0",
                                               kind="StatefulSet"))
    assert code == 0 and "kv-connector-missing" not in rules(out)


def test_dotted_backends_are_read_so_a_one_sided_backend_list_is_still_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(
        _dotted(["--kv-transfer-config.kv_connector_extra_config.backends+", "LIBFABRIC"]), _dotted()))
    assert code == 1 and rules(out, "error") == {"nixl-backend-fabric-mismatch"}
