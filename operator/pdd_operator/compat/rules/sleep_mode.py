"""Sleep mode (``--enable-sleep-mode``) on an engine whose NIXL connector vLLM says cannot sleep."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.versions import Version, fmt

#: First vLLM release whose config/vllm.py refuses ``--enable-sleep-mode`` with a KV connector that does not
#: support it ("{kv_connector} does not support sleep mode.", ../shared/docs/vllm-nixl-facts.md section 4.11,
#: read in 0.33.0). The 0.32.0 wheel has no such check (no ``supports_sleep_mode`` anywhere under vllm/), so an
#: older engine starts.
SLEEP_MODE_REFUSED_SINCE: Version = (0, 33, 0)


def sleep_mode_refusal(r: RoleConfig) -> tuple[str, str] | None:
    """Why vLLM 0.33+ refuses sleep mode on engine ``r``, as ``(severity, why)``; ``None`` where it does not.

    - ``NixlPushConnector``: ``error``, the push connector never supports sleep mode
      (``NixlBaseConnector.supports_sleep_mode`` is False for it);
    - the pull connector (``NixlConnector``, ``NixlPullConnector``): ``error`` unless
      ``kv_connector_extra_config.backends`` is exactly ``["UCX"]`` (the default), the only list it supports;
    - a NIXL connector inside a wrapper (MultiConnector): ``warning``, the wrapper's own answer was not read.
    """
    if "--enable-sleep-mode" not in r.cumem_flags or not r.nixl:
        return None
    if r.wrapper:
        return "warning", (f"inside {r.wrapper}, whose answer to vLLM's sleep-mode check (the NIXL child's: "
                           "push never, pull only with backends [\"UCX\"]) was not read here")
    if r.push:
        return "error", "NixlPushConnector never supports sleep mode"
    if r.backends != ["UCX"]:
        return "error", (f"the pull connector supports sleep mode only with kv_connector_extra_config.backends "
                         f"[\"UCX\"], and this engine has {r.backends}")
    return None


@rule(
    id="sleep-mode-unsupported", family="sleep-mode-with-nixl", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.kvTransfer.connector"),
    since=SLEEP_MODE_REFUSED_SINCE,
    source=("vllm/config/vllm.py (0.33.0): '{kv_connector} does not support sleep mode.' at startup; "
            "NixlBaseConnector.supports_sleep_mode: False for NixlPushConnector, True for pull only with backends "
            "['UCX'] (../shared/docs/vllm-nixl-facts.md 4.11); absent from the 0.32.0 wheel"),
    example="--enable-sleep-mode on both roles of a NixlPushConnector pair (vLLM 0.33.0)",
)
def check_sleep_mode(pair: PDPair) -> list[Violation]:
    """No --enable-sleep-mode on an engine whose NIXL connector does not support sleep mode (push, or pull
    with a backend list other than ["UCX"]).

    Each role on its own: the role given the flag fails while its config is built and never starts.
    """
    out: list[Violation] = []
    for r in pair.roles:
        refusal = sleep_mode_refusal(r)
        if refusal is None:
            continue
        severity, why = refusal
        version = fmt(r.version) if r.version else "this release"
        out.append((
            f"{r.role}: --enable-sleep-mode with {r.connector}: {why}; vLLM {version} refuses it while building the "
            f"engine's config (vllm/config/vllm.py: \"{r.connector} does not support sleep mode.\"), so this engine "
            "never starts.",
            f"Remove --enable-sleep-mode from the {r.role} engine, or use the pull connector (NixlConnector) with "
            "the default UCX backend where the engine must sleep.",
            severity,
        ))
    return out
