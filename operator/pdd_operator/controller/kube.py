"""The operator's Kubernetes access: reads, server-side apply of children, status patches.

With a :class:`~pdd_operator.controller.cache.ClusterCache` (``pdd run``), the reads of a reconcile
come from the watch-fed caches once they are filled, and every write's answer is remembered there until
the watch delivers it; without one (tools, tests) every read goes to the apiserver. Either way the
interface is the same. Each request sent is counted in ``pdd_api_requests_total``.

All writes go through :class:`Kube` so they can be counted and so a no-op never reaches the
apiserver: :meth:`Kube.apply` skips an object whose live state already holds everything we would
apply (same applied hash, and every desired field present with the same value).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pdd_operator.api.constants import ANNOTATION_GENERATION, FIELD_MANAGER, GROUP, KIND, PLURAL, VERSION
from pdd_operator.controller.cache import ClusterCache
from pdd_operator.controller.metrics import API_REQUEST_DURATION, API_REQUESTS, CACHE_MISSES
from pdd_operator.controller.rbac import AccessCheck
from pdd_operator.kubeclient import load_config, request

log = logging.getLogger(__name__)

#: Children whose last in-place comparison :meth:`Kube.apply_needed` remembers (about 100 bytes each;
#: 9 per PDDeployment, so 16,384 hold every child of 1,800 objects).
IN_PLACE_MEMO_SIZE = 16_384

#: Annotation on each child: hash of the object as the operator last applied it.
ANNOTATION_APPLIED_HASH = f"{GROUP}/applied-hash"


def applied_hash(obj: dict) -> str:
    """Stable hash of an object as rendered (16 hex characters): SHA-256 of its JSON with sorted keys,
    serialized by orjson (8x faster than the standard library on a rendered engine Deployment; every
    reconcile hashes each child once). An object orjson refuses (an integer wider than 64 bits) is
    serialized by the standard library instead, the same way every time."""
    try:
        text = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return legacy_applied_hash(obj)
    return hashlib.sha256(text).hexdigest()[:16]


def legacy_applied_hash(obj: dict) -> str:
    """The applied hash that operators before 2026-12-06 wrote (SHA-256 of the standard library's JSON
    with sorted keys, 16 hex characters): a child that still carries it is in place when the rest of
    it is (:meth:`Kube.apply_needed`), so an upgrade does not rewrite every child's annotation."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


_SURROGATE_PAIR = re.compile(r"(?<!\\)((?:\\\\)*)\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})")


def apply_body(obj: dict) -> bytes:
    """``obj`` as the body of a server-side apply (``application/apply-patch+yaml``): JSON, which is YAML.

    Python's JSON encoder writes a character outside the Basic Multilingual Plane (an emoji) as a
    UTF-16 surrogate pair of escapes (``\\ud83d\\ude00``); the apiserver's YAML decoder refuses
    escaped surrogates ("found invalid Unicode character escape code") and the apply fails with 400.
    Such pairs are written as the UTF-8 character itself; every other escape is valid YAML.
    """
    text = json.dumps(obj, separators=(",", ":"))
    if "\\ud" not in text:
        return text.encode()  # no surrogate escape: nothing to rewrite (the common case, and 8x faster)

    def join(m: re.Match) -> str:
        high, low = int(m[2], 16), int(m[3], 16)
        return m[1] + chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))

    return _SURROGATE_PAIR.sub(join, text).encode()


def _same_scalar(want: Any, have: Any) -> bool:
    if isinstance(want, bool) or isinstance(have, bool):
        return want is have
    return want == have or str(want) == str(have)


#: Lists that server-side apply merges item by item (``listType=map`` in the Kubernetes OpenAPI, by
#: these keys), by the field name that holds them. Other managers may add items of their own (an env
#: var injected by a mutating webhook, a sidecar); the operator owns only the items it applies.
MAP_LIST_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",), "initContainers": ("name",), "env": ("name",), "volumes": ("name",),
    "volumeMounts": ("mountPath",), "imagePullSecrets": ("name",), "resourceClaims": ("name",),
    "ownerReferences": ("uid",),
}
#: ``ports`` is keyed by ``containerPort`` in a container and by ``port`` in a Service (with ``protocol``).
PORT_KEYS = (("containerPort", "protocol"), ("port", "protocol"))


def _list_key(field: str | None, items: list) -> tuple[str, ...] | None:
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    candidates = [MAP_LIST_KEYS[field]] if field in MAP_LIST_KEYS else list(PORT_KEYS) if field == "ports" else []
    for key in candidates:
        if all(key[0] in i for i in items):
            return key
    return None


def _key_of(item: dict, key: tuple[str, ...]) -> tuple:
    # ``protocol`` defaults to TCP: a desired item without it matches the defaulted live one.
    return tuple(str(item.get(k, "TCP" if k == "protocol" else None)) for k in key)


def contains(live: Any, desired: Any, field: str | None = None) -> bool:
    """True when every field of ``desired`` is in ``live`` with an equal value: the operator's intent
    is in place, whatever other field managers added.

    Map lists (:data:`MAP_LIST_KEYS`, ``ports``) match item by item by their keys, and items only in
    ``live`` (another manager's) are ignored, as server-side apply keeps them. Other lists are
    atomic: equal length, element by element. Scalars compare equal when their string forms do
    (``16`` and ``"16"`` are the same quantity). Fields the apiserver defaulted into ``live`` are ignored.
    """
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(k in live and contains(live[k], v, k) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(live, list):
            return False
        key = _list_key(field, desired)
        if key is not None and _list_key(field, live) == key:
            by_key = {_key_of(i, key): i for i in live}
            return all(_key_of(d, key) in by_key and contains(by_key[_key_of(d, key)], d) for d in desired)
        return len(live) == len(desired) and all(contains(a, b) for a, b in zip(live, desired, strict=True))
    return _same_scalar(desired, live)


def foreign_items(live: dict, desired: dict, path: tuple[str, ...]) -> list:
    """Items of the map list at ``path`` (e.g. ``("spec", "ports")``) in ``live`` whose keys ``desired``
    does not have: what another field manager added (or left behind by editing a key)."""
    def at(obj: dict) -> list:
        for part in path:
            obj = (obj or {}).get(part) or {}
        return obj if isinstance(obj, list) else []

    want, have = at(desired), at(live)
    key = _list_key(path[-1], want)
    if key is None:
        return []
    wanted = {_key_of(i, key) for i in want}
    return [i for i in have if isinstance(i, dict) and _key_of(i, key) not in wanted]


#: Annotations that say where a child came from (the PDDeployment generation it was rendered at) and
#: alone never make a write: a child whose other fields are in place keeps its stamp, so a change of
#: one field of the spec applies only the children that field changes (:func:`restamped`).
STAMP_ANNOTATIONS = (ANNOTATION_GENERATION,)


def restamped(desired: dict, live: dict | None) -> dict:
    """``desired`` with the :data:`STAMP_ANNOTATIONS` values that ``live`` carries (a new top-level and
    metadata dict; ``desired`` is not changed). A stamp that ``live`` lacks is kept as desired; when
    every stamp is already as ``live`` has it, ``desired`` itself is returned (its hash still holds)."""
    have = ((live or {}).get("metadata") or {}).get("annotations") or {}
    meta = desired["metadata"]
    mine = meta.get("annotations") or {}
    kept = {k: have[k] for k in STAMP_ANNOTATIONS if k in mine and k in have and have[k] != mine[k]}
    if not kept:
        return desired
    return {**desired, "metadata": {**meta, "annotations": {**mine, **kept}}}


def with_applied_hash(desired: dict, digest: str | None = None) -> dict:
    """``desired`` with :data:`ANNOTATION_APPLIED_HASH` set to :func:`applied_hash` of ``desired``
    (``digest``, when the caller has computed it already: hashing is most of a no-op reconcile's CPU)."""
    meta = desired["metadata"]
    return {**desired, "metadata": {**meta, "annotations": {
        **meta.get("annotations", {}), ANNOTATION_APPLIED_HASH: digest or applied_hash(desired)}}}


def _in_place_hash(live: dict, desired: dict, digest: str) -> str:
    """The applied hash ``live`` must carry for ``desired`` to be in place: ``digest``
    (:func:`applied_hash` of ``desired``), or the :func:`legacy_applied_hash` of ``desired`` when that
    is what ``live`` carries (applied by an earlier operator and unchanged since)."""
    have = ((live.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_APPLIED_HASH)
    if have and have != digest and have == legacy_applied_hash(desired):
        return have
    return digest


def _same_controller(live: dict, desired: dict) -> bool:
    """True when ``live`` already has ``desired``'s controller ownerReference (uid): an object this
    operator created for this owner, not one of the same name that someone else made."""
    want = {r.get("uid") for r in desired["metadata"].get("ownerReferences") or [] if r.get("controller")}
    have = {r.get("uid") for r in (live.get("metadata") or {}).get("ownerReferences") or [] if r.get("controller")}
    return bool(want) and want <= have


#: Map lists of a child that only the operator may fill: foreign items are removed before applying.
#: A Service port edited by hand is such an item (editing ``port`` changes the key, so server-side
#: apply would keep it next to the operator's and the apiserver refuses the duplicate port name).
EXCLUSIVE_LISTS: dict[str, tuple[str, ...]] = {"Service": ("spec", "ports")}
#: Maps of a child that must equal the operator's exactly: a Service's ``selector`` (atomic in
#: server-side apply, ``+mapType=atomic``): a key another manager adds narrows it, and the Service
#: then selects no engine pod at all.
EXACT_MAPS: dict[str, tuple[str, ...]] = {"Service": ("spec", "selector")}


def _at(obj: dict, path: tuple[str, ...]):
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def foreign_drift(kind: str, live: dict, desired: dict) -> list:
    """What other managers added to a child that :func:`contains` tolerates but the operator must take
    back: items of its :data:`EXCLUSIVE_LISTS` list the operator does not render, and an
    :data:`EXACT_MAPS` map that is not exactly the rendered one (as ``[(path, live value)]``)."""
    drift: list = []
    if (exclusive := EXCLUSIVE_LISTS.get(kind)) is not None:
        drift += foreign_items(live, desired, exclusive)
    if (exact := EXACT_MAPS.get(kind)) is not None and _at(desired, exact) is not None \
            and _at(live, exact) != _at(desired, exact):
        drift.append((".".join(exact), _at(live, exact)))
    return drift


#: REST paths of the child kinds, for server-side apply (:meth:`Kube._server_side_apply`).
_RESOURCE_PATHS = {
    "Deployment": "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
    "Service": "/api/v1/namespaces/{namespace}/services/{name}",
    "ServiceAccount": "/api/v1/namespaces/{namespace}/serviceaccounts/{name}",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/{name}",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings/{name}",
}


#: Collection paths of the kinds the resync lists by metadata (:meth:`Kube.list_metadata`).
_COLLECTION_PATHS = {
    KIND: f"/apis/{GROUP}/{VERSION}", "Deployment": "/apis/apps/v1", "Service": "/api/v1",
    "ServiceAccount": "/api/v1", "Pod": "/api/v1", "Role": "/apis/rbac.authorization.k8s.io/v1",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1", "ConfigMap": "/api/v1",
}
#: The path of one PDDeployment, and of one object of the other kinds the operator reads without a cache.
_PDD_PATH = f"/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/{PLURAL}/{{name}}"
_CONFIG_MAP_PATH = "/api/v1/namespaces/{namespace}/configmaps/{name}"
_PLURALS = {KIND: PLURAL, "Deployment": "deployments", "Service": "services", "ServiceAccount": "serviceaccounts",
            "Pod": "pods", "Role": "roles", "RoleBinding": "rolebindings", "ConfigMap": "configmaps"}
#: Ask for PartialObjectMetadataList: names and resourceVersions without specs (a tenth of the bytes).
_METADATA_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


def api_error_text(exc: ApiException) -> str:
    """``<code> <reason>: <the apiserver's message>`` of an API error (the message of its Status body)."""
    message = ""
    try:
        body = json.loads(exc.body) if exc.body else {}
        message = body.get("message", "") if isinstance(body, dict) else ""
    except (ValueError, TypeError):
        message = str(exc.body or "")[:500]
    return f"{exc.status} {exc.reason}" + (f": {message}" if message else "")


class Kube:
    """Thin wrapper over the kubernetes client for the calls the operator makes.

    ``api_client``: by default :func:`~pdd_operator.kubeclient.load_config`'s, whose every request
    has a (connect, read) timeout (a dead connection raises a transient urllib3 error, never hangs).
    ``writes`` counts the write requests this instance sent (tests and logs use it). ``cache``: read
    from it once it is ready (see the module docstring).
    """

    def __init__(self, api_client: client.ApiClient | None = None, cache: ClusterCache | None = None) -> None:
        self.api_client = api_client or load_config()
        self.cache = cache
        self.writes = 0
        self._writes_lock = threading.Lock()
        # (kind, namespace, name) -> (resourceVersion, applied_hash of desired) last found in place.
        self._in_place: OrderedDict[tuple[str, str, str], tuple[str, str]] = OrderedDict()
        self._in_place_lock = threading.Lock()

    def _request(self, method: str, path: str, **kwargs) -> Any:
        """:func:`~pdd_operator.kubeclient.request` with this instance's client (no typed API classes)."""
        return request(self.api_client, method, path, **kwargs)

    def _get_or_none(self, path: str, namespace: str, name: str) -> dict | None:
        """The object at ``path`` (with ``{namespace}`` and ``{name}``), or None for a 404."""
        try:
            return self._request("GET", path, path_params={"namespace": namespace, "name": name})
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _cached(self) -> ClusterCache | None:
        return self.cache if self.cache is not None and self.cache.ready.is_set() else None

    def epoch(self, namespace: str, name: str) -> tuple | None:
        """The change epoch of a PDDeployment's cached inputs
        (:meth:`~pdd_operator.controller.cache.ClusterCache.epoch`), ``None`` without a ready cache (reads
        then go to the apiserver, and no epoch says what they would return)."""
        cache = self._cached()
        return None if cache is None else cache.epoch(namespace, name)

    # --- reads -------------------------------------------------------------------------------

    def get_pdd(self, namespace: str, name: str) -> dict | None:
        """Return the PDDeployment as a dict, or ``None`` if it does not exist."""
        if (cache := self._cached()) is not None:
            return cache.pdd(namespace, name)
        API_REQUESTS.labels("get", KIND).inc()
        return self._get_or_none(_PDD_PATH, namespace, name)

    def list_pdds(self, namespaces: Sequence[str] = ()) -> list[dict]:
        """Every PDDeployment in ``namespaces`` (one list per namespace), or in the cluster when empty.

        A namespaced operator may list only in its namespaces: its Roles grant nothing cluster-wide.
        """
        API_REQUESTS.labels("list", KIND).inc(max(1, len(namespaces)))
        paths = [f"{_COLLECTION_PATHS[KIND]}/namespaces/{ns}/{PLURAL}" for ns in namespaces] or [
            f"{_COLLECTION_PATHS[KIND]}/{PLURAL}"]
        return [item for path in paths for item in self._request("GET", path).get("items") or []]

    def list_metadata(self, kind: str, namespaces: Sequence[str] = (), label_selector: str | None = None,
                      chunk: int = 1000) -> tuple[dict[tuple[str, str], str], int | None]:
        """Metadata of every ``kind`` object (:data:`_COLLECTION_PATHS`) in ``namespaces`` (all when
        empty) matching ``label_selector``, in chunks of ``chunk``: ``({(namespace, name):
        resourceVersion}, the oldest list resourceVersion as an integer, or None when not an integer)``.
        Raises ``ApiException`` for a non-2xx answer."""
        items: dict[tuple[str, str], str] = {}
        versions: list[int | None] = []
        for ns in namespaces or (None,):
            path = _COLLECTION_PATHS[kind] + (f"/namespaces/{ns}" if ns else "") + f"/{_PLURALS[kind]}"
            token = None
            while True:
                query = [("limit", str(chunk))] + ([("labelSelector", label_selector)] if label_selector else [])
                query += [("continue", token)] if token else []
                API_REQUESTS.labels("list", kind).inc()
                listing = self._request("GET", path, query=query, accept=_METADATA_ACCEPT)
                for item in listing.get("items") or []:
                    meta = item.get("metadata") or {}
                    items[(meta.get("namespace"), meta.get("name"))] = meta.get("resourceVersion")
                list_meta = listing.get("metadata") or {}
                token = list_meta.get("continue")
                if not token:
                    try:
                        versions.append(int(list_meta.get("resourceVersion")))
                    except (TypeError, ValueError):
                        versions.append(None)
                    break
        oldest = None if None in versions or not versions else min(versions)
        return items, oldest

    def ready(self, timeout: float) -> bool:
        """Whether the apiserver answers ``GET /readyz`` with 200 on a new connection within ``timeout``
        seconds: False when it cannot be reached, does not answer, or is not ready (etcd away: 500)."""
        conf = copy.copy(self.api_client.configuration)
        conf.retries = False  # one attempt: ``timeout`` is the whole wait
        fresh = client.ApiClient(conf)  # its own pool: no pooled connection that may be stuck
        try:
            method, url, headers, body, post = fresh.param_serialize(
                method="GET", resource_path="/readyz", auth_settings=["BearerToken"])
            response = fresh.call_api(method, url, header_params=headers, body=body, post_params=post,
                                      _request_timeout=timeout)
            response.read()
        except (urllib3.exceptions.HTTPError, OSError):
            return False
        finally:
            fresh.close()
        return response.status == 200

    def missing_access(self, checks: Sequence[AccessCheck]) -> list[AccessCheck]:
        """The ``checks`` the apiserver denies this client's identity (one SelfSubjectAccessReview each).

        Raises ``ApiException`` when a review itself fails (every authenticated user may create them:
        the ``system:basic-user`` ClusterRole).
        """
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
            review = self._request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                                   body={"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                                         "spec": {"resourceAttributes": attrs}})
            if not (review.get("status") or {}).get("allowed"):
                missing.append(c)
        return missing

    def get(self, kind: str, namespace: str, name: str) -> dict | None:
        """Return a child (``Deployment``, ``Service``, ``ServiceAccount``, ``Role``, ``RoleBinding``) as a
        camelCase dict, or ``None``. Raises ``ValueError`` for another kind."""
        if kind not in _RESOURCE_PATHS:
            raise ValueError(f"unsupported kind {kind}")
        if (cache := self._cached()) is not None:
            return cache.child(kind, namespace, name)
        API_REQUESTS.labels("get", kind).inc()
        return self._get_or_none(_RESOURCE_PATHS[kind], namespace, name)

    def config_map_value(self, namespace: str, name: str, key: str) -> str | None:
        """The value of one key of a ConfigMap, or ``None`` when the ConfigMap or key is missing.

        From the cache when it knows the ConfigMap; else read (and remembered in the cache)."""
        cache = self._cached()
        if cache is not None:
            known, obj = cache.config_map(namespace, name)
            if known:
                return None if obj is None else ((obj.get("data") or {}).get(key))
            CACHE_MISSES.labels("ConfigMap").inc()
        API_REQUESTS.labels("get", "ConfigMap").inc()
        cm = self._get_or_none(_CONFIG_MAP_PATH, namespace, name)
        if cm is None:
            if cache is not None:
                cache.remember_absent("ConfigMap", namespace, name)
            return None
        if cache is not None:
            cache.remember("ConfigMap", cm)
        return (cm.get("data") or {}).get(key)

    def list_pods(self, namespace: str, selector: dict[str, str]) -> list[dict]:
        """Pods matching the label selector, as camelCase dicts (from the cache: it must hold the
        instance label)."""
        if (cache := self._cached()) is not None:
            return cache.pods(namespace, selector)
        API_REQUESTS.labels("list", "Pod").inc()
        label_selector = ",".join(f"{k}={v}" for k, v in selector.items())
        return self._request("GET", "/api/v1/namespaces/{namespace}/pods", path_params={"namespace": namespace},
                             query=[("labelSelector", label_selector)]).get("items") or []

    # --- writes ------------------------------------------------------------------------------

    def apply(self, desired: dict) -> bool:
        """Server-side apply ``desired`` under the operator's field manager unless already in place
        (:meth:`apply_needed`, then :meth:`send_apply`). Returns True when a request was sent."""
        digest = applied_hash(desired)
        needed, live = self.apply_needed(desired, digest)
        if not needed:
            return False
        self.send_apply(desired, live, digest)
        return True

    def apply_needed(self, desired: dict, digest: str | None = None) -> tuple[bool, dict | None]:
        """``(whether desired must be applied, the live object or None)``; reads only the cache (or one
        GET without a cache). ``digest``: :func:`applied_hash` of ``desired`` if the caller has it
        (computed here otherwise). Raises ``ValueError`` for a kind the operator does not apply. The live
        object is ``None`` also when the answer came from the memo of comparisons: with a cache, a child
        found in place is remembered by its content version
        (:meth:`~pdd_operator.controller.cache.ClusterCache.child_content_version`: its resourceVersion
        but for updates of nothing besides its status, which this comparison never reads) and
        :func:`applied_hash` of ``desired``
        (at most :data:`IN_PLACE_MEMO_SIZE` children), and the next call with both unchanged answers
        ``(False, None)`` without decoding or comparing the child (a no-op reconcile's largest cost).

        "In place" compares only what the operator applies
        (:func:`contains`): items other managers added to map lists (an injected env var) are
        tolerated and never cause a write, and neither does a newer generation stamp alone
        (:func:`restamped`: the child keeps the generation that last changed it). Conflicts with
        other managers are forced: the operator owns its children's rendered fields (a hand edit of
        them is reverted), and foreign items of :data:`EXCLUSIVE_LISTS` (a Service port edited or
        added by hand) are removed first, from children this owner controls only (never from an object
        of the same name that someone else created); an :data:`EXACT_MAPS` map with a key added by
        hand (a Service selector) is applied again (:func:`foreign_drift`).
        """
        kind, meta = desired["kind"], desired["metadata"]
        if kind not in _RESOURCE_PATHS:
            raise ValueError(f"unsupported kind {kind}")
        key = (kind, meta["namespace"], meta["name"])
        cache = self._cached()
        digest = digest or applied_hash(desired)
        if cache is not None:
            # A resourceVersion names one content of the object: the same live version and the same
            # desired object give the same answer, so the comparison is not made again.
            version = cache.child_content_version(*key)
            with self._in_place_lock:
                hit = version is not None and self._in_place.get(key) == (version, digest)
                if hit:
                    self._in_place.move_to_end(key)
            if hit:
                return False, None
        live = self.get(*key)
        stamped = restamped(desired, live)
        if live is not None and contains(live, with_applied_hash(stamped, _in_place_hash(
                live, stamped, digest if stamped is desired else applied_hash(stamped)))) \
                and not (_same_controller(live, desired) and foreign_drift(kind, live, desired)):
            version = (live.get("metadata") or {}).get("resourceVersion")
            if cache is not None and version:
                # Remembered at the content version: a status update of the child keeps the answer.
                self._found_in_place(key, cache.content_stamp(*key, version) or version, digest)
            return False, live
        return True, live

    def _found_in_place(self, key: tuple[str, str, str], version: str, digest: str) -> None:
        """Remember that child ``key`` at resourceVersion ``version`` holds the desired object of hash
        ``digest`` (:meth:`apply_needed`'s memo)."""
        with self._in_place_lock:
            self._in_place[key] = (version, digest)
            self._in_place.move_to_end(key)
            while len(self._in_place) > IN_PLACE_MEMO_SIZE:
                self._in_place.popitem(last=False)

    def all_in_place(self, namespace: str, children: tuple[tuple[str, str, str], ...]) -> bool:
        """True when every ``(kind, name, applied hash)`` of ``children`` (in ``namespace``) was found
        in place by :meth:`apply_needed` with that hash at the content version the cache holds now: an
        apply of them would send nothing. ``False`` without a ready cache, or for any child not
        remembered so (never compared, edited, deleted, dropped from the memo)."""
        cache = self._cached()
        if cache is None:
            return False
        versions = [cache.child_content_version(kind, namespace, name) for kind, name, _ in children]
        with self._in_place_lock:
            for (kind, name, digest), version in zip(children, versions, strict=True):
                key = (kind, namespace, name)
                if version is None or self._in_place.get(key) != (version, digest):
                    return False
            for kind, name, _ in children:
                self._in_place.move_to_end((kind, namespace, name))
        return True

    def send_apply(self, desired: dict, live: dict | None, digest: str | None = None) -> None:
        """Send the apply of ``desired`` (``live``: as :meth:`apply_needed` read it; ``digest``: as it
        was given, or ``None`` to hash ``desired`` here): first a merge patch
        that takes back an :data:`EXCLUSIVE_LISTS` list with foreign items, then the forced server-side
        apply. Raises ``ApiException`` for a non-2xx answer. Thread-safe (concurrent applies of one
        reconcile: :func:`pdd_operator.controller.reconcile.apply_all`)."""
        kind, meta = desired["kind"], desired["metadata"]
        body = with_applied_hash(desired, digest)
        exclusive = EXCLUSIVE_LISTS.get(kind)
        if live is not None and exclusive and _same_controller(live, body) and (
                extra := foreign_items(live, body, exclusive)):
            # Take the list back explicitly: a merge patch replaces a list as a whole.
            patch: dict = {}
            leaf = patch
            for part in exclusive[:-1]:
                leaf = leaf.setdefault(part, {})
            want = body
            for part in exclusive:
                want = want[part]
            leaf[exclusive[-1]] = want
            started = time.monotonic()
            self._request("PATCH", _RESOURCE_PATHS[kind], path_params={"namespace": meta["namespace"],
                                                                      "name": meta["name"]},
                          query=[("fieldManager", FIELD_MANAGER)], body=patch,
                          content_type="application/merge-patch+json")
            API_REQUEST_DURATION.labels("patch").observe(time.monotonic() - started)
            API_REQUESTS.labels("patch", kind).inc()
            self._wrote()
            log.info("removed %d item(s) of %s %s/%s %s that the operator does not render: %s", len(extra), kind,
                     meta["namespace"], meta["name"], ".".join(exclusive), extra)
        version = self._server_side_apply(kind, meta["namespace"], meta["name"], apply_body(body))
        if self.cache is not None and version:
            # The answer to a forced apply holds every field applied (server-side apply's promise): in place
            # at its resourceVersion, so the next reconcile does not compare the child it just applied.
            self._found_in_place((kind, meta["namespace"], meta["name"]), version, digest or applied_hash(desired))
        self._wrote()
        log.info("applied %s %s/%s", kind, meta["namespace"], meta["name"])

    def _wrote(self) -> None:
        with self._writes_lock:
            self.writes += 1

    def event(self, obj: dict, type_: str, reason: str, message: str) -> bool:
        """Record a core/v1 Event about ``obj`` (a PDDeployment as a dict) from the operator.

        ``type_``: ``Normal`` or ``Warning``; ``message`` is cut to 1024 characters (the apiserver's
        limit for events.k8s.io notes). Best effort: returns False, and logs, when the Event cannot
        be written (the condition in status says the same).
        """
        meta = obj["metadata"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "metadata": {"generateName": f"{meta['name'][:200]}.", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": obj.get("apiVersion", f"{GROUP}/{VERSION}"), "kind": obj.get("kind"),
                               "name": meta["name"], "namespace": meta["namespace"], "uid": meta.get("uid"),
                               "resourceVersion": meta.get("resourceVersion")},
            "type": type_, "reason": reason, "message": message[:1024],
            "source": {"component": FIELD_MANAGER}, "reportingComponent": FIELD_MANAGER,
            "reportingInstance": FIELD_MANAGER, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        try:
            API_REQUESTS.labels("create", "Event").inc()
            self._request("POST", "/api/v1/namespaces/{namespace}/events", path_params={"namespace": meta["namespace"]},
                          body={"apiVersion": "v1", "kind": "Event", **body})
        except Exception as exc:  # noqa: BLE001  (events are best effort; status carries the same)
            text = api_error_text(exc) if isinstance(exc, ApiException) else repr(exc)
            log.warning("cannot record event %s on %s/%s: %s", reason, meta["namespace"], meta["name"], text)
            return False
        self._wrote()
        return True

    def _server_side_apply(self, kind: str, namespace: str, name: str, body: bytes) -> str | None:
        """PATCH ``body`` (serialized by :func:`apply_body`) as a forced server-side apply; returns the
        resourceVersion of the answer (``None`` when it has none or is not JSON).

        The body goes as the bytes :func:`apply_body` wrote (Python's JSON encoder would escape an
        emoji as surrogates the apiserver's YAML decoder refuses). Raises ``ApiException`` for a non-2xx answer. The answer (the
        object as applied) is remembered in the cache.
        """
        API_REQUESTS.labels("apply", kind).inc()
        started = time.monotonic()
        try:
            answer = self._request("PATCH", _RESOURCE_PATHS[kind], path_params={"namespace": namespace, "name": name},
                                   query=[("fieldManager", FIELD_MANAGER), ("force", "true")], body=body,
                                   content_type="application/apply-patch+yaml")
        except ValueError:
            answer = None
            log.debug("the answer to the apply of %s %s/%s is not JSON", kind, namespace, name)
        finally:
            API_REQUEST_DURATION.labels("apply").observe(time.monotonic() - started)
        if not isinstance(answer, dict):
            return None
        if self.cache is not None:
            self.cache.remember(kind, answer)
        version = (answer.get("metadata") or {}).get("resourceVersion")
        return version if isinstance(version, str) else None

    def patch_status(self, namespace: str, name: str, status: dict, resource_version: str | None) -> None:
        """Replace the PDDeployment's status (merge patch of the status subresource).

        Keys that the previous status had and ``status`` lacks are removed with explicit nulls. With
        ``resource_version`` the patch fails with 409 if the object changed since it was read.
        """
        body: dict = {"status": status}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        API_REQUESTS.labels("patch", f"{KIND}/status").inc()
        started = time.monotonic()
        answer = self._request("PATCH", _PDD_PATH + "/status", path_params={"namespace": namespace, "name": name},
                               body=body, content_type="application/merge-patch+json")
        API_REQUEST_DURATION.labels("patch").observe(time.monotonic() - started)
        self._wrote()
        if self.cache is not None and isinstance(answer, dict):
            self.cache.remember(KIND, answer)
