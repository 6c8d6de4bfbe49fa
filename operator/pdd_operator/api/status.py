"""The ``PDDeployment`` status, written only by the operator (Kubernetes API conventions)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from typing import Literal

from pydantic import Field

from pdd_operator.api.base import APIModel

#: The condition types the operator writes, in the order it writes them (README, "Status").
#: ``Reconciling`` and ``Stalled`` are the abnormal-true conditions of kstatus
#: (sigs.k8s.io/cli-utils ``pkg/kstatus/status``: ``Reconciling=True`` reads InProgress,
#: ``Stalled=True`` reads Failed); GitOps health checks read these names.
CONDITION_TYPES = ("Ready", "Reconciling", "Stalled", "Progressing", "Degraded", "Compatible", "KVTransportReady")


class Condition(APIModel):
    """A condition as in the Kubernetes API conventions (``metav1.Condition``)."""

    type: str = Field(description="Ready, Reconciling, Stalled, Progressing, Degraded, Compatible or "
                      "KVTransportReady.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(description="CamelCase reason for the last transition.")
    message: str = Field("", description="Human-readable details.")
    last_transition_time: str = Field(description="RFC 3339 time the status last changed.")
    observed_generation: int | None = Field(None, description="Generation the condition was computed for.")


class Finding(APIModel):
    """One compatibility finding: a rule that fired for this spec and vLLM version."""

    rule: str = Field(description="Stable rule id, e.g. `tp-divisibility`.")
    severity: Literal["error", "warning"] = Field(description="error: refused; warning: allowed, with a note.")
    fields: list[str] = Field(default_factory=list, description="Spec fields the rule looked at.")
    message: str = Field(description="What is wrong.")
    fix: str = Field("", description="How to fix it.")
    source: str = Field("", description="Where the rule comes from (seed section, vLLM file and versions).")


class RoleStatus(APIModel):
    """Observed replicas of one role, from its Deployment."""

    replicas: int = Field(0, description="Desired pods.")
    ready_replicas: int = Field(0, description="Pods whose vLLM server answers /health.")
    updated_replicas: int = Field(0, description="Pods on the current pod template.")
    ready: str = Field("0/0", description="readyReplicas/replicas, for `kubectl get`.")


class AppliedSpec(APIModel):
    """The spec the children were last rendered from (the last compatible one), kept once, compactly.

    The operator restores deleted children and reverts drift from it while the current spec is
    refused. ``data`` is :func:`encode_spec` of the spec; ``sha256`` its digest, which
    :func:`decode_spec` checks.
    """

    generation: int = Field(description="Generation of the PDDeployment the spec is from.")
    sha256: str = Field(description="SHA-256 (hex) of the spec as canonical JSON.")
    data: str = Field(description="The spec as canonical JSON, gzip-compressed, base64-encoded.")


def spec_json(spec_wire: dict) -> bytes:
    """Canonical JSON of a spec (sorted keys, no spaces, UTF-8): what :class:`AppliedSpec` hashes."""
    return json.dumps(spec_wire, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def encode_spec(spec_wire: dict, generation: int) -> dict:
    """An :class:`AppliedSpec` (camelCase dict) for ``spec_wire`` (a spec as the API writes it).

    Deterministic (gzip ``mtime=0``), so an unchanged spec gives an unchanged status.
    """
    raw = spec_json(spec_wire)
    data = base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")
    return {"generation": generation, "sha256": hashlib.sha256(raw).hexdigest(), "data": data}


def decode_spec(applied: dict) -> dict:
    """The spec (a dict) kept in an :class:`AppliedSpec`. Raises ``ValueError`` when ``applied`` is
    malformed, cannot be decompressed, or its digest does not match."""
    try:
        raw = gzip.decompress(base64.b64decode(applied["data"], validate=True))
        digest = applied["sha256"]
    except (KeyError, TypeError, OSError, EOFError, ValueError) as exc:
        raise ValueError(f"status.appliedSpec cannot be decoded: {exc}") from exc
    if hashlib.sha256(raw).hexdigest() != digest:
        raise ValueError("status.appliedSpec does not match its sha256")
    spec = json.loads(raw)
    if not isinstance(spec, dict):
        raise ValueError("status.appliedSpec is not a JSON object")
    return spec


class PDDeploymentStatus(APIModel):
    """Observed state of a PDDeployment."""

    observed_generation: int | None = Field(None, description="Generation the operator last processed.")
    applied_generation: int | None = Field(
        None, description="Generation the running children were rendered from (the last compatible spec)."
    )
    vllm_version: str | None = Field(None, description="vLLM version the rules were evaluated for.")
    prefill: RoleStatus = Field(default_factory=RoleStatus, description="Prefill replicas.")
    decode: RoleStatus = Field(default_factory=RoleStatus, description="Decode replicas.")
    compatibility: list[Finding] = Field(default_factory=list, description="Compatibility findings.")
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Reconciling, Stalled, Progressing, Degraded, Compatible and (with the preflight) "
        "KVTransportReady.",
    )
    endpoint: str | None = Field(
        None, description="URL of the deployment's OpenAI-compatible endpoint (the router's Service), e.g. "
        "`http://<name>-router.<namespace>.svc:8000`.",
    )
    applied_spec: AppliedSpec | None = Field(
        None, description="The last compatible spec, from which the children were rendered (compressed); the "
        "operator restores deleted children from it while the current spec is refused.",
    )
