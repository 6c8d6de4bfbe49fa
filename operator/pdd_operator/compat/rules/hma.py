"""The hybrid KV cache manager (HMA) under a KV connector: when vLLM turns it off without saying so."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.compat.rules.hma_forced import forced_off_reasons
from pdd_operator.vllm.versions import fmt


@rule(
    id="hma-implicitly-disabled", family="hma", severity="warning",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.model.architecture"),
    source=("vllm/config/vllm.py: with a kv_transfer_config and no explicit --no-disable-hybrid-kv-cache-manager the "
            "hybrid KV cache manager is disabled (up to 0.21; default-on for connectors from 0.22, vllm#41847); "
            "NixlConnector supports HMA from 0.18.0; vllm#42024"),
    since=(0, 18, 0), until=(0, 22, 0),
)
def check_hma_implicitly_disabled(pair: PDPair) -> list[Violation]:
    """Sliding-window models keep the hybrid KV cache manager on under NIXL (else KV capacity drops)."""
    if not pair.model.sliding_window or pair.hybrid_ssm:
        return []
    # where vLLM must turn HMA off anyway (hma-explicit-forced-off), the flag this warning names would stop the engine
    roles = [r.role for r in pair.roles if r.hma is None and not forced_off_reasons(pair, r)]
    if not roles:
        return []
    return [(
        f"{' and '.join(roles)}: vLLM {fmt(pair.version)} turns the hybrid KV cache manager off whenever a "
        "--kv-transfer-config is given, unless --no-disable-hybrid-kv-cache-manager is passed; this sliding-window "
        "model then keeps full-length KV for every layer, roughly halving KV cache capacity, with no warning.",
        fix_for(pair, "Add --no-disable-hybrid-kv-cache-manager to spec.prefill.extraArgs and spec.decode.extraArgs "
                "(both roles: vLLM hashes the flag).",
                "Pass --no-disable-hybrid-kv-cache-manager to both the prefill and the decode container "
                "(both: vLLM hashes the flag)."),
    )]
