"""The webhook's CA and serving certificate, kept in a Secret (``pdd run --webhook-cert-secret``).

Why a Secret: certificates generated into a pod's emptyDir change with every restart (a new CA, so
``caBundle`` flaps and admission fails until it is patched again), and two replicas would each
overwrite the other's ``caBundle``. With the Secret every replica serves the same certificate and the
CA never changes:

- the Helm chart creates the Secret empty; the operator fills it, only when something is missing or
  due (:func:`pdd_operator.controller.tls.plan_certificates`): the CA once, the serving certificate
  again before it expires, under the same CA;
- writes are ``update`` with the ``resourceVersion`` read, so of two replicas starting at once one
  wins and the other (409 Conflict) re-reads and uses the winner's certificates;
- every replica copies the Secret's serving files to its local certificate directory, which kopf's
  webhook server re-reads (within 60 s) when they change;
- the expiry of both certificates is exported as ``pdd_webhook_certificate_expiry_timestamp_seconds``.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pdd_operator.api.constants import FIELD_MANAGER
from pdd_operator.controller import tls
from pdd_operator.controller.metrics import WEBHOOK_CERT_EXPIRY

log = logging.getLogger(__name__)

#: How often :func:`sync` is tried when a write conflicts with another replica's.
ATTEMPTS = 3


class SecretMissing(Exception):
    """The webhook Secret does not exist (the chart creates it; the operator may not)."""


@dataclass(frozen=True)
class SecretRef:
    """The Secret ``namespace/name`` that holds the certificates for ``hosts`` (SANs)."""

    namespace: str
    name: str
    hosts: tuple[str, ...]


class Secrets:
    """Reads and replaces one namespace's Secrets as dicts (:func:`~pdd_operator.kubeclient.request`;
    not the generated ``CoreV1Api``, whose import alone takes 22 MB of the operator's RSS).
    ``api_client``: a ``kubernetes.client.ApiClient`` (:func:`~pdd_operator.kubeclient.load_config`)."""

    PATH = "/api/v1/namespaces/{namespace}/secrets/{name}"

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def read(self, namespace: str, name: str) -> dict:
        """The Secret. Raises ``ApiException`` (404 when absent)."""
        from pdd_operator.kubeclient import request

        return request(self.api_client, "GET", self.PATH, path_params={"namespace": namespace, "name": name})

    def replace(self, namespace: str, name: str, body: dict) -> dict:
        """``PUT`` ``body`` under the operator's field manager. Raises ``ApiException`` (409 when its
        ``metadata.resourceVersion`` is not the stored one)."""
        from pdd_operator.kubeclient import request

        return request(self.api_client, "PUT", self.PATH, path_params={"namespace": namespace, "name": name},
                       query=[("fieldManager", FIELD_MANAGER)],
                       body={"apiVersion": "v1", "kind": "Secret", **body})


def _decode(secret: dict) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items() if k in tls.SECRET_KEYS}


def _record_expiry(data: dict[str, bytes]) -> None:
    for label, key in (("ca", tls.CA_FILE), ("serving", tls.CERT_FILE)):
        cert = tls.x509.load_pem_x509_certificate(data[key])
        WEBHOOK_CERT_EXPIRY.labels(certificate=label).set(cert.not_valid_after_utc.timestamp())


def sync(secrets: Secrets, ref: SecretRef, cert_dir: Path, *, now: datetime | None = None,
         serving_days: int = tls.SERVING_DAYS) -> tuple[tls.ServingFiles, list[str]]:
    """Bring the Secret up to date (:func:`~pdd_operator.controller.tls.plan_certificates`), then write
    its serving files into ``cert_dir``. Returns the files and the changes written (empty: none).

    ``secrets``: a :class:`Secrets` (or anything with its ``read`` and ``replace``). Raises
    :class:`SecretMissing` when the Secret is absent,
    ``ApiException`` for other API errors (a 409 is retried :data:`ATTEMPTS` times, re-reading each time).
    """
    from kubernetes.client.exceptions import ApiException

    for attempt in range(ATTEMPTS):
        try:
            secret = secrets.read(ref.namespace, ref.name)
        except ApiException as exc:
            if exc.status == 404:
                raise SecretMissing(
                    f"Secret {ref.namespace}/{ref.name} for the webhook's certificates does not exist; the Helm "
                    f"chart creates it (templates/certificates.yaml). Fix: install or upgrade the chart, or create "
                    f"an empty Secret: kubectl -n {ref.namespace} create secret generic {ref.name}") from exc
            raise
        have = _decode(secret)
        want, changes = tls.plan_certificates(have, ref.hosts, now=now, serving_days=serving_days)
        if changes:
            meta = secret.get("metadata") or {}
            body = {"metadata": {"name": ref.name, "namespace": ref.namespace,
                                 "resourceVersion": meta.get("resourceVersion"),
                                 "labels": meta.get("labels"), "annotations": meta.get("annotations")},
                    "type": secret.get("type") or "Opaque",
                    "data": {**(secret.get("data") or {}),
                             **{k: base64.b64encode(v).decode() for k, v in want.items()}}}
            try:
                secrets.replace(ref.namespace, ref.name, body)
            except ApiException as exc:
                if exc.status == 409 and attempt + 1 < ATTEMPTS:
                    log.info("webhook: Secret %s/%s changed meanwhile (another replica); reading it again",
                             ref.namespace, ref.name)
                    continue
                raise
            log.info("webhook: Secret %s/%s: %s", ref.namespace, ref.name, "; ".join(changes))
        files = tls.write_serving_files(cert_dir, want)
        _record_expiry(want)
        return files, changes
    raise AssertionError("unreachable")  # the last attempt returns or raises


def hosts_of(host: str, extra: Sequence[str] = ()) -> tuple[str, ...]:
    """The SANs: the host the apiserver dials, then any others, without repeats."""
    return tuple(dict.fromkeys([host, *extra]))
