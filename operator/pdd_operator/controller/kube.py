"""The operator's Kubernetes access: reads, server-side apply of children, status patches.

All writes go through :class:`Kube` so they can be counted and so a no-op never reaches the
apiserver: :meth:`Kube.apply` skips an object whose live state already holds everything we would
apply (same applied hash, and every desired field present with the same value).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from pdd_operator.api.constants import FIELD_MANAGER, GROUP, PLURAL, VERSION
from pdd_operator.controller.rbac import AccessCheck

log = logging.getLogger(__name__)

#: Annotation on each child: hash of the object as the operator last applied it.
ANNOTATION_APPLIED_HASH = f"{GROUP}/applied-hash"


def load_config() -> client.ApiClient:
    """Return an API client from the in-cluster service account, else the current kubeconfig."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


def applied_hash(obj: dict) -> str:
    """Stable hash of an object as rendered (16 hex characters)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def _same_scalar(want: Any, have: Any) -> bool:
    if isinstance(want, bool) or isinstance(have, bool):
        return want is have
    return want == have or str(want) == str(have)


def contains(live: Any, desired: Any) -> bool:
    """True when every field of ``desired`` is in ``live`` with an equal value.

    Lists must have equal length and match element by element; scalars compare equal when their
    string forms do (``16`` and ``"16"`` are the same quantity). Fields the apiserver defaulted into
    ``live`` are ignored.
    """
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(k in live and contains(live[k], v) for k, v in desired.items())
    if isinstance(desired, list):
        return isinstance(live, list) and len(live) == len(desired) and all(
            contains(a, b) for a, b in zip(live, desired, strict=True)
        )
    return _same_scalar(desired, live)


class Kube:
    """Thin wrapper over the kubernetes client for the calls the operator makes.

    ``writes`` counts the write requests this instance sent (tests and logs use it).
    """

    def __init__(self, api_client: client.ApiClient | None = None) -> None:
        self.api_client = api_client or load_config()
        self.apps = client.AppsV1Api(self.api_client)
        self.core = client.CoreV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)
        self.rbac = client.RbacAuthorizationV1Api(self.api_client)
        # The kinds of child objects: how to read one and how to server-side apply one.
        self._read = {
            "Deployment": self.apps.read_namespaced_deployment,
            "Service": self.core.read_namespaced_service,
            "ServiceAccount": self.core.read_namespaced_service_account,
            "Role": self.rbac.read_namespaced_role,
            "RoleBinding": self.rbac.read_namespaced_role_binding,
        }
        self._patch = {
            "Deployment": self.apps.patch_namespaced_deployment,
            "Service": self.core.patch_namespaced_service,
            "ServiceAccount": self.core.patch_namespaced_service_account,
            "Role": self.rbac.patch_namespaced_role,
            "RoleBinding": self.rbac.patch_namespaced_role_binding,
        }
        self.writes = 0

    # --- reads -------------------------------------------------------------------------------

    def get_pdd(self, namespace: str, name: str) -> dict | None:
        """Return the PDDeployment as a dict, or ``None`` if it does not exist."""
        try:
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def list_pdds(self, namespaces: Sequence[str] = ()) -> list[dict]:
        """Every PDDeployment in ``namespaces`` (one list per namespace), or in the cluster when empty.

        A namespaced operator may list only in its namespaces: its Roles grant nothing cluster-wide.
        """
        if not namespaces:
            return self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL).get("items", [])
        return [item for ns in namespaces
                for item in self.custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL).get("items", [])]

    def missing_access(self, checks: Sequence[AccessCheck]) -> list[AccessCheck]:
        """The ``checks`` the apiserver denies this client's identity (one SelfSubjectAccessReview each).

        Raises ``ApiException`` when a review itself fails (every authenticated user may create them:
        the ``system:basic-user`` ClusterRole).
        """
        authz = client.AuthorizationV1Api(self.api_client)
        missing = []
        for c in checks:
            resource, _, subresource = c.resource.partition("/")
            attrs = {"group": c.group, "resource": resource, "verb": c.verb}
            if subresource:
                attrs["subresource"] = subresource
            if c.namespace:
                attrs["namespace"] = c.namespace
            if c.name:
                attrs["name"] = c.name
            review = authz.create_self_subject_access_review({"spec": {"resourceAttributes": attrs}})
            if not review.status.allowed:
                missing.append(c)
        return missing

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        """Return a child (``Deployment``, ``Service``, ``ServiceAccount``, ``Role``, ``RoleBinding``) as a
        camelCase dict, or ``None``. Raises ``ValueError`` for another kind."""
        if kind not in self._read:
            raise ValueError(f"unsupported kind {kind}")
        try:
            obj = self._read[kind](name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return self.api_client.sanitize_for_serialization(obj)

    def config_map_value(self, namespace: str, name: str, key: str) -> str | None:
        """The value of one key of a ConfigMap, or ``None`` when the ConfigMap or key is missing."""
        try:
            cm = self.core.read_namespaced_config_map(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return (cm.data or {}).get(key)

    def list_pods(self, namespace: str, selector: dict[str, str]) -> list[dict]:
        """Pods matching the label selector, as camelCase dicts."""
        label_selector = ",".join(f"{k}={v}" for k, v in selector.items())
        pods = self.core.list_namespaced_pod(namespace, label_selector=label_selector).items
        return [self.api_client.sanitize_for_serialization(p) for p in pods]

    # --- writes ------------------------------------------------------------------------------

    def apply(self, desired: dict) -> bool:
        """Server-side apply ``desired`` under the operator's field manager unless already in place.

        Returns True when a request was sent. Conflicts with other managers are forced: the operator
        owns its children's rendered fields (a hand edit of them is reverted).
        """
        kind, meta = desired["kind"], desired["metadata"]
        if kind not in self._patch:
            raise ValueError(f"unsupported kind {kind}")
        digest = applied_hash(desired)
        body = {**desired, "metadata": {**meta, "annotations": {**meta.get("annotations", {}),
                                                                ANNOTATION_APPLIED_HASH: digest}}}
        live = self.get(kind, meta["namespace"], meta["name"])
        if live is not None and contains(live, body):
            return False
        kwargs = {"field_manager": FIELD_MANAGER, "force": True, "_content_type": "application/apply-patch+yaml"}
        self._patch[kind](meta["name"], meta["namespace"], body, **kwargs)
        self.writes += 1
        log.info("applied %s %s/%s", kind, meta["namespace"], meta["name"])
        return True

    def patch_status(self, namespace: str, name: str, status: dict, resource_version: str | None) -> None:
        """Replace the PDDeployment's status (merge patch of the status subresource).

        Keys that the previous status had and ``status`` lacks are removed with explicit nulls. With
        ``resource_version`` the patch fails with 409 if the object changed since it was read.
        """
        body: dict = {"status": status}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, body, _content_type="application/merge-patch+json"
        )
        self.writes += 1
