"""The operator's reads from watch-fed caches: kopf indexes, overlaid with its own recent writes.

A reconcile reads the PDDeployment, its children, its pods and its model ConfigMap. Without caches
that is about 14 API reads per reconcile, however little changed. kopf already watches these kinds
(with a server-side label selector for the managed ones, see ``handlers.configure``) and keeps
*indexes* of what each watch delivered; the index functions here decide what is kept and under
which key:

- :func:`index_pdd` — ``(namespace, name)`` -> the PDDeployment;
- :func:`index_instance` — ``(namespace, instance label value)`` -> the PDDeployment's name (pods
  carry the label, not an ownerReference to it; a long or dotted name is hashed in the label);
- :func:`index_child` — ``(kind, namespace, name)`` -> a child (Deployment, Service, the router's
  ServiceAccount, Role, RoleBinding);
- :func:`index_pod` — ``(namespace, instance label value)`` -> the pods of that owner;
- :func:`index_config_map` — ``(namespace, name)`` -> a ConfigMap that some PDDeployment names in
  ``spec.model.configMapRef`` (ConfigMaps carry no label of ours, so the server cannot filter them;
  only the referenced ones are kept in memory).

Objects are kept without ``metadata.managedFields`` (a third of a Deployment's size, never read).

kopf runs no other handler before every index was filled from its initial listing, so the first
handler call hands the live index objects to :meth:`ClusterCache.attach`, which marks the cache ready.

**Own writes.** A watch delivers the answer to the operator's own apply or status patch some
milliseconds later; a reconcile that starts in between would see the old object and apply again.
:meth:`ClusterCache.remember` keeps the apiserver's answer until the watch delivers that
``resourceVersion`` (or a later one): reads return whichever is newer. resourceVersions are compared
as integers, which they are on etcd-backed apiservers; one that is not an integer never overrides
the index (Kubernetes calls them opaque, so the watch then simply wins). The same overlay keeps a
ConfigMap read directly because the index did not have it yet (newly referenced), and its absence
(404), until the watch says more.

**Relists.** kopf relists a kind after its watch broke (an apiserver outage, "410 Gone") but, unlike
client-go's reflector, does not turn the objects missing from the new list into deletions: an index
can keep an object deleted while the watch was down. The periodic resync therefore lists each kind's
metadata (names and resourceVersions only, one request per kind and namespace) and
:meth:`ClusterCache.prune` marks an indexed object that the list lacks, and that is older than the
list, as deleted (a *tombstone* in the overlay, dropped once the watch delivers that object again).

Thread safety: indexes are mutated by kopf's event loop and read by the reconcile threads; every read
copies what it needs in one C-level step (``list(store)``, ``dict.get``) under the GIL, and the overlay
has its own lock.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from pdd_operator.api.constants import GROUP, KIND, LABEL_INSTANCE
from pdd_operator.api.names import label_value

#: Names of the kopf indexes (the index functions' ids in handlers.py); kopf passes each to every
#: handler as a keyword argument of that name.
PDD_INDEX = "pdd_objects"
INSTANCE_INDEX = "pdd_instances"
CHILD_INDEX = "pdd_children"
POD_INDEX = "pdd_pods"
CONFIG_MAP_INDEX = "pdd_config_maps"
INDEX_NAMES = (PDD_INDEX, INSTANCE_INDEX, CHILD_INDEX, POD_INDEX, CONFIG_MAP_INDEX)

#: Marks a ConfigMap known to be absent (a 404 read) in the overlay; any indexed copy is newer.
ABSENT = {"metadata": {"resourceVersion": "-1"}, "absent": True}


def tombstone(list_version: int) -> dict:
    """An overlay entry saying: deleted as of ``list_version``; an indexed copy at least as new wins."""
    return {"metadata": {"resourceVersion": str(list_version)}, "absent": True}


def strip(body: Mapping[str, Any]) -> dict:
    """A shallow copy of an object without ``metadata.managedFields`` (what the caches keep)."""
    out = dict(body)
    meta = dict(out.get("metadata") or {})
    meta.pop("managedFields", None)
    out["metadata"] = meta
    return out


def resource_version(obj: Mapping[str, Any] | None) -> int | None:
    """``metadata.resourceVersion`` as an integer, or ``None`` (no object, or not an integer)."""
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion"))
    except (TypeError, ValueError):
        return None


def index_pdd(body: Mapping[str, Any]) -> dict:
    """kopf index function: ``{(namespace, name): PDDeployment}``."""
    meta = body.get("metadata") or {}
    return {(meta.get("namespace"), meta.get("name")): strip(body)}


def index_instance(body: Mapping[str, Any]) -> dict:
    """kopf index function: ``{(namespace, instance label value): name}`` of a PDDeployment
    (:func:`~pdd_operator.api.names.label_value`)."""
    meta = body.get("metadata") or {}
    return {(meta.get("namespace"), label_value(meta.get("name") or "")): meta.get("name")}


def index_child(body: Mapping[str, Any]) -> dict:
    """kopf index function: ``{(kind, namespace, name): child}``."""
    meta = body.get("metadata") or {}
    return {(body.get("kind"), meta.get("namespace"), meta.get("name")): strip(body)}


def index_pod(body: Mapping[str, Any]) -> dict:
    """kopf index function: ``{(namespace, instance label value): pod}``; ``{}`` without the label."""
    meta = body.get("metadata") or {}
    instance = (meta.get("labels") or {}).get(LABEL_INSTANCE)
    return {(meta.get("namespace"), instance): strip(body)} if instance else {}


def config_map_ref(pdd: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(namespace, name)`` of the ConfigMap a PDDeployment's ``spec.model.configMapRef`` names, if any.
    Never raises for a malformed spec (the reconcile reports that)."""
    spec = pdd.get("spec")
    model = spec.get("model") if isinstance(spec, dict) else None
    ref = model.get("configMapRef") if isinstance(model, dict) else None
    name = ref.get("name") if isinstance(ref, dict) else None
    return ((pdd.get("metadata") or {}).get("namespace"), name) if isinstance(name, str) and name else None


def owner_of(obj: Mapping[str, Any]) -> str | None:
    """The PDDeployment name in ``obj``'s controller ownerReference, or ``None``."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == KIND and str(ref.get("apiVersion", "")).startswith(GROUP + "/") and ref.get("name"):
            return ref["name"]
    return None


class ClusterCache:
    """Read access to the kopf indexes (once attached) and the overlay of the operator's own writes.

    Keys: ``kind`` is the object's kind (``PDDeployment``, ``Deployment``, ``Service``,
    ``ServiceAccount``, ``Role``, ``RoleBinding``, ``ConfigMap``). Reads return the cached dict itself:
    callers must not modify it.
    """

    def __init__(self) -> None:
        self.ready = threading.Event()
        self._indexes: dict[str, Mapping] = {}
        self._overlay: dict[tuple[str, str, str], dict] = {}
        self._lock = threading.Lock()
        self._references: dict[tuple[str, str], set[str]] = {}  # (ns, ConfigMap) -> PDDeployment names
        self._referenced_by: dict[tuple[str, str], tuple[str, str]] = {}  # (ns, PDDeployment) -> (ns, ConfigMap)

    # --- filling ----------------------------------------------------------------------------

    def attach(self, indexes: Mapping[str, Any]) -> None:
        """Take kopf's live index objects from a handler's keyword arguments (the first call marks
        the cache ready: kopf calls no handler before every index was filled)."""
        if self.ready.is_set():
            return
        missing = [name for name in INDEX_NAMES if name not in indexes]
        if missing:
            raise ValueError(f"kopf did not pass the indexes {', '.join(missing)}")
        self._indexes = {name: indexes[name] for name in INDEX_NAMES}
        self.ready.set()

    def note_references(self, pdd: Mapping[str, Any], deleted: bool = False) -> None:
        """Record which ConfigMap a PDDeployment references (called for each of its watch events), so
        :meth:`referenced` tells :func:`index_config_map` which ConfigMaps to keep."""
        meta = pdd.get("metadata") or {}
        key = (meta.get("namespace"), meta.get("name"))
        ref = None if deleted else config_map_ref(pdd)
        with self._lock:
            old = self._referenced_by.pop(key, None)
            if old is not None:
                names = self._references.get(old, set())
                names.discard(key[1])
                if not names:
                    self._references.pop(old, None)
            if ref is not None:
                self._referenced_by[key] = ref
                self._references.setdefault(ref, set()).add(key[1])

    def referenced(self, namespace: str, name: str) -> set[str]:
        """Names of the PDDeployments whose ``spec.model.configMapRef`` names this ConfigMap."""
        with self._lock:
            return set(self._references.get((namespace, name), ()))

    def index_config_map(self, body: Mapping[str, Any]) -> dict:
        """kopf index function: ``{(namespace, name): ConfigMap}`` for a referenced ConfigMap, else ``{}``."""
        meta = body.get("metadata") or {}
        key = (meta.get("namespace"), meta.get("name"))
        return {key: strip(body)} if self.referenced(*key) else {}

    def remember(self, kind: str, obj: Mapping[str, Any]) -> None:
        """Keep the apiserver's answer to a write (or a direct read) until the watch delivers it."""
        meta = obj.get("metadata") or {}
        if resource_version(obj) is None:
            return
        with self._lock:
            self._overlay[(kind, meta.get("namespace"), meta.get("name"))] = strip(obj)

    def remember_absent(self, kind: str, namespace: str, name: str) -> None:
        """Keep that a direct read found no such object, until the watch delivers one."""
        with self._lock:
            self._overlay[(kind, namespace, name)] = ABSENT

    def settle(self, kind: str, namespace: str, name: str, version: str | None) -> bool:
        """The watch delivered ``(kind, namespace, name)`` at ``version`` (``None``: deleted).

        Drops the overlay entry the watch has caught up with. Returns True when this is exactly the
        operator's own write (the overlay held that version): nothing changed that it does not know.
        """
        key = (kind, namespace, name)
        with self._lock:
            mine = self._overlay.get(key)
            if mine is None:
                return False
            if version is None:
                del self._overlay[key]
                return False
            have = resource_version(mine)
            try:
                seen = int(version)
            except (TypeError, ValueError):
                del self._overlay[key]
                return False
            if have is not None and seen >= have:
                del self._overlay[key]
                return seen == have
            return False

    # --- reading ----------------------------------------------------------------------------

    def _first(self, index: str, key: tuple) -> dict | None:
        store = self._indexes[index].get(key)
        if not store:
            return None
        items = list(store)
        return items[0] if items else None

    def _newest(self, kind: str, key: tuple, indexed: dict | None) -> dict | None:
        with self._lock:
            mine = self._overlay.get(key)
        if mine is None:
            return indexed
        have, seen = resource_version(mine), resource_version(indexed)
        if indexed is not None and (have is None or seen is None or seen >= have):
            return indexed
        return None if mine.get("absent") else mine

    def pdd(self, namespace: str, name: str) -> dict | None:
        """The PDDeployment, or ``None``."""
        return self._newest(KIND, (KIND, namespace, name), self._first(PDD_INDEX, (namespace, name)))

    def pdd_names_by_instance(self, namespace: str, instance: str) -> list[str]:
        """Names of the PDDeployments whose instance label value is ``instance``."""
        store = self._indexes[INSTANCE_INDEX].get((namespace, instance))
        return sorted(set(store)) if store else []

    def child(self, kind: str, namespace: str, name: str) -> dict | None:
        """A managed child of ``kind``, or ``None``."""
        return self._newest(kind, (kind, namespace, name), self._first(CHILD_INDEX, (kind, namespace, name)))

    def pods(self, namespace: str, selector: Mapping[str, str]) -> list[dict]:
        """The managed pods matching ``selector`` (which must hold the instance label)."""
        store = self._indexes[POD_INDEX].get((namespace, selector.get(LABEL_INSTANCE)))
        if not store:
            return []
        return [p for p in list(store)
                if all((p.get("metadata") or {}).get("labels", {}).get(k) == v for k, v in selector.items())
                and self._newest("Pod", ("Pod", namespace, p["metadata"].get("name")), p) is not None]

    def prune(self, kind: str, listed: Mapping[tuple[str, str], str], list_version: int | None) -> set[tuple[str, str]]:
        """Mark as deleted what the index holds of ``kind`` (``PDDeployment``, a child kind or ``Pod``)
        but a list at ``list_version`` did not: ``listed`` maps ``(namespace, name)`` to resourceVersion
        for every object of the kind the list returned (see the module docstring). Indexed objects newer
        than the list are kept (created after it). Returns the ``(namespace, PDDeployment)`` keys of the
        owners whose cached state changed. Does nothing without an integer ``list_version``."""
        if list_version is None or not self.ready.is_set():
            return set()
        if kind == KIND:
            indexed = [((ns, name), self._first(PDD_INDEX, (ns, name))) for ns, name in list(self._indexes[PDD_INDEX])]
        elif kind == "Pod":
            indexed = [((p["metadata"].get("namespace"), p["metadata"].get("name")), p)
                       for key in list(self._indexes[POD_INDEX]) for p in list(self._indexes[POD_INDEX].get(key) or ())]
        else:
            indexed = [((ns, name), self._first(CHILD_INDEX, (k, ns, name)))
                       for k, ns, name in list(self._indexes[CHILD_INDEX]) if k == kind]
        owners: set[tuple[str, str]] = set()
        with self._lock:
            for key, obj in indexed:
                version = resource_version(obj)
                if obj is None or key in listed or version is None or version >= list_version:
                    continue
                mine = self._overlay.get((kind, *key))
                if mine is not None and mine.get("absent") and resource_version(mine) >= version:
                    continue  # already marked
                self._overlay[(kind, *key)] = tombstone(list_version)
                owners.update(self._owners(kind, key, obj))
            present = {key for key, _ in indexed}
            for okey in [k for k, v in self._overlay.items() if k[0] == kind and v.get("absent") and v is not ABSENT]:
                if okey[1:] not in present:
                    del self._overlay[okey]  # kopf dropped the object too: nothing left to hide
        return owners

    def _owners(self, kind: str, key: tuple[str, str], obj: Mapping[str, Any]) -> set[tuple[str, str]]:
        if kind == KIND:
            return set()
        if kind == "Pod":
            instance = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_INSTANCE)
            store = self._indexes[INSTANCE_INDEX].get((key[0], instance)) if instance else None
            return {(key[0], name) for name in (store or ())}
        owner = owner_of(obj)
        return {(key[0], owner)} if owner else set()

    def config_map(self, namespace: str, name: str) -> tuple[bool, dict | None]:
        """``(known, ConfigMap)``: known is False when neither the index nor the overlay can say
        (a ConfigMap referenced since its last watch event): read it directly and :meth:`remember` it."""
        key = ("ConfigMap", namespace, name)
        indexed = self._first(CONFIG_MAP_INDEX, (namespace, name))
        with self._lock:
            known = indexed is not None or key in self._overlay
        if not known:
            return False, None
        return True, self._newest("ConfigMap", key, indexed)

    def overlay_size(self) -> int:
        """Entries kept in the overlay (tests, logs)."""
        with self._lock:
            return len(self._overlay)
