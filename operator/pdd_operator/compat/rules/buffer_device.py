"""One engine's ``kv_buffer_device`` against the NIXL device table of its platform and release
(:mod:`pdd_operator.vllm.nixl_devices`)."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.nixl_devices import JUDGED_RELEASES, TABLE_SINCE, buffer_refusal, nixl_device_type
from pdd_operator.vllm.versions import fmt


def buffer_device_fault(r: RoleConfig) -> tuple[str, str] | None:
    """How vLLM refuses engine ``r``'s ``kv_buffer_device`` on its platform, as ``(severity, why)``; ``None``
    where it does not, where ``r`` has no NIXL connector, or where its platform is not known.

    A known release: ``error`` with vLLM's own words. An unknown one (or a development build): judged on
    :data:`~pdd_operator.vllm.nixl_devices.JUDGED_RELEASES` from 0.10.1 on; ``error`` where every one refuses,
    ``warning`` where only some do (the default buffer changed in 0.18.0, XPU device memory came in 0.17.0).
    """
    if not r.nixl:
        return None
    device = nixl_device_type(r.image, r.resources, r.env)
    if device is None:
        return None
    if r.version is not None:
        why = buffer_refusal(r.version, device, r.buffer_device)
        return None if why is None else ("error", f"vLLM {fmt(r.version)} raises RuntimeError \"{why}\"")
    refused = {v: buffer_refusal(v, device, r.buffer_device) for v in JUDGED_RELEASES if v >= TABLE_SINCE}
    bad = [v for v, why in refused.items() if why]
    if not bad:
        return None
    if len(bad) == len(refused):
        return "error", f"every vLLM release from {fmt(TABLE_SINCE)} on raises RuntimeError \"{refused[bad[-1]]}\""
    return "warning", (f"vLLM {', '.join(fmt(v) for v in bad)} (among the releases where the table or default "
                       f"changed) raise RuntimeError \"{refused[bad[0]]}\"; the version here is not known")


@rule(
    id="kv-buffer-device-unsupported", family="kv-buffer-device", severity="error",
    fields=("spec.kvTransfer.bufferDevice",),
    source=("vllm NIXL worker device table (_NIXL_SUPPORTED_XPUS 0.10.1-0.10.2, _NIXL_SUPPORTED_DEVICE "
            "nixl_connector.py 0.11.0-0.19, nixl/utils.py 0.20+; read in 0.10.1.1, 0.10.2, 0.11.0, 0.11.1, 0.12.0, "
            "0.16.0, 0.17.0, 0.19.1, 0.28.0, 0.33.0, 0.34.0): '{device} with {kv_buffer_device} kv_buffer is not "
            "supported.'; config/kv_transfer.py: the default kv_buffer_device is 'cuda' to 0.17.x, the platform's "
            "device_type from 0.18.0; a NIXL child of MultiConnector runs its own kv_buffer_device or that default, "
            "never the parent's (multi_connector.py _get_connector_classes_and_configs: KVTransferConfig(**ktc), "
            "0.20.0 lines 195-200, 0.34.0 lines 274-279)"),
    example="a CPU-image engine on vLLM 0.12.0 without kv_buffer_device (the default, cuda)",
)
def check_buffer_device_supported(pair: PDPair) -> list[Violation]:
    """Each NIXL engine's kv_buffer_device is one its platform accepts in its vLLM release (cpu only on CPU and
    TPU engines, xpu on XPU only from 0.17.0, the cuda default before 0.18.0 on none but GPUs)."""
    out: list[Violation] = []
    for r in pair.roles:
        fault = buffer_device_fault(r)
        if fault is None:
            continue
        severity, why = fault
        device = nixl_device_type(r.image, r.resources, r.env)
        written = f"kv_buffer_device {r.buffer_device}" if r.buffer_device else "no kv_buffer_device (the default)"
        message = (f"{r.role}: a NIXL engine on vLLM's {device} platform with {written}: {why} when the connector "
                   "starts, so the engine never serves.")
        fix = fix_for(pair, f"Set spec.kvTransfer.bufferDevice to a value the {device} platform accepts (cpu "
                            "stages KV in host memory).",
                      f"Set kv_buffer_device in the {r.role}'s --kv-transfer-config to one the {device} platform "
                      "accepts in this release (cpu on CPU and TPU engines; xpu or cpu on XPU from vLLM 0.17.0).")
        out.append((message, fix) if severity == "error" else (message, fix, "warning"))
    return out
