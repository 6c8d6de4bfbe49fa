"""Auxiliary per-request outputs of an engine (routed-expert capture) that vLLM refuses next to a KV connector."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.versions import Version, fmt

#: First vLLM release whose ``VllmConfig.__post_init__`` (vllm/config/vllm.py) refuses ``--enable-return-routed-experts``
#: with a KV connector: 0.22.0-0.24.0 raise ``ValueError("--enable-return-routed-experts is incompatible with KV
#: connectors (PD disaggregation, KV cache offload).")`` whenever ``kv_transfer_config.is_kv_transfer_instance`` (read
#: in the 0.22.0, 0.23.0 and 0.24.0 sdists); 0.32.0's ``_verify_aux_output_compatibility`` raises "... is incompatible
#: with NixlConnector; PD auxiliary output is not supported." for NixlConnector, NixlPullConnector, NixlPushConnector,
#: MoRIIOConnector and MooncakeConnector (read in the 0.32.0 wheel; the same text in 0.33.0,
#: ../shared/docs/vllm-nixl-facts.md section 4.11). 0.18.0, 0.19.1 and 0.21.0 have no such check (read in their
#: sdists): the engine starts and the routing P captured never reaches D's response. 0.25-0.31 were not read; both
#: neighbours refuse NIXL, so they are taken to refuse it too.
RETURN_ROUTED_EXPERTS_REFUSED_SINCE: Version = (0, 22, 0)


@rule(
    id="return-routed-experts-with-nixl", family="aux-output-with-nixl", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"), since=RETURN_ROUTED_EXPERTS_REFUSED_SINCE,
    source=("vllm/config/vllm.py VllmConfig.__post_init__ (0.22.0-0.24.0: --enable-return-routed-experts with any KV "
            "transfer instance) and VllmConfig._verify_aux_output_compatibility (0.32.0, 0.33.0: with NixlConnector, "
            "NixlPull/PushConnector, MoRIIO, Mooncake): ValueError at startup; absent from 0.18.0-0.21.0"),
    example="--enable-return-routed-experts on the decode of a NixlConnector pair (vLLM 0.33.0)",
)
def check_return_routed_experts(pair: PDPair) -> list[Violation]:
    """No routed-expert capture (--enable-return-routed-experts) on an engine with a NIXL KV connector.

    Each role on its own: the role given the flag raises ``ValueError`` while its config is built and never starts.
    """
    out: list[Violation] = []
    for r in pair.roles:
        if "--enable-return-routed-experts" not in r.aux_outputs:
            continue
        version = fmt(r.version) if r.version else "this release"
        out.append((
            f"{r.role}: --enable-return-routed-experts with NixlConnector: vLLM {version} refuses it while building "
            "the engine's config (vllm/config/vllm.py: \"--enable-return-routed-experts is incompatible with "
            "NixlConnector; PD auxiliary output is not supported\", in 0.22-0.24 \"... incompatible with KV "
            "connectors\"), so this engine never starts.",
            f"Remove --enable-return-routed-experts from the {r.role} engine, or capture routed experts on an "
            "aggregated engine without a KV connector.",
        ))
    return out
