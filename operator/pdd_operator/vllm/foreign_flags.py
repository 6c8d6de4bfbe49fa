"""Flags of other serving frameworks that vLLM's own parser never defined, which users copy into a vLLM engine's
arguments.

A P/D deployment moved from Dynamo, SGLang or TensorRT-LLM to plain vLLM (a ``vllm serve`` container, an
``api_server`` module, a PDDeployment's ``extraArgs``) often keeps a setting of the framework it came from: a Dynamo
graph's ``max-local-prefill-length`` (haydeniw/dynamo#92), an SGLang launch's ``--mem-fraction-static``. vLLM parses
its argv with ``FlexibleArgumentParser`` (``vllm/utils/argparse_utils.py``; ``vllm/utils/__init__.py`` before
0.11), an ``argparse.ArgumentParser`` that rewrites ``_`` to ``-`` in option names and ends in ``parse_args``
(0.9.0 ``vllm/entrypoints/cli/main.py``, 0.34.0 line 110): a word no option string matches stops it with
``error: unrecognized arguments`` (exit 2) before the engine starts. argparse's ``allow_abbrev`` is left on, so a
word that begins exactly one option string would be taken for it; none of these begins one.

Each flag here was read absent from the parsers of vLLM 0.9.0, 0.10.1.1, 0.18.0, 0.30.0 and 0.34.0 (wheels) and
0.26.0, 0.27.0 (sdists): no ``"--x`` string literal (as an option string or the start of one) in
``vllm/engine/arg_utils.py``, ``vllm/entrypoints/**`` or ``vllm/config/*.py``, and no ``x:`` field there from
which an option string is derived. Flags that vLLM shares with those frameworks (``--kv-cache-dtype``,
``--attention-backend``, ``--nnodes``, ``--node-rank``, ``--host``, ...) or that begin a vLLM option string
(``--model-path``, ``--kv-connector``, ``--page-size``, ``--endpoint`` in vLLM's benchmark parsers) are not listed.

Only vLLM's own entry points are judged with this table: Dynamo's ``dynamo.vllm`` worker defines some of these
(``--is-prefill-worker``, ``--disaggregation-mode``, ``--connector``: :mod:`pdd_operator.compat.dynamo_worker_flags`)
and vLLM's gRPC servers have parsers of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ForeignFlag:
    """A flag of another framework.

    Attributes:
        owner: whose flag it is (the framework and, where it helps, the release line that had it).
        instead: a clause for the fix: vLLM's nearest setting, or that vLLM has none.
    """

    owner: str
    instead: str


_DYNAMO_SDK = "Dynamo's SDK graph config (VllmWorker / PrefillWorker, ai-dynamo 0.1-0.3)"
_DYNAMO = "Dynamo's dynamo.vllm worker"
_SGLANG = "SGLang's launch_server"
_TRTLLM = "TensorRT-LLM's trtllm-serve"

#: Long flag name (dashes, as :func:`pdd_operator.vllm.flags.parse_flags` normalises it) -> whose flag it is.
FOREIGN_FLAGS: dict[str, ForeignFlag] = {
    "--max-local-prefill-length": ForeignFlag(
        _DYNAMO_SDK,
        "vLLM has no such setting: the router decides which requests go to prefill"),
    "--max-prefill-queue-size": ForeignFlag(_DYNAMO_SDK, "vLLM has no such setting: the prefill queue was Dynamo's"),
    "--remote-prefill": ForeignFlag(
        _DYNAMO_SDK,
        "vLLM has no such setting: --kv-transfer-config makes the engine a P/D role"),
    "--conditional-disagg": ForeignFlag(
        _DYNAMO_SDK,
        "vLLM has no such setting: conditional disaggregation is the router's"),
    "--is-prefill-worker": ForeignFlag(
        _DYNAMO,
        "vLLM has no such setting: vllm serve takes its role from --kv-transfer-config"),
    "--is-decode-worker": ForeignFlag(
        _DYNAMO,
        "vLLM has no such setting: vllm serve takes its role from --kv-transfer-config"),
    "--disaggregation-mode": ForeignFlag(
        f"{_DYNAMO} and {_SGLANG}",
        "vLLM has no such setting: vllm serve takes its role from --kv-transfer-config"),
    "--migration-limit": ForeignFlag(_DYNAMO, "vLLM has no such setting: request migration is Dynamo's"),
    "--router-mode": ForeignFlag("Dynamo's frontend", "vLLM has no such setting: it is a router's, not an engine's"),
    "--dyn-tool-call-parser": ForeignFlag(_DYNAMO, "vLLM's own is --tool-call-parser"),
    "--dyn-reasoning-parser": ForeignFlag(_DYNAMO, "vLLM's own is --reasoning-parser"),
    "--custom-jinja-template": ForeignFlag(_DYNAMO, "vLLM's own is --chat-template"),
    "--tp-size": ForeignFlag(f"{_SGLANG} and {_TRTLLM}", "vLLM's own is --tensor-parallel-size"),
    "--dp-size": ForeignFlag(_SGLANG, "vLLM's own is --data-parallel-size"),
    "--ep-size": ForeignFlag(f"{_SGLANG} and {_TRTLLM}", "vLLM's own is --enable-expert-parallel"),
    "--mem-fraction-static": ForeignFlag(_SGLANG, "vLLM's own is --gpu-memory-utilization"),
    "--disaggregation-transfer-backend": ForeignFlag(_SGLANG, "vLLM's own is --kv-transfer-config"),
    "--disaggregation-bootstrap-port": ForeignFlag(_SGLANG, "vLLM's own is VLLM_NIXL_SIDE_CHANNEL_PORT"),
    "--disaggregation-ib-device": ForeignFlag(_SGLANG, "vLLM's own is UCX_NET_DEVICES"),
    "--chunked-prefill-size": ForeignFlag(_SGLANG, "vLLM's own is --max-num-batched-tokens"),
    "--context-length": ForeignFlag(_SGLANG, "vLLM's own is --max-model-len"),
    "--enable-dp-attention": ForeignFlag(_SGLANG, "vLLM's own is --data-parallel-size with --enable-expert-parallel"),
    "--moe-a2a-backend": ForeignFlag(_SGLANG, "vLLM's own is --all2all-backend"),
    "--dist-init-addr": ForeignFlag(_SGLANG, "vLLM's own is --data-parallel-address"),
    "--max-running-requests": ForeignFlag(_SGLANG, "vLLM's own is --max-num-seqs"),
    "--cuda-graph-max-bs": ForeignFlag(_SGLANG, "vLLM's own is the CUDA graph capture sizes of --compilation-config"),
    "--schedule-policy": ForeignFlag(_SGLANG, "vLLM's own is --scheduling-policy"),
    "--max-total-tokens": ForeignFlag(_SGLANG, "vLLM's own is --kv-cache-memory-bytes or --num-gpu-blocks-override"),
    "--max-batch-size": ForeignFlag(_TRTLLM, "vLLM's own is --max-num-seqs"),
    "--max-num-tokens": ForeignFlag(_TRTLLM, "vLLM's own is --max-num-batched-tokens"),
    "--kv-cache-free-gpu-memory-fraction": ForeignFlag(_TRTLLM, "vLLM's own is --gpu-memory-utilization"),
    "--extra-llm-api-options": ForeignFlag(_TRTLLM, "vLLM takes its own flags instead"),
    "--connector": ForeignFlag(
        f"{_DYNAMO} (deprecated from ai-dynamo 1.0) and llm-d's routing sidecar",
        "vLLM's own is --kv-transfer-config"),
}


def foreign_flags(flags: Mapping[str, object]) -> tuple[str, ...]:
    """The :data:`FOREIGN_FLAGS` among an engine's parsed flags (``--no-x`` forms included), in the order of
    :data:`FOREIGN_FLAGS`; ``()`` when none.

    flags: the long flag names of :func:`~pdd_operator.vllm.flags.parse_flags` (underscores already dashes)."""
    return tuple(name for name in FOREIGN_FLAGS if name in flags or f"--no-{name[2:]}" in flags)
