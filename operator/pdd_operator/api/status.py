"""The ``PDDeployment`` status, written only by the operator (Kubernetes API conventions)."""

from __future__ import annotations

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
