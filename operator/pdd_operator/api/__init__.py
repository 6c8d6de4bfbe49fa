"""The ``PDDeployment`` API (group ``pdd-operator.dev``, version ``v1alpha1``)."""

from pdd_operator.api.constants import API_VERSION, GROUP, KIND, PLURAL, SHORT_NAME, SINGULAR, VERSION
from pdd_operator.api.spec import (
    Architecture,
    Connector,
    PDDeploymentSpec,
    RoleSpec,
    SSMKind,
)
from pdd_operator.api.status import Condition, Finding, PDDeploymentStatus, RoleStatus

__all__ = [
    "API_VERSION", "GROUP", "KIND", "PLURAL", "SHORT_NAME", "SINGULAR", "VERSION",
    "Architecture", "Connector", "PDDeploymentSpec", "RoleSpec", "SSMKind",
    "Condition", "Finding", "PDDeploymentStatus", "RoleStatus",
]
