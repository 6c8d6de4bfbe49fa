"""The SSM conv-state layout vLLM's CPU platform gives an engine, per release: what the NIXL worker's DS assert sees.

From 0.20.0 the NIXL worker of a model with Mamba or linear-attention (GDN) layers asserts
``is_conv_state_dim_first()`` at startup ("3-read Mamba conv transfer requires DS conv state layout"), which reads
``VLLM_SSM_CONV_STATE_LAYOUT`` (``model_executor/layers/mamba/mamba_utils.py get_conv_state_layout``: the variable,
else ``SD``). On vLLM's CPU platform ``CpuPlatform.check_and_update_config`` (``platforms/cpu.py``) writes that
variable itself, differently per release:

- up to 0.21.x it does not touch it (0.20.0, 0.20.1, 0.21.0 sources): the manifest's value holds;
- 0.22.0-0.28.x set ``SD`` whenever the host has AMX tiles (``torch.cpu._is_amx_tile_supported()``; 0.22.0 line 230,
  0.26.0, 0.27.0 and 0.27.1 line 241, 0.28.0 line 270; 0.23-0.25 not read, between two releases that agree), over any
  value the manifest gives;
- 0.29.0-0.30.x set ``SD`` whenever the host has AVX-512-BF16 (``torch.cpu._is_avx512_bf16_supported()``; 0.29.0
  lines 365-366, 0.30.0 lines 403-404: "apply it beyond AMX (e.g. AMD Zen5/Turin)"), again over the manifest's value;
- from 0.31.0 an explicit value is kept, and an unset one becomes ``DS`` when the kv_transfer_config names a NIXL
  connector (``NixlConnector``, ``NixlPullConnector``, ``NixlPushConnector``, directly or inside a MultiConnector:
  ``KVTransferConfig.has_connector``), else ``SD`` on AVX-512-BF16 hosts (0.31.0 lines 407-423, 0.34.0 lines 440-456;
  0.32.0 and 0.33.0 the same). That is the fix of vllm-project/vllm#58034 ("DS conv-layout assert vs the platform's
  forced SD").

Which host feature a pod lands on is not in a manifest, so 0.22-0.30 make a hybrid CPU engine fail on some hosts only.
"""

from __future__ import annotations

from pdd_operator.vllm.versions import Version

#: First release whose CPU platform overrides the layout on some hosts (AMX tiles).
FORCED_SD_SINCE: Version = (0, 22, 0)
#: First release whose CPU platform keeps an explicit layout and picks DS for a NIXL connector.
NIXL_DS_SINCE: Version = (0, 31, 0)
#: First release whose override applies on every AVX-512-BF16 host (not only AMX ones).
AVX512_BF16_SINCE: Version = (0, 29, 0)


def cpu_conv_layout(version: Version, layout: str | None) -> tuple[str, str]:
    """The conv-state layout a CPU engine of vLLM ``version`` runs with, given the manifest's
    ``VLLM_SSM_CONV_STATE_LAYOUT`` (``None`` when unset) and a NIXL connector in its kv_transfer_config.

    Returns ``(layout, hosts)``: ``layout`` is what the NIXL worker reads on a host without the overriding feature
    (``"DS"``, ``"SD"`` or the manifest's own value); ``hosts`` names the hosts where the platform writes ``SD`` over
    it (``"with AMX tiles"``, ``"with AVX-512-BF16"``), ``""`` where no host does.
    """
    if version >= NIXL_DS_SINCE:
        return (layout or "DS"), ""
    manifest = layout or "SD"
    if version >= AVX512_BF16_SINCE:
        return manifest, "with AVX-512-BF16 (vLLM 0.29-0.30)"
    if version >= FORCED_SD_SINCE:
        return manifest, "with AMX tiles (Intel Sapphire Rapids and later; vLLM 0.22-0.28)"
    return manifest, ""
