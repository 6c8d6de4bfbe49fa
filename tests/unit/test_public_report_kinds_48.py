"""Variants of what the forty-eighth public-report set (tests/unit/data/public_reports_48) taught, with negative
controls: KV connectors and transports beyond one plain NixlConnector pair.

- vLLM's ``FlexibleArgumentParser`` gathers dotted flags (``--kv-transfer-config.kv_role kv_both``,
  ``--kv-transfer-config.kv_connector_extra_config.backends+ LIBFABRIC``) into the flag's JSON object
  (vllm/utils/argparse_utils.py 0.14.0, 0.22.0): an engine configured so has a connector and its settings.
- ``KVConnectorFactory`` raises "Unsupported connector type" for a name its release does not register (V0 names such
  as ``LMCacheConnector`` or ``PyNcclConnector`` from 0.10.1 on; ``MooncakeConnector`` before 0.13.0), whatever the
  connector pair (kv_connector/factory.py, 0.10.1.1-0.34.0 sdists).
- ``KVTransferConfig`` is a pydantic dataclass with ``extra="forbid"`` from 0.16.0 (vllm/config/utils.py ``config()``;
  0.14.x ignores unknown keys): a key it never had (``backends`` beside ``kv_connector``) stops the engine at argument
  parsing, in a MultiConnector child too (each child is a ``KVTransferConfig``).
- Each MultiConnector child is a ``KVTransferConfig`` of its own (multi_connector.py, 0.10.1.1-0.34.0): a child naming
  a connector without ``kv_role``, with an unknown ``kv_role``, or naming a connector the release does not register
  stops the engine as the flag's own config would.
- ``MooncakeConnectorWorker`` refuses pipeline parallelism in 0.16.0-0.23.0 ("Mooncake Transfer Engine does not
  support pipeline parallelism yet."); 0.24.0 maps pipeline stages.
"""

from __future__ import annotations

import json

from pdd_operator.vllm.flags import parse_flags
from pdd_operator.vllm.kv_transfer_config import refused_fields
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload


def _pair(args_p, args_d, image="vllm/vllm-openai:v0.17.0", model="Qwen/Qwen3-0.6B", gpus=1, kind="Deployment", env=()):
    docs = []
    for role, args, n in (("prefill", args_p, gpus), ("decode", args_d, gpus)):
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


# --- connector names the release does not register ---------------------------------------------------------


def _kv(name, **extra):
    return ["--kv-transfer-config", json.dumps({"kv_connector": name, "kv_role": "kv_both", **extra})]


def test_a_v0_connector_name_is_refused_on_a_v1_only_release(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(_kv("PyNcclConnector"), _kv("PyNcclConnector"),
                                               image="vllm/vllm-openai:v0.11.0", kind="StatefulSet"))
    assert code == 1 and rules(out, "error") == {"kv-connector-unregistered"}


def test_a_connector_is_refused_before_the_release_that_registers_it(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(_kv("MooncakeConnector"), _kv("MooncakeConnector"),
                                               image="vllm/vllm-openai:v0.12.0"))
    assert code == 1 and "kv-connector-unregistered" in rules(out, "error")
    code, out = check(tmp_path, capsys, *_pair(_kv("MooncakeConnector"), _kv("MooncakeConnector"),
                                               image="vllm/vllm-openai:v0.13.0"))
    assert "kv-connector-unregistered" not in rules(out)


def test_an_unregistered_name_with_a_module_path_or_past_the_releases_read_is_not_refused(tmp_path, capsys):
    mod = _kv("LMCacheConnector", kv_connector_module_path="my_plugins.lmcache")
    code, out = check(tmp_path, capsys, *_pair(mod, mod, image="vllm/vllm-openai:v0.20.0"))
    assert "kv-connector-unregistered" not in rules(out)
    code, out = check(tmp_path, capsys, *_pair(_kv("LMCacheConnector"), _kv("LMCacheConnector"),
                                               image="vllm/vllm-openai:v0.35.0"))
    assert "kv-connector-unregistered" not in rules(out, "error")


# --- MooncakeConnector and pipeline parallelism --------------------------------------------------------------


def test_a_mooncake_decode_split_by_pipeline_parallelism_is_refused_on_0_20(tmp_path, capsys):
    mc = _kv("MooncakeConnector")
    code, out = check(tmp_path, capsys, *_pair(mc, [*mc, "-pp", "2"], image="vllm/vllm-openai:v0.20.0", gpus=2,
                                               kind="StatefulSet"))
    assert code == 1 and rules(out, "error") == {"mooncake-pp-unsupported"}


def test_mooncake_with_pipeline_parallelism_is_not_refused_where_vllm_allows_it(tmp_path, capsys):
    mc = _kv("MooncakeConnector")
    for image in ("vllm/vllm-openai:v0.24.0", "vllm/vllm-openai:v0.14.0"):
        code, out = check(tmp_path, capsys, *_pair([*mc, "--pipeline-parallel-size", "2"], mc, image=image, gpus=2))
        assert "mooncake-pp-unsupported" not in rules(out), image


# --- keys KVTransferConfig never had -------------------------------------------------------------------------


def test_refused_fields_lists_removed_then_unknown_keys_of_the_config_and_its_children():
    config = {"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_rank": 0, "kv_connector_extra_config": {
        "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both", "backends": ["UCX"]},
                       {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both", "kv_producers_size": 1}]}}
    assert refused_fields(config) == ("kv_rank", "backends", "kv_producers_size")
    assert refused_fields({"kv_connector": "NixlConnector", "kv_role": "kv_both",
                           "kv_connector_extra_config": {"backends": ["UCX"]}}) == ()


def test_a_multiconnector_child_with_a_key_kvtransferconfig_lacks_is_refused_from_0_16(tmp_path, capsys):
    kv = ["--kv-transfer-config", json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both",
                                              "kv_connector_extra_config": {"connectors": [
                                                  {"kv_connector": "NixlConnector", "kv_role": "kv_both",
                                                   "backends": ["UCX"]}]}})]
    code, out = check(tmp_path, capsys, *_pair(kv, kv, image="vllm/vllm-openai:v0.24.0", kind="StatefulSet"))
    assert code == 1 and rules(out, "error") == {"kv-transfer-config-removed-field"}


def test_a_pynccl_era_key_is_ignored_by_0_14_and_only_a_warning_on_an_unknown_release(tmp_path, capsys):
    kv = _kv("NixlConnector", kv_producers_size=1)
    code, out = check(tmp_path, capsys, *_pair(kv, kv, image="vllm/vllm-openai:v0.14.1"))
    assert code == 0 and "kv-transfer-config-removed-field" not in rules(out)
    code, out = check(tmp_path, capsys, *_pair(kv, kv, image="vllm/vllm-openai:v0.20.0"))
    assert code == 1 and rules(out, "error") == {"kv-transfer-config-removed-field"}
    code, out = check(tmp_path, capsys, *_pair(kv, kv, image="vllm/vllm-openai:latest"))
    assert "kv-transfer-config-removed-field" in rules(out, "warning")
    assert "kv-transfer-config-removed-field" not in rules(out, "error")


# --- MultiConnector children are KVTransferConfigs of their own ----------------------------------------------


def _multi(*children):
    return ["--kv-transfer-config", json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both",
                                                "kv_connector_extra_config": {"connectors": list(children)}})]


NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
OFFLOAD = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
           "kv_connector_extra_config": {"cpu_bytes_to_use": 8000000000}}


def test_a_multiconnector_child_without_or_with_a_bad_kv_role_is_refused(tmp_path, capsys):
    for child in ({"kv_connector": "OffloadingConnector"}, {**OFFLOAD, "kv_role": "kv_producer_and_consumer"}):
        kv = _multi(NIXL, child)
        code, out = check(tmp_path, capsys, *_pair(kv, kv, image="vllm/vllm-openai:v0.24.0", kind="StatefulSet"))
        assert code == 1 and rules(out, "error") == {"engine-args-invalid"}, child


def test_a_multiconnector_child_the_release_does_not_register_is_refused(tmp_path, capsys):
    kv = _multi(NIXL, {"kv_connector": "LMCacheConnector", "kv_role": "kv_both"})
    code, out = check(tmp_path, capsys, *_pair(kv, kv, image="vllm/vllm-openai:v0.20.0"))
    assert code == 1 and rules(out, "error") == {"kv-connector-unregistered"}


def test_a_well_formed_multiconnector_is_not_refused(tmp_path, capsys):
    kv = _multi(NIXL, OFFLOAD)
    code, out = check(tmp_path, capsys, *_pair(kv, kv, image="vllm/vllm-openai:v0.24.0"))
    assert code == 0 and not rules(out, "error")
