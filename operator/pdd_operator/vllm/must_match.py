"""What prefill and decode must share, defined once.

Each :class:`MustMatch` entry is one thing vLLM compares between the two sides of a NIXL transfer (or,
where vLLM compares nothing, one thing whose mismatch gives wrong output), with the PDDeployment fields
that set it and the vLLM code that compares it. Everything else derives from :data:`MUST_MATCH`:

- the compat hash (:func:`compat_hash`): the ``pdd-operator.dev/compat-hash`` label of every engine
  pod; the router pairs only pods with equal hashes, so a rollout never sends KV between pods that
  disagree on any of these settings, and a change of the hash is rolled out into the other revision
  slot of both roles while the running one serves (``pdd_operator.controller.rollout``);
- the webhook's ``rollout-incompatible-change`` warning (:func:`changed`): a change of one of these
  settings replaces every pod of both roles (both revisions run side by side meanwhile);
- the ``*-mismatch`` compatibility rules, which read foreign manifests where the two roles are written
  separately: each names its entry (``MustMatch.rule``), and a unit test fails when such a rule reads
  a field that is not in its entry.

Deliberately left out, because vLLM never compares them between prefill and decode (each side's
value is its own business): ``spec.model.servedModelName`` (the API name, not hashed: vllm-nixl-facts.md
section 1.5), ``spec.model.trustRemoteCode``, ``spec.model.maxModelLen`` (each side sizes its own KV
cache), ``spec.model.hfTokenSecretRef`` (only how weights are downloaded), ``spec.kvTransfer.sideChannelPort``
(each side advertises its own port: prefill returns ``remote_port`` in ``kv_transfer_params`` in pull
mode, the router reads it from the pod in push mode), ``spec.engine.imagePullPolicy``/``imagePullSecrets``
/``gpuResourceName``, the role sections (replicas, TP, PP, block size, memory: the compatibility rules
judge how they may differ), ``network``, ``placement``, ``port`` and ``router``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.vllm.architectures import traits
from pdd_operator.vllm.flags import parse_flags

#: vLLM's NIXL compatibility hash: ``vllm/distributed/kv_transfer/kv_connector/v1/nixl/metadata.py``
#: ``compute_nixl_compatibility_hash`` (``v1/nixl_connector.py`` before 0.20), checked in
#: ``_nixl_handshake``; vllm-nixl-facts.md section 1.2 lists its factors per version.
HASH = "vLLM NIXL compatibility hash (nixl/metadata.py compute_nixl_compatibility_hash, 0.13+)"
#: The per-transfer checks after the hash: ``_validate_remote_agent_handshake`` (vllm-nixl-facts.md section 4).
HANDSHAKE = "vLLM NIXL handshake checks (nixl worker _validate_remote_agent_handshake)"

#: Environment variables that change what vLLM hashes or asserts, whoever sets them.
ENV_MUST_MATCH = ("VLLM_ATTENTION_BACKEND",)


@dataclass(frozen=True)
class MustMatch:
    """One setting prefill and decode must share.

    Attributes:
        name: what vLLM calls it (a hash factor such as ``cache_dtype``, or the handshake field).
        fields: the PDDeployment fields that set it, dotted camelCase; the first is the shared top-level
            field, any others are per-role places a user can still override it (``extraArgs``, ``env``).
        read: reads the setting from a spec for the compat hash and the rollout warning (JSON-able).
        compared_by: where vLLM compares it, or what goes wrong when nothing does.
        source: vLLM file and versions.
        rule: id of the compatibility rule that reports a prefill/decode difference, if any.
    """

    name: str
    fields: tuple[str, ...]
    read: Callable[[PDDeploymentSpec], Any]
    compared_by: str
    source: str
    rule: str | None = None

    @property
    def field(self) -> str:
        """The shared top-level field (where a PDDeployment sets it for both roles)."""
        return self.fields[0]


def _model_facts(spec: PDDeploymentSpec) -> dict:
    m = spec.model
    t = traits(m.architecture, m.ssm_kind, m.hf_architecture, m.name)
    return {
        "architecture": str(t.architecture) if t.architecture else None,
        "ssmKind": str(t.ssm_kind) if t.ssm_kind else None,
        "numKvHeads": m.num_kv_heads,
        "mambaNGroups": m.mamba_n_groups,
        "configMapRef": m.config_map_ref.wire() if m.config_map_ref else None,
    }


def _env(spec: PDDeploymentSpec, name: str) -> str | None:
    for var in reversed(spec.engine.env):
        if var.name == name:
            return var.value if var.value is not None else json.dumps(var.value_from, sort_keys=True)
    return None


_HMA_FLAGS = ("--disable-hybrid-kv-cache-manager", "--no-disable-hybrid-kv-cache-manager")


def _hma_extra_args(spec: PDDeploymentSpec) -> list[str | None] | None:
    """The last HMA flag in each role's extraArgs; ``None`` when neither role has one (hash unchanged)."""
    flags = [next((a for a in reversed(spec.role(r).extra_args) if a in _HMA_FLAGS), None) for r in ("prefill", "decode")]
    return flags if any(flags) else None


#: The flags that set a hybrid SSM model's state dtypes: the conv state (``--mamba-cache-dtype``) and the temporal
#: (SSM) state (``--mamba-ssm-cache-dtype``); vllm/config/cache.py ``CacheConfig.mamba_cache_dtype`` /
#: ``mamba_ssm_cache_dtype``.
MAMBA_DTYPE_FLAGS = ("--mamba-cache-dtype", "--mamba-ssm-cache-dtype")


def _mamba_state_dtypes(spec: PDDeploymentSpec) -> dict | None:
    """The Mamba state dtype flags (:data:`MAMBA_DTYPE_FLAGS`) each role's extraArgs give, ``{role: {flag: value}}``;
    ``None`` when neither role gives one."""
    out = {}
    for r in ("prefill", "decode"):
        _, flags = parse_flags(["serve", *spec.role(r).extra_args])
        out[r] = {f: v for f in MAMBA_DTYPE_FLAGS if isinstance(v := flags.get(f), str)}
    return out if any(out.values()) else None


def _speculative(spec: PDDeploymentSpec) -> dict | None:
    sp = spec.speculative
    if sp is None:
        return None
    out = sp.wire()
    m = spec.model
    if traits(m.architecture, m.ssm_kind, m.hf_architecture, m.name).needs_hma:
        # Hybrid SSM: num_speculative_tokens sets the conv-state rows, which NIXL assumes equal.
        out["numSpeculativeTokens"] = [spec.prefill.num_speculative_tokens, spec.decode.num_speculative_tokens]
    return out


#: Every setting prefill and decode must share, in the order the compat hash serializes them.
MUST_MATCH: tuple[MustMatch, ...] = (
    MustMatch(
        "vllm_version", ("spec.engine.image", "spec.engine.vllmVersion"),
        lambda s: {"image": s.engine.image, "vllmVersion": s.engine.vllm_version},
        f"{HASH}: factors vllm_version (the exact vllm.__version__ string) and nixl_connector_version",
        "nixl/metadata.py, 0.13-0.33", rule="vllm-version-mismatch"),
    MustMatch(
        "model", ("spec.model.name",), lambda s: s.model.name,
        f"{HASH}: factor model (the --model string as written)", "nixl/metadata.py, 0.13-0.33",
        rule="model-mismatch"),
    MustMatch(
        "model_revision", ("spec.model.revision",), lambda s: s.model.revision,
        "not compared by vLLM up to 0.33 (vllm PR #55776 proposes hashing it): different weights pass the "
        "handshake and decode continues from KV computed by other weights, giving wrong output",
        "nixl/metadata.py (target revision absent from the hash), 0.13-0.33", rule="model-revision-mismatch"),
    MustMatch(
        "dtype", ("spec.model.dtype",), lambda s: str(s.model.dtype),
        f"{HASH}: factor dtype (str(model_config.dtype))", "nixl/metadata.py, 0.13-0.33", rule="dtype-mismatch"),
    MustMatch(
        "model_architecture", ("spec.model.architecture", "spec.model.hfArchitecture", "spec.model.ssmKind",
                               "spec.model.numKvHeads", "spec.model.mambaNGroups", "spec.model.configMapRef"),
        _model_facts,
        f"{HASH}: num_kv_heads, head_size, num_hidden_layers come from the model; the operator renders the HMA "
        "flag and the conv-state layout from these facts (factor is_hma_enabled, 0.18+)",
        "nixl/metadata.py; vllm/config/vllm.py (HMA)"),
    MustMatch(
        "cache_dtype", ("spec.kvCache.dtype",), lambda s: str(s.kv_cache.dtype),
        f"{HASH}: factor cache_dtype (the raw --kv-cache-dtype string: auto and bfloat16 differ)",
        "nixl/metadata.py, 0.13-0.33", rule="kv-cache-dtype-mismatch"),
    MustMatch(
        "kv_cache_layout", ("spec.kvCache.layout", "spec.kvTransfer.enablePermuteLocalKv", "spec.decode.env"),
        lambda s: {"layout": str(s.kv_cache.layout) if s.kv_cache.layout else None,
                   "permute": s.kv_transfer.enable_permute_local_kv},
        f"{HANDSHAKE}: kv_cache_layout equal unless decode permutes (enable_permute_local_kv)",
        "nixl worker, 0.11.1+ (permute path)", rule="kv-layout-mismatch"),
    MustMatch(
        "ssm_conv_state_layout", ("spec.kvCache.ssmConvStateLayout",),
        lambda s: str(s.kv_cache.ssm_conv_state_layout) if s.kv_cache.ssm_conv_state_layout else None,
        "NIXL transfers hybrid SSM conv state as raw bytes: VLLM_SSM_CONV_STATE_LAYOUT must be equal (DS from 0.20)",
        "vllm/model_executor/layers/mamba (conv state layout), 0.20+"),
    MustMatch(
        "attn_backend_name", ("spec.engine.env", "spec.prefill.extraArgs", "spec.decode.extraArgs"),
        lambda s: {n: _env(s, n) for n in ENV_MUST_MATCH},
        f"{HASH}: factor attn_backend_name (the first layer's attention backend, chosen by VLLM_ATTENTION_BACKEND "
        "up to 0.14.1 (attention_backends.backend_env_read); from 0.16.0 by --attention-backend / --attention-config "
        "only, which a PDDeployment gives in extraArgs: not hashed here, the attention-backend-mismatch rule "
        "compares them)", "nixl/metadata.py, 0.13-0.33"),
    MustMatch(
        "transfer_mode", ("spec.kvTransfer.connector",), lambda s: str(s.kv_transfer.connector),
        f"{HASH}: factor transfer_mode (pull/push, 0.28+); before 0.28 push and pull hash alike and fail later",
        "nixl/metadata.py, 0.28-0.33; push connector 0.24+", rule="transfer-mode-mismatch"),
    MustMatch(
        "is_hma_enabled", ("spec.prefill.extraArgs", "spec.decode.extraArgs"), _hma_extra_args,
        f"{HASH}: factor is_hma_enabled (0.18+); the operator renders the same HMA flag on both roles, and an "
        "HMA flag in extraArgs (allowed when both roles give the same one) enters the compat hash",
        "nixl/metadata.py 0.18-0.33; vllm/config/vllm.py (HMA off with a kv-transfer-config, <= 0.21)",
        rule="hma-flag-mismatch"),
    MustMatch(
        "nixl_backends", ("spec.kvTransfer.backends", "spec.kvTransfer.bufferDevice", "spec.kvTransfer.extraConfig"),
        lambda s: {"backends": [str(b) for b in s.kv_transfer.backends], "bufferDevice": str(s.kv_transfer.buffer_device),
                   "extraConfig": s.kv_transfer.extra_config or {}},
        "NIXL agents load the named backend plugins and register memory of kv_buffer_device; both sides' "
        "descriptors must be of the same backend and memory type (nixl_agent.make_prepped_xfer)",
        "nixl worker (backends from kv_connector_extra_config), 0.9+"),
    MustMatch(
        "mamba_state_dtypes", ("spec.prefill.extraArgs", "spec.decode.extraArgs"), _mamba_state_dtypes,
        "not compared by vLLM (no hash factor, and the handshake skips the block-length check of models with Mamba "
        "layers): the decode reads each transferred request's conv and SSM states with its own state sizes at the "
        "prefill's offsets, so states of another dtype arrive as garbage while the request returns 200",
        "nixl worker _build_mamba_remote descriptors and _validate_remote_agent_handshake (0.22.0-0.34.0, "
        "nixl/worker.py then nixl/base_worker.py); model_executor/layers/mamba/mamba_utils.py _mamba_state_dtype",
        rule="mamba-state-dtype-mismatch"),
    MustMatch(
        "speculative_config", ("spec.speculative", "spec.prefill.numSpeculativeTokens",
                               "spec.decode.numSpeculativeTokens"),
        _speculative,
        f"{HASH}: speculative factors for EAGLE-family methods (0.28+: method, draft model and revision); "
        "for hybrid SSM models num_speculative_tokens sets the conv-state rows NIXL assumes equal",
        "nixl/metadata.py _get_speculative_compatibility_factors, 0.28-0.33; MambaStateShapeCalculator",
        rule="spec-decode-mismatch"),
)

#: Rules that report a prefill/decode difference of a :data:`MUST_MATCH` setting beside the entry's own
#: ``rule`` (several rules may guard one setting).
EXTRA_RULES: dict[str, tuple[str, ...]] = {"speculative_config": ("hybrid-spec-tokens-mismatch",),
                                           "attn_backend_name": ("attention-backend-mismatch",),
                                           "nixl_backends": ("cross-layers-blocks-mismatch", "kv-buffer-device-mismatch")}


def entry(name: str) -> MustMatch:
    """The :data:`MUST_MATCH` entry called ``name``; raises ``KeyError`` for an unknown name."""
    for e in MUST_MATCH:
        if e.name == name:
            return e
    raise KeyError(name)


def fields_of(name: str) -> tuple[str, ...]:
    """The PDDeployment fields of the entry ``name`` (for a rule's ``fields``)."""
    return entry(name).fields


def values(spec: PDDeploymentSpec) -> dict[str, Any]:
    """``{entry name: value}`` of every must-match setting of ``spec`` (JSON-able)."""
    return {e.name: e.read(spec) for e in MUST_MATCH}


#: The :data:`MUST_MATCH` entries the compat hash carries even when unset (``None``): those it held when the
#: hash's text was fixed. An entry added later enters the hash only where a spec sets it, so an operator upgrade
#: that adds an entry leaves the hash, the pod template label and so the running pods of every spec that does
#: not use the new setting as they are (no rolling restart of every deployment on upgrade). Never add a name here.
HASHED_WHEN_UNSET = frozenset({
    "vllm_version", "model", "model_revision", "dtype", "model_architecture", "cache_dtype", "kv_cache_layout",
    "ssm_conv_state_layout", "attn_backend_name", "transfer_mode", "is_hma_enabled", "nixl_backends",
    "speculative_config",
})


def compat_hash(spec: PDDeploymentSpec) -> str:
    """Hash of every :data:`MUST_MATCH` setting of ``spec``: 10 hex characters (sha256 of sorted JSON).

    Pods with equal hashes may exchange KV; a setting outside :data:`MUST_MATCH` never changes it, and an entry
    outside :data:`HASHED_WHEN_UNSET` changes it only where the spec sets it.
    """
    text = json.dumps({k: v for k, v in values(spec).items() if v is not None or k in HASHED_WHEN_UNSET},
                      sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def changed(old: PDDeploymentSpec, new: PDDeploymentSpec) -> list[MustMatch]:
    """The :data:`MUST_MATCH` entries whose value differs between ``old`` and ``new`` (in table order)."""
    return [e for e in MUST_MATCH if e.read(old) != e.read(new)]


def _at(doc: dict, path: str) -> Any:
    node: Any = doc
    for part in path.split(".")[1:]:  # drop the leading "spec"
        node = node.get(part) if isinstance(node, dict) else None
    return node


def changed_fields(old: PDDeploymentSpec, new: PDDeploymentSpec) -> list[str]:
    """The fields (dotted camelCase, ``spec.``-prefixed) of the must-match settings that differ between
    ``old`` and ``new``: for each changed entry, those of its fields whose value changed, else its
    shared field (the value changed through a derived fact such as the model's architecture)."""
    old_doc, new_doc = old.wire(), new.wire()
    out: list[str] = []
    for e in changed(old, new):
        paths = [f for f in e.fields if _at(old_doc, f) != _at(new_doc, f)] or [e.field]
        out.extend(p for p in paths if p not in out)
    return out
