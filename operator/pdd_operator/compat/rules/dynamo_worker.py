"""Dynamo's vLLM worker (``python -m dynamo.vllm``) stops over its connector flags before the engine starts."""

from __future__ import annotations

from pdd_operator.compat.dynamo_engine_defaults import dynamo_release
from pdd_operator.compat.dynamo_worker_flags import CONNECTOR_REJECTED_SINCE, connector_refusal
from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule

_KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


@rule(
    id="dynamo-connector-flag", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"), in_manifest=("args",),
    source=("ai-dynamo wheels 0.6.0-0.9.1 dynamo/vllm/args.py: --connector defaults to [nixl] and ValueError('Cannot "
            "specify both --kv-transfer-config and --connector flags') (0.9.1 lines 138-144, 430-457; --connector "
            "none/null allowed from 0.8.0, refused through 0.7.1); 1.0.0-1.6.1: _reject_connector_flag raises on any "
            "--connector with names or any DYN_CONNECTOR (1.0.0 lines 190, 404-451); every wheel 0.6.0-1.6.1 read: "
            "pdd_operator/compat/dynamo_worker_flags.py; "
            "ishandhanani/srt-slurm#223, ai-dynamo/aiconfigurator#1443"),
    without_connector=True,
    example="--connector nixl on vllm-runtime:1.0.0; --kv-transfer-config with the default --connector on "
            "vllm-runtime:0.9.1",
)
def check_dynamo_connector_flag(pair: PDPair) -> list[Violation]:
    """A Dynamo vLLM worker names its KV connector the way its Dynamo release takes it: before 1.0.0 by
    ``--connector`` (default nixl) and not also by ``--kv-transfer-config``; from 1.0.0 by ``--kv-transfer-config``
    only (any ``--connector`` raises).

    Judged only where the worker's runtime image names its Dynamo release; each role on its own (the role whose worker
    raises never starts)."""
    out: list[Violation] = []
    for r in pair.roles:
        release = dynamo_release(r.image) if r.launcher == "dynamo.vllm" else None
        if release is None:
            continue
        why = connector_refusal(dict(r.launcher_flags), r.env, release)
        if why is None:
            continue
        if release >= CONNECTOR_REJECTED_SINCE:
            fix = (f"Remove --connector (and DYN_CONNECTOR) from the {r.role} worker and name the connector with "
                   f"--kv-transfer-config '{_KV}' in its args.")
        else:
            fix = (f"On this Dynamo release drop --kv-transfer-config from the {r.role} worker's args (its --connector, "
                   "nixl by default, builds NixlConnector), or run a vllm-runtime image of Dynamo 1.0.0 or later.")
        out.append((f"{r.role}: {why}; the {r.role} worker crash-loops and no KV moves.", fix))
    return out
