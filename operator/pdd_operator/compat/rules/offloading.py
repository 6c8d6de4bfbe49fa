"""What vLLM's ``OffloadingConnector`` refuses when its engine starts: the CPU pool size under the key its release
reads. An engine-alone rule (the engine fails by itself), so it holds whether the connector runs alone or next to NIXL
in a ``MultiConnector``."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.kv_offloading import (
    CPU_BYTES_KEY_SINCE,
    OFFLOADING_CONNECTOR_SINCE,
    cpu_size_key,
    offloading_configs,
)
from pdd_operator.vllm.versions import fmt

#: The spec ``OffloadingConnector`` builds when ``spec_name`` is not given (v1/kv_offload/factory.py
#: ``extra_config.get("spec_name", "CPUOffloadingSpec")``, 0.11.0 line 39 ... 0.34.0 line 31).
DEFAULT_SPEC = "CPUOffloadingSpec"
_KEYS = ("num_cpu_blocks", "cpu_bytes_to_use")


def _written_top(role) -> str | None:
    """The connector the role's ``--kv-transfer-config`` names at its top, as vLLM runs it (``None`` when vLLM
    replaced the written config, e.g. by ``--kv-offloading-size``)."""
    top = role.wrapper.split("[", 1)[0] if role.wrapper else role.connector
    return top if role.kv_transfer_written.get("kv_connector") == top else None


@rule(
    id="offloading-cpu-size-key", family="connector", severity="error",
    fields=("spec.kvTransfer.extraConfig",),
    source=("vllm v1/kv_offload/cpu.py CPUOffloadingSpec.__init__: 'num_cpu_blocks must be specified in "
            "kv_connector_extra_config' (0.11.0-0.13.0), 'cpu_bytes_to_use must be specified in "
            "kv_connector_extra_config' (cpu.py 0.14.0-0.16.0, cpu/spec.py 0.20.0-0.34.0); vllm-project/vllm#24498"),
    example='{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":'
    '{"block_size":64,"num_cpu_blocks":1000}} on v0.14.0',
    since=OFFLOADING_CONNECTOR_SINCE, without_connector=True,
)
def check_offloading_cpu_size_key(pair: PDPair) -> list[Violation]:
    """An OffloadingConnector with the default CPU spec names its CPU pool size under the key its release reads.

    For each role's written ``--kv-transfer-config`` (alone or a ``MultiConnector`` child, whose
    ``kv_connector_extra_config`` is its own), an ``OffloadingConnector`` without ``spec_name`` (or with
    ``CPUOffloadingSpec``) must set :func:`~pdd_operator.vllm.kv_offloading.cpu_size_key` of the release to a truthy
    value: ``num_cpu_blocks`` up to 0.13.x, ``cpu_bytes_to_use`` from 0.14.0; the spec raises at start otherwise
    (the other key is not read). Another spec (a plugin's) is not judged, nor a config vLLM replaced
    (``--kv-offloading-size`` writes ``cpu_bytes_to_use`` itself), nor one without ``kv_role`` (refused earlier, when
    ``KVTransferConfig`` is built: ``engine-args-invalid``)."""
    out: list[Violation] = []
    key = cpu_size_key(pair.version)
    for r in pair.roles:
        if _written_top(r) is None:
            continue
        for cfg in offloading_configs(r.kv_transfer_written):
            if not cfg.get("kv_role"):
                continue  # KVTransferConfig refuses it while the flag is parsed (engine-args-invalid's)
            extra = cfg.get("kv_connector_extra_config") or {}
            if not isinstance(extra, dict) or extra.get("spec_name", DEFAULT_SPEC) != DEFAULT_SPEC or extra.get(key):
                continue
            other = next((k for k in _KEYS if k != key and extra.get(k)), None)
            named = f" (it sets {other}, which this release does not read)" if other else ""
            out.append((
                f"{r.role}: OffloadingConnector without {key} in its kv_connector_extra_config{named}: vLLM "
                f"{fmt(pair.version)}'s CPUOffloadingSpec raises '{key} must be specified in kv_connector_extra_config' "
                f"when the engine starts ({'from' if key == 'cpu_bytes_to_use' else 'before'} "
                f"{fmt(CPU_BYTES_KEY_SINCE)} the CPU pool is sized by {key}).",
                fix_for(pair, f"Set {key} in the OffloadingConnector's kv_connector_extra_config.",
                        f"Set \"{key}\" in the {r.role}'s OffloadingConnector kv_connector_extra_config"
                        + (" (bytes of CPU memory for all workers)." if key == "cpu_bytes_to_use" else
                           " (the number of CPU blocks).")),
            ))
    return out
