"""Variants of the kind of fault the twelfth public-report set (tests/unit/data/public_reports_12) found, with negative
controls: engines of a prefill/decode topology with no KV connector at all (llm-d-modelservice's multi-node
LeaderWorkerSet pair: Ray, pipeline parallel 2, no ``--kv-transfer-config``) were also judged by the NIXL rules, which
spoke of a "pull NixlConnector" that is not there (``pp-pull-unsupported``), refused the decode's pipeline parallelism
and the unset side-channel host, and left the pair "not checked" for a NIXL-only version bound. Without a connector
no KV moves, so only ``kv-connector-missing`` and the rules that fail an engine on its own
(``Rule.without_connector``: a flag vLLM refuses or the operator renders itself, a GPU per rank, two engines on one
GPU, an incomplete speculative config) are promises; once both roles have NixlConnector the NIXL rules apply
again."""

from __future__ import annotations

import json

from pdd_operator.compat.rules import CHECKS
from tests.unit.test_turn2_variants import check, rules

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _deployment(role: str, args: list[str], gpus: int = 1, image: str = "vllm/vllm-openai:v0.33.0",
                env: list[dict] | None = None) -> dict:
    """One engine of a prefill/decode pair as a Deployment (labels ``app: t``, ``role: <role>``)."""
    labels = {"app": "t", "role": role}
    container = {"name": "vllm", "image": image, "command": ["vllm", "serve"], "args": args,
                 "env": env if env is not None else [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
                                                      "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"t-{role}", "labels": labels},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


def _lws(role: str, line: str, image: str = "ghcr.io/llm-d/llm-d-cuda:latest") -> dict:
    """A LeaderWorkerSet of size 2 whose leader runs ``ray start --head && <line>`` (llm-d-modelservice multinode)."""
    labels = {"llm-d.ai/model": "qwen", "llm-d.ai/role": role}
    leader = {"name": "vllm", "image": image, "command": ["/bin/bash", "-c"],
              "args": [f"ray start --head --port=6379 && {line}"],
              "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    worker = {"name": "vllm", "image": image,
              "command": ["/bin/bash", "-c", "ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"],
              "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": f"ms-{role}", "labels": labels},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": {"metadata": {"labels": labels}, "spec": {"containers": [leader]}},
                "workerTemplate": {"metadata": {"labels": labels}, "spec": {"containers": [worker]}}}}}


PP2 = ("vllm serve Qwen/Qwen3-0.6B --port {port} --tensor-parallel-size 1 --pipeline-parallel-size 2 "
       "--distributed-executor-backend ray")


def test_a_connectorless_multinode_pair_gets_only_the_missing_connector(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _lws("prefill", PP2.format(port=8100)), _lws("decode", PP2.format(port=8200)))
    assert code == 1 and rules(out, "error") == {"kv-connector-missing"}, out
    assert not any(r.startswith("pp-") or r.startswith("side-channel") for r in rules(out))
    assert not out.get("notChecked"), out
    (finding, *_) = [f for r in out["results"] for f in r["findings"] if f["rule"] == "kv-connector-missing"]
    assert "checked once both roles have a connector" in finding["message"]


def test_the_same_pair_with_nixl_on_both_is_judged_by_the_nixl_rules(tmp_path, capsys):
    # Negative control: the connector given, decode's pipeline parallelism is refused again (pull NIXL, vLLM 0.33).
    nixl = f" --kv-transfer-config '{NIXL}'"
    code, out = check(tmp_path, capsys, _lws("prefill", PP2.format(port=8100) + nixl, "vllm/vllm-openai:v0.33.0"),
                      _lws("decode", PP2.format(port=8200) + nixl, "vllm/vllm-openai:v0.33.0"))
    assert code == 1 and "kv-connector-missing" not in rules(out)
    assert {"pp-decode-unsupported", "pp-pull-unsupported"} <= rules(out, "error"), out


def test_nixl_on_prefill_only_skips_the_pair_rules(tmp_path, capsys):
    # vLLM 0.10.2 asserts equal block sizes at the handshake, but without a decode connector no handshake happens.
    code, out = check(tmp_path, capsys,
                      _deployment("prefill", ["Qwen/Qwen3-0.6B", "--block-size", "32", "--kv-transfer-config", NIXL],
                                  image="vllm/vllm-openai:v0.10.2"),
                      _deployment("decode", ["Qwen/Qwen3-0.6B", "--block-size", "16"], image="vllm/vllm-openai:v0.10.2",
                                  env=[]))
    assert code == 1 and rules(out, "error") == {"kv-connector-missing"}, out
    messages = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "kv-connector-missing"]
    assert len(messages) == 1 and messages[0].startswith("decode:")


def test_with_both_connectors_the_block_size_rule_is_back(tmp_path, capsys):
    # Negative control of the previous one.
    code, out = check(tmp_path, capsys,
                      _deployment("prefill", ["Qwen/Qwen3-0.6B", "--block-size", "32", "--kv-transfer-config", NIXL],
                                  image="vllm/vllm-openai:v0.10.2"),
                      _deployment("decode", ["Qwen/Qwen3-0.6B", "--block-size", "16", "--kv-transfer-config", NIXL],
                                  image="vllm/vllm-openai:v0.10.2"))
    assert code == 1 and "block-size-hetero-unsupported" in rules(out, "error")


def test_what_fails_an_engine_on_its_own_is_still_refused_without_a_connector(tmp_path, capsys):
    # TP 2 on one GPU fails at startup with or without KV transfer; so does EAGLE3 without its draft model.
    eagle = json.dumps({"method": "eagle3", "num_speculative_tokens": 3})
    code, out = check(tmp_path, capsys,
                      _deployment("prefill", ["Qwen/Qwen3-8B", "--tensor-parallel-size", "2"], gpus=1),
                      _deployment("decode", ["Qwen/Qwen3-8B", "--speculative-config", eagle]))
    assert code == 1
    assert {"kv-connector-missing", "parallelism-gpu-count", "speculative-incomplete"} <= rules(out, "error"), out


def test_the_rules_run_without_a_connector_are_engine_rules():
    bare = {r.id for r in CHECKS if r.without_connector}
    assert bare == {"kv-connector-missing", "engine-args-invalid", "extra-args-managed-flag", "parallelism-gpu-count",
                    "engines-share-gpu", "speculative-incomplete",
                    # set 19: scheduler budgets vLLM refuses at startup, connector or not
                    "max-num-batched-tokens-below-max-model-len", "max-num-batched-tokens-unverified",
                    # set 20: flags vLLM removed and an attention backend the model cannot use stop the engine itself
                    "cli-flag-removed", "attention-backend-unsupported",
                    # fixT: --attention-backend beside attention_config.backend (--attention-config, the env 0.13-0.14)
                    "attention-backend-set-twice",
                    # set 28: NIXL on one role and a connector without NIXL on the other (no KV moves)
                    "kv-connector-mixed",
                    # session 26: KVTransferConfig refuses kv_rank & co. from 0.32.0 whatever the connector
                    "kv-transfer-config-removed-field",
                    # set 33: VllmConfig's NIXL DCP assertions and P2pNcclEngine's http_port stop the engine itself
                    "nixl-dcp-partial", "nixl-dcp-non-mla", "nixl-pcp-refused", "p2p-nccl-http-port-missing",
                    # noticed 27: options a release's parser lacks; P2pNcclConnector gone from the factory (0.24.0)
                    "cli-flag-not-yet", "p2p-nccl-connector-unavailable",
                    # set 37: a TP the model's heads do not divide stops the engine itself
                    "tp-heads-indivisible",
                    # set 36: a connector name the release does not register; a sidecar on the engine's port
                    "kv-connector-unregistered", "pod-port-conflict",
                    # set 41: P2pNcclConnector's ZMQ binds of kv_port + rank on one host
                    "p2p-nccl-kv-port-conflict",
                    # round 28: MooncakeConnector's TP ratio and KV region length (its pairs run no NIXL rule)
                    "mooncake-tp-indivisible", "mooncake-kv-region-length",
                    # branch i9-mooncake32: 0.13.0-0.18.x MooncakeConnector pushes with the prefill's own block_len
                    "mooncake-hetero-tp-unsupported",
                    # branch i9-mooncake32: the V1 engine of 0.9.0-0.10.0 asserts a V1 class for V0-only connectors
                    "kv-connector-v0-only",
                    # branch i9-v0pairs32: the V0 engine's PyNcclPipe rank pairing and Mooncake V0 config path
                    "v0-pynccl-kv-rank", "v0-mooncake-config-path",
                    # set 48: MooncakeConnectorWorker refuses pipeline parallelism (0.16.0-0.23.0)
                    "mooncake-pp-unsupported",
                    # branch i9-fixS: 0.19.0-0.29.x Mooncake sender's raw TP ratio against a decode past the KV heads
                    "mooncake-decode-kv-replicated",
                    # set 62: CPUOffloadingSpec refuses a pool size under the other release's key
                    "offloading-cpu-size-key",
                    # set 55: VllmConfig refuses expandable_segments with any KV connector from 0.21.0
                    "expandable-segments-with-nixl",
                    # set 84: VllmConfig asks any connector class whether it supports sleep mode (0.33.0)
                    "sleep-mode-unsupported", "extensible-kv-cache-unsupported",
                    # set 96: a vllm.* connector module the release lacks, MoRIIO's int() of its ports, Mooncake's
                    # refusal to re-shard NVFP4 KV heads (0.30.0-0.34.0)
                    "kv-connector-module-missing", "moriio-extra-config-port-invalid", "moriio-listener-port-collision",
                    "mooncake-kv-lease-invalid", "mooncake-kv-lease-one-sided", "config-file-mapping-release-dependent",
                    "mooncake-hetero-tp-nvfp4-kv",
                    # session 29: SpeculativeConfig refuses keys 0.34.0 dropped whatever the connector
                    "speculative-config-removed-field",
                    # session 29: args that repeat the image's entrypoint stop the argument parser
                    "entrypoint-repeated",
                    # rules round 30: a --kv-cache-dtype the release's parser or config refuses
                    "kv-cache-dtype-unknown",
                    # set 58: a PDDeployment's vllmVersion against its image tag (the spec alone decides it)
                    "vllm-version-image-mismatch",
                    # fixB: an architecture the release's model registry lacks (--model-impl vllm) stops vLLM's config
                    "architecture-not-in-release",
                    # set 105: a --max-model-len past the model's derived context stops vLLM's config
                    "max-model-len-exceeds-model",
                    # fixF: an option that takes one value given none (argparse stops the parser, connector or not)
                    "cli-option-missing-value",
                    # leftovers 31: a VLLM_KV_CACHE_LAYOUT the KV cache dtype's backend refuses (TurboQuant, 0.34.0)
                    "kv-layout-dtype-unsupported",
                    # entry 32: a Dynamo worker judged with an assumed default connector (none with --connector none)
                    "dynamo-connector-assumed",
                    # start 32: MooncakeConnector asserts a kv_role that contradicts the engine's role
                    "kv-role-contradicts-role",
                    # set 67: Dynamo's vLLM worker raises over its connector flags before the engine starts
                    "dynamo-connector-flag",
                    # set 79: an EC connector (E/P/D) the release's ECConnectorFactory does not register
                    "ec-connector-unregistered",
                    # set 86: an option written with three hyphens or a typographic dash stops the parser
                    "cli-option-malformed",
                    # set 110: ParallelConfig refuses a DP rank at or past --data-parallel-size, connector or not
                    "data-parallel-rank-out-of-range",
                    # set 87: a block-quantized FP8 checkpoint's experts at a TP that does not split its blocks
                    "fp8-moe-block-tp-indivisible",
                    # set 88: weights per GPU above what the engine may use of its GPU's memory
                    "weights-exceed-gpu-memory",
                    # fixN: vllm-rs serve on a release without the Rust frontend
                    "rust-frontend-unavailable",
                    # fixO: a --middleware under vllm.entrypoints the release does not ship (OME's vLLM runtimes)
                    "middleware-module-missing",
                    # fixO: Dynamo 0.4.x replaces the worker's --kv-transfer-config (said where it is given)
                    "dynamo-kv-transfer-config-overwritten",
                    # set 94: two listeners in one network namespace, whatever the engines' KV connector (HTTP, KV
                    # events, MoRIIO's handshake and notify ports; the NIXL side channel of NIXL engines)
                    "listener-port-conflict", "same-role-port-conflict",
                    # fixX: vLLM's gRPC server parses none of the HTTP front end's flags
                    "grpc-server-flag-unrecognised",
                    # set 104: a hybrid SSM model over a connector that is not SupportsHMA fails at startup
                    "hybrid-connector-without-hma",
                    # set 109: another framework's flag stops vLLM's argument parser, connector or not
                    "cli-flag-unknown"}
