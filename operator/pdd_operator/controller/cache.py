"""The operator's reads from watch-fed caches: indexes of what kopf's watches deliver, overlaid with
the operator's own recent writes.

A reconcile reads the PDDeployment, its children, its pods and its model ConfigMap. Without caches
that is about 14 API reads per reconcile, however little changed. kopf watches PDDeployments and the
operator's own informers the other kinds (with a server-side label selector for the managed ones:
:mod:`~pdd_operator.controller.informer`, ``handlers.INFORMED``); their event handlers hand every
object to :meth:`ClusterCache.observe`, and the index functions here decide what is kept and under
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

Objects are kept without ``metadata.managedFields`` (a third of a Deployment's size, never read), pods
only with what status reads of them (:func:`pod_view`), and each as compact JSON bytes compressed
against the first object of its kind (:class:`Packed`): a parsed JSON object takes five to ten times its
text's size in Python, and the children of a thousand PDDeployments differ in little but their names,
so a 5 KB Deployment keeps about 200 bytes; a read (a few per reconcile) decodes one object in tens of
microseconds. Every read returns a fresh dict.

**Why not kopf's own indexes** (``@kopf.index``): kopf holds every handler until all indexes are
filled, which is what a cache needs, but it does so with one toggle per indexed object that every
object's worker waits on; with 3,000 objects a restart spent minutes there (measured with
``bench/bench_scale.py`` at 200 PDDeployments: no handler ran 150 s after the start). The same
index functions therefore fill a small store of our own (:class:`Index`), and the cache is *ready*
once every informer has handed over its first complete list and every PDDeployment that a metadata
list then returned has been delivered by kopf's watch (:meth:`ClusterCache.expect`); reconciles wait
for that, so a restart never acts on half a picture.

**Own writes.** A watch delivers the answer to the operator's own apply or status patch some
milliseconds later; a reconcile that starts in between would see the old object and apply again.
:meth:`ClusterCache.remember` keeps the apiserver's answer until the watch delivers that
``resourceVersion`` (or a later one): reads return whichever is newer, taking both under one hold of
the lock (the watch handlers index an event before they drop the write it delivers, so two holds
could miss both: :meth:`ClusterCache._read`). resourceVersions are compared
as integers, which they are on etcd-backed apiservers; one that is not an integer never overrides
the index (Kubernetes calls them opaque, so the watch then simply wins). The same overlay keeps a
ConfigMap read directly because the index did not have it yet (newly referenced), and its absence
(404), until the watch says more.

**Relists.** The informers relist a kind after "410 Gone" as client-go's reflector does, handing
the objects missing from the new list over as deletions, and then call :meth:`ClusterCache.prune`
with that list, which drops a cached object (or an own write in the overlay) that the list lacks and
that is older than the list: a referenced ConfigMap deleted while the watch was down then reads as
missing, and the PDDeployments that reference it are reconciled. kopf relists PDDeployments without
turning what went missing into deletions; the periodic resync's list of them prunes those.

**Change epochs.** Every change of what a read of a PDDeployment's inputs would return (the object itself,
a child, a pod's view, its ConfigMap; an own write remembered or caught up with, a deletion, a prune) bumps
that PDDeployment's epoch, found through the object's owner (a child's controller ownerReference, a pod's
instance label, a ConfigMap's references); a change whose owner cannot be told bumps its namespace's epoch,
which every PDDeployment there sees. :meth:`ClusterCache.epoch` gives both (and the cache's serial number):
two reconciles that began at the same epoch read the same objects
(:class:`~pdd_operator.controller.reconcile.QuietMemo`).

Thread safety: the store is filled from kopf's event loop and the informers' threads and read by the
reconcile threads, under one lock held only for dictionary operations.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import zlib
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import orjson

from pdd_operator.api.constants import CONTAINER_FAILURE_REASONS, GROUP, KIND, LABEL_INSTANCE
from pdd_operator.api.names import label_value
from pdd_operator.api.selectors import selector_matches

#: Names of the indexes.
PDD_INDEX = "pdd_objects"
INSTANCE_INDEX = "pdd_instances"
CHILD_INDEX = "pdd_children"
POD_INDEX = "pdd_pods"
CONFIG_MAP_INDEX = "pdd_config_maps"
INDEX_NAMES = (PDD_INDEX, INSTANCE_INDEX, CHILD_INDEX, POD_INDEX, CONFIG_MAP_INDEX)

#: Marks a ConfigMap known to be absent (a 404 read) in the overlay; any indexed copy is newer.
ABSENT = {"metadata": {"resourceVersion": "-1"}, "absent": True}


def _absent(entry: Packed | dict | None) -> bool:
    return isinstance(entry, dict) and bool(entry.get("absent"))


def _version(entry: Packed | dict | None) -> int | None:
    """The resourceVersion of an overlay entry (an own write as :class:`Packed`, or a marker dict)."""
    if isinstance(entry, Packed):
        return resource_version({"metadata": {"resourceVersion": entry.version}})
    return resource_version(entry)


def strip(body: Mapping[str, Any]) -> dict:
    """A shallow copy of an object without ``metadata.managedFields`` (what the caches keep)."""
    out = dict(body)
    meta = dict(out.get("metadata") or {})
    meta.pop("managedFields", None)
    out["metadata"] = meta
    return out


def status_only(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether ``new`` differs from ``old`` (a cached copy of the same object, ``None``: none cached) in
    nothing but its ``status``, resourceVersion and ``managedFields``: a status write, which for a
    PDDeployment only the operator makes. controller-runtime's ``GenerationChangedPredicate`` drops
    such updates likewise; here labels, annotations, a finalizer or a deletion still count."""
    if old is None:
        return False

    def rest(obj: Mapping[str, Any]) -> dict:
        body = strip(obj)
        body.pop("status", None)
        body["metadata"].pop("resourceVersion", None)
        return body

    return rest(old) == rest(new)


def content_fingerprint(body: Mapping[str, Any]) -> bytes | None:
    """A 16-byte digest of ``body`` without its ``status``, resourceVersion and ``managedFields``: equal
    for two versions of a child that differ only there (the controller manager's status updates of a
    Deployment), different (but for a BLAKE2b collision) for any other change, and different when the
    apiserver wrote the same content in another key order (only a lost memo hit). ``None`` for what
    orjson refuses (an integer wider than 64 bits): such a child counts as changed on every update.

    Why: whether a child must be applied again (:meth:`~pdd_operator.controller.kube.Kube.apply_needed`)
    reads nothing of it besides these parts, so a comparison found true stays true across a status
    update (:meth:`ClusterCache.child_content_version`), and a new object's 3-4 Deployment status
    updates no longer each render and compare its 9 children."""
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k not in ("resourceVersion", "managedFields")}
    rest = {k: v for k, v in body.items() if k not in ("status", "metadata")}
    rest["metadata"] = meta
    try:
        text = orjson.dumps(rest)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None
    return hashlib.blake2b(text, digest_size=16).digest()


class Packed(NamedTuple):
    """What an index keeps of one object: its resourceVersion, its owner's name or instance label
    (``None`` when it has none) and the object as compact JSON without its resourceVersion, compressed
    (``blob``: zlib, with ``zdict``, its kind's preset dictionary: :func:`dictionary`), so two versions of
    an object that differ in nothing the cache keeps have equal ``blob`` s (:meth:`ClusterCache.observe`
    tells a resourceVersion-only update that way: the compression is deterministic)."""

    version: str | None
    owner: str | None
    blob: bytes
    zdict: bytes = b""

    def text(self) -> bytes:
        """The object's JSON as packed (without its resourceVersion)."""
        return zlib.decompressobj(_WBITS, zdict=self.zdict).decompress(self.blob)

    def unpack(self) -> dict:
        """The object with its resourceVersion (a new dict on every call)."""
        text = self.text()
        body = json.loads(text) if text[:1] == _STDLIB_MARK else orjson.loads(text)
        if self.version is not None:
            body.setdefault("metadata", {})["resourceVersion"] = self.version
        return body


#: zlib's window (2 ** 13 = 8 KiB: a Deployment's JSON is about 5 KiB) and memory level: 64 KiB of
#: compressor state, copied for each object (:func:`_compress`), where zlib's defaults take 256 KiB.
_WBITS, _MEM_LEVEL = 13, 6
#: The longest preset dictionary that zlib uses with that window.
_WINDOW = 2**_WBITS
#: Per kind, the preset dictionary its objects are compressed with (:func:`dictionary`) and a compressor
#: primed with it, never used itself: each object is compressed by a copy of it.
_DICTIONARIES: dict[str, tuple[bytes, Any]] = {}


def dictionary(kind: str, text: bytes) -> bytes:
    """The preset dictionary of ``kind``: the packed JSON of the first object of that kind packed in this
    process (its last 8 KiB, zlib's window here), ``text`` when this is the first. Never changes once set
    (a blob is read back with the dictionary it was written with), so the same object always compresses
    to the same blob.

    Why: the operator's children of one kind are one renderer's output and differ in names, labels and a
    few values; against another object of the kind, zlib keeps a 5 KB Deployment in about 200 bytes and
    a PDDeployment with its status in about 100, where on its own it would keep 2 KB (bench/README.md,
    2026-12-07, 06:00). A dictionary that is a poor match (another shape of spec) costs nothing but ratio."""
    return _primed(kind, text)[0]


def _primed(kind: str, text: bytes) -> tuple[bytes, Any]:
    found = _DICTIONARIES.get(kind)
    if found is None:
        zdict = bytes(memoryview(text)[-_WINDOW:])  # a bytes object of its own size, not orjson's buffer
        found = _DICTIONARIES.setdefault(kind, (zdict, zlib.compressobj(1, zlib.DEFLATED, _WBITS, _MEM_LEVEL,
                                                                         zdict=zdict)))
    return found


def _compress(text: bytes, primed: Any) -> bytes:
    """``text`` compressed with zlib at level 1 by a copy of ``primed`` (a compressor given its kind's
    dictionary: copying it costs half of priming a new one). Deterministic: the same text and dictionary
    give the same bytes. About 30 us for a 5 KB Deployment, 10-15 us to read back."""
    compressor = primed.copy()
    return compressor.compress(text) + compressor.flush()


def pack(obj: Mapping[str, Any], owner: str | None = None) -> Packed:
    """:class:`Packed` of ``obj`` without ``managedFields`` (:func:`strip`), compressed against its kind's
    :func:`dictionary`."""
    body = strip(obj)
    version = body["metadata"].pop("resourceVersion", None)
    text = _dumps(body)
    zdict, primed = _primed(str(body.get("kind") or ""), text)
    return Packed(version, owner, _compress(text, primed), zdict)


#: First byte of a blob the standard library wrote (JSON allows leading whitespace): :meth:`Packed.unpack`
#: reads it back with the standard library too.
_STDLIB_MARK = b" "


def _dumps(body: Mapping[str, Any]) -> bytes:
    """Compact JSON of ``body``: orjson's (11x faster than the standard library on a Deployment, 2.6x
    to read back; every watch event is packed), or, for what orjson refuses (an integer wider than 64
    bits, a lone surrogate), the standard library's behind :data:`_STDLIB_MARK`, so that it reads back
    unchanged (orjson would read such an integer as a float). One object always packs the same way."""
    try:
        # orjson's output keeps the capacity of its growing buffer, about twice the JSON (the N=1,000
        # bench's RSS went from 146 to 199 MB when it was kept, bench/README.md); only its compressed
        # copy is kept (:func:`pack`), and the dictionary is a slice of it: a bytes object of its own size.
        return orjson.dumps(body)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return _STDLIB_MARK + json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode(
            "utf-8", "surrogatepass")


def pod_view(pod: Mapping[str, Any]) -> dict:
    """The part of a pod that the operator reads: identity and labels, the ``PodScheduled`` condition
    without its times (the scheduler's verdict), the ``preflight`` init container's termination
    messages (:func:`~pdd_operator.controller.status.preflight_results`) and, of every container that
    cannot run, its name, waiting state and last termination
    (:func:`~pdd_operator.controller.pod_failures.pod_problems`). Nothing else: a pod update that changes
    none of it (it started, became ready, got an IP; readiness is counted from its Deployment) leaves
    the view equal and queues no reconcile (:meth:`ClusterCache.observe`)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    keep = ("name", "namespace", "uid", "resourceVersion", "labels", "deletionTimestamp", "ownerReferences")
    stuck = [{"name": s.get("name"), "state": {"waiting": s["state"]["waiting"]},
              "lastState": s.get("lastState") or {}}
             for s in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
             if isinstance(s, dict) and isinstance(s.get("state"), dict)
             and isinstance(s["state"].get("waiting"), dict)
             and s["state"]["waiting"].get("reason") in CONTAINER_FAILURE_REASONS]
    preflight = [{"name": "preflight", **{key: {"terminated": {"message": message}}
                                          for key in ("state", "lastState")
                                          if (message := (((s.get(key) or {}).get("terminated") or {})
                                                          .get("message")))}}
                 for s in status.get("initContainerStatuses") or []
                 if isinstance(s, dict) and s.get("name") == "preflight"]
    scheduled = [{k: c[k] for k in ("type", "status", "reason", "message") if k in c}
                 for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "PodScheduled"]
    return {"kind": "Pod", "metadata": {k: meta[k] for k in keep if k in meta},
            "status": {"conditions": scheduled, "initContainerStatuses": preflight, "containerStatuses": stuck}}


def resource_version(obj: Mapping[str, Any] | None) -> int | None:
    """``metadata.resourceVersion`` as an integer, or ``None`` (no object, or not an integer)."""
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion"))
    except (TypeError, ValueError):
        return None


def index_pdd(body: Mapping[str, Any]) -> dict:
    """Index function: ``{(namespace, name): PDDeployment}``."""
    meta = body.get("metadata") or {}
    return {(meta.get("namespace"), meta.get("name")): pack(body)}


def index_instance(body: Mapping[str, Any]) -> dict:
    """Index function: ``{(namespace, instance label value): name}`` of a PDDeployment
    (:func:`~pdd_operator.api.names.label_value`)."""
    meta = body.get("metadata") or {}
    return {(meta.get("namespace"), label_value(meta.get("name") or "")): meta.get("name")}


def index_child(body: Mapping[str, Any]) -> dict:
    """Index function: ``{(kind, namespace, name): child}``."""
    meta = body.get("metadata") or {}
    return {(body.get("kind"), meta.get("namespace"), meta.get("name")): pack(body, owner_of(body))}


def index_pod(body: Mapping[str, Any]) -> dict:
    """Index function: ``{(namespace, instance label value): pod}``; ``{}`` without the label."""
    meta = body.get("metadata") or {}
    instance = (meta.get("labels") or {}).get(LABEL_INSTANCE)
    return {(meta.get("namespace"), instance): pack(pod_view(body), instance)} if instance else {}


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


def _same_content(old: Any, new: Any) -> bool:
    """Whether two index values hold the same object but for its resourceVersion (:class:`Packed`), or
    are equal."""
    if isinstance(old, Packed) and isinstance(new, Packed):
        return old.owner == new.owner and old.blob == new.blob
    return old == new


class Index:
    """Keys -> the values that index functions returned for them, per object: an object's new results
    replace its old ones (as kopf's indexes do). Not thread-safe: :class:`ClusterCache` locks."""

    def __init__(self) -> None:
        # key -> {object key: value}; a key that one object has (a child, a PDDeployment: almost all)
        # holds the pair (object key, value) instead: 56 bytes where a one-entry dict takes 232.
        self._stores: dict[Any, dict[tuple, Any] | tuple[tuple, Any]] = {}
        # A tuple per object (almost always of one key): 48 bytes where a set takes 216.
        self._keys_of: dict[tuple, tuple] = {}

    def _store(self, key: Any) -> Mapping[tuple, Any]:
        """``{object key: value}`` under ``key`` (a new dict for a pair; do not change it)."""
        store = self._stores.get(key)
        if store is None:
            return {}
        return store if isinstance(store, dict) else {store[0]: store[1]}

    def replace(self, obj_key: tuple, results: Mapping[Any, Any]) -> bool:
        """Set ``obj_key``'s values to ``results`` (key -> value), dropping its other keys. Returns
        whether anything changed: keys, or a value other than by its :class:`Packed` version alone."""
        old_keys = set(self._keys_of.get(obj_key, ()))
        changed = old_keys != set(results)
        for key in old_keys - set(results):
            self._drop(key, obj_key)
        for key, value in results.items():
            store = self._stores.get(key)
            if store is None or (not isinstance(store, dict) and store[0] == obj_key):
                changed = changed or not _same_content(None if store is None else store[1], value)
                self._stores[key] = (obj_key, value)
                continue
            if not isinstance(store, dict):
                store = self._stores[key] = {store[0]: store[1]}
            changed = changed or not _same_content(store.get(obj_key), value)
            store[obj_key] = value
        if results:
            self._keys_of[obj_key] = tuple(results)
        else:
            self._keys_of.pop(obj_key, None)
        return changed

    def discard(self, obj_key: tuple) -> None:
        """Forget every value of ``obj_key``."""
        for key in self._keys_of.pop(obj_key, ()):
            self._drop(key, obj_key)

    def _drop(self, key: Any, obj_key: tuple) -> None:
        store = self._stores.get(key)
        if store is None:
            return
        if not isinstance(store, dict):
            if store[0] == obj_key:
                del self._stores[key]
            return
        store.pop(obj_key, None)
        if len(store) == 1:
            self._stores[key] = next(iter(store.items()))
        elif not store:
            del self._stores[key]

    def get(self, key: Any) -> list:
        """The values under ``key`` (a new list)."""
        return list(self._store(key).values())

    def value(self, key: Any, obj_key: tuple) -> Any:
        """The value ``obj_key`` has under ``key``, or ``None``."""
        return self._store(key).get(obj_key)

    def keys(self) -> list:
        """Every key (a new list)."""
        return list(self._stores)

    def objects(self) -> list[tuple]:
        """Every object key with values."""
        return list(self._keys_of)


#: Serial numbers of the caches made in this process (:meth:`ClusterCache.epoch`).
_CACHES = itertools.count()

#: Which indexes an object of each kind goes into (ConfigMaps: :meth:`ClusterCache.index_config_map`).
_CHILD_KINDS = ("Deployment", "Service", "ServiceAccount", "Role", "RoleBinding")


class ClusterCache:
    """The store of what the watches delivered, its readiness, and the overlay of the operator's own writes.

    Keys: ``kind`` is the object's kind (``PDDeployment``, ``Deployment``, ``Service``,
    ``ServiceAccount``, ``Role``, ``RoleBinding``, ``Pod``, ``ConfigMap``). Every read returns a new dict.
    """

    def __init__(self) -> None:
        self.ready = threading.Event()
        self._indexes: dict[str, Index] = {name: Index() for name in INDEX_NAMES}
        self._expected: dict[str, set[tuple[str, str]]] | None = None
        self._overlay: dict[tuple[str, str, str], Packed | dict] = {}
        self._lock = threading.RLock()
        self._references: dict[tuple[str, str], set[str]] = {}  # (ns, ConfigMap) -> PDDeployment names
        self._referenced_by: dict[tuple[str, str], tuple[str, str]] = {}  # (ns, PDDeployment) -> (ns, ConfigMap)
        self._epochs: dict[tuple[str, str], int] = {}  # (ns, PDDeployment) -> changes of its inputs
        # (kind, ns, name) of a child -> (content_fingerprint, the resourceVersion at which it last changed,
        # the resourceVersion it was recorded at): child_content_version
        self._content: dict[tuple[str, str, str], tuple[bytes | None, str | None, str | None]] = {}
        self._serial = next(_CACHES)  # epochs of two caches never compare equal
        self._namespace_epochs: dict[str, int] = {}  # ns -> changes whose owner could not be told

    # --- filling ----------------------------------------------------------------------------

    def observe(self, kind: str, body: Mapping[str, Any], deleted: bool = False) -> bool:
        """A watch delivered ``body`` of ``kind`` (``deleted``: its deletion): update the indexes.

        Returns whether what the cache keeps of the object changed: False for an update of nothing
        but its resourceVersion and of fields the cache does not keep (``managedFields``, of a pod
        everything :func:`pod_view` leaves out), which no reconcile can see; True for a new object,
        a deletion and every other change."""
        return self._observe(kind, body, deleted, None)

    def observe_change(self, kind: str, body: Mapping[str, Any]) -> tuple[bool, Callable[[], dict | None]]:
        """:meth:`observe` of an added or updated ``body`` of ``kind`` (a PDDeployment, a child or a pod),
        and what a read would have returned just before it, decoded only when asked for: ``(changed,
        before)``. ``before()`` is :meth:`pdd` or :meth:`child` (the newer of the indexed copy and an
        own write) or, for a pod, :meth:`last_known` (its :func:`pod_view`), as of the moment the event
        was indexed (under the same hold of the lock), or ``None``.

        Why: the watch handlers compare an event with the copy it replaces to decide what work it asks
        for, but two events in three of a new object change nothing the cache keeps (a pod started,
        a Deployment's status the reconcile does not read) or are the echo of the operator's own
        write; they need no comparison, and decoding the cached copy (zlib and JSON) cost more than
        the rest of their handling."""
        held: list = []
        changed = self._observe(kind, body, False, held)
        indexed, mine = held or (None, None)

        def before() -> dict | None:
            if kind == "Pod":
                return indexed.unpack() if isinstance(indexed, Packed) else None
            return self._newer(indexed if isinstance(indexed, Packed) else None, mine)
        return changed, before

    def _observe(self, kind: str, body: Mapping[str, Any], deleted: bool, held: list | None) -> bool:
        """:meth:`observe`; with ``held``, appends the indexed value the event replaces and the overlay's
        entry of the object, read under the same hold of the lock (:meth:`observe_change`)."""
        meta = body.get("metadata") or {}
        obj_key = (kind, meta.get("namespace"), meta.get("name"))
        if kind == KIND:
            updates = {PDD_INDEX: index_pdd, INSTANCE_INDEX: index_instance}
        elif kind == "Pod":
            updates = {POD_INDEX: index_pod}
        elif kind == "ConfigMap":
            updates = {CONFIG_MAP_INDEX: self.index_config_map}
        elif kind in _CHILD_KINDS:
            updates = {CHILD_INDEX: index_child}
        else:
            raise ValueError(f"unsupported kind {kind}")
        # Packed before the lock (JSON and compression: tens of microseconds a Deployment, which the
        # reconciles' reads would wait for); a ConfigMap's value depends on the references, read under it.
        results = {} if deleted or kind == "ConfigMap" else {name: function(body) for name, function in updates.items()}
        child = kind in _CHILD_KINDS
        fingerprint = content_fingerprint(body) if child and not deleted else None
        with self._lock:
            if child:
                self._note_content(obj_key, fingerprint, deleted, meta.get("resourceVersion"))
            if held is not None:
                index = {KIND: PDD_INDEX, "Pod": POD_INDEX, "ConfigMap": CONFIG_MAP_INDEX}.get(kind, CHILD_INDEX)
                held += [self._indexes[index].value(self._key_for(kind, obj_key), obj_key), self._overlay.get(obj_key)]
            if kind == KIND:
                self.note_references(body, deleted)
            changed = deleted
            index_name = {KIND: PDD_INDEX, "Pod": POD_INDEX, "ConfigMap": CONFIG_MAP_INDEX}.get(kind, CHILD_INDEX)
            old = self._indexes[index_name].value(self._key_for(kind, obj_key), obj_key)
            for name, function in updates.items():
                if deleted:
                    self._indexes[name].discard(obj_key)
                else:
                    value = results[name] if name in results else function(body)
                    changed = self._indexes[name].replace(obj_key, value) or changed
            mine = self._overlay.get(obj_key)
            if changed and not (not deleted and isinstance(mine, Packed) and mine.version is not None
                                and mine.version == meta.get("resourceVersion")):
                # (The echo of an own write: reads returned that version from the overlay already.)
                new = results.get(index_name) if results else None
                self._bump(kind, obj_key, [old, *(new or {}).values()])
            if self._expected is not None and not self.ready.is_set():
                self._expected.get(kind, set()).discard(obj_key[1:])
                self._check_ready()
        return changed

    def expect(self, listed: Mapping[str, set[tuple[str, str]]]) -> None:
        """Become ready once every ``(namespace, name)`` listed per kind (a metadata list at startup)
        has been observed. Called again with a fresh list, it replaces the expectation (an object
        deleted between that list and the watch's would otherwise be waited for forever)."""
        with self._lock:
            present = self._present()  # once: per key it made a restart with 13,000 objects quadratic
            self._expected = {kind: {k for k in keys if (kind, *k) not in present}
                              for kind, keys in listed.items()}
            self._check_ready()

    def missing(self) -> dict[str, int]:
        """Per kind, how many listed objects the watches have not delivered yet."""
        with self._lock:
            return {kind: len(keys) for kind, keys in (self._expected or {}).items() if keys}

    def _present(self) -> set[tuple]:
        return {obj_key for index in self._indexes.values() for obj_key in index.objects()}

    def _check_ready(self) -> None:
        if self._expected is not None and not any(self._expected.values()):
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
        """Index function: ``{(namespace, name): ConfigMap}`` for a referenced ConfigMap, else ``{}``."""
        meta = body.get("metadata") or {}
        key = (meta.get("namespace"), meta.get("name"))
        return {key: pack(body)} if self.referenced(*key) else {}

    def remember(self, kind: str, obj: Mapping[str, Any]) -> None:
        """Keep the apiserver's answer to a write (or a direct read) until the watch delivers it."""
        meta = obj.get("metadata") or {}
        if resource_version(obj) is None:
            return
        packed = pack(obj, owner_of(obj) if kind in _CHILD_KINDS else None)
        key = (kind, meta.get("namespace"), meta.get("name"))
        with self._lock:
            self._overlay[key] = packed
            self._bump(kind, key, [packed])

    def remember_absent(self, kind: str, namespace: str, name: str) -> None:
        """Keep that a direct read found no such object, until the watch delivers one."""
        with self._lock:
            self._overlay[(kind, namespace, name)] = ABSENT
            self._bump(kind, (kind, namespace, name), [])

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
                self._bump(kind, key, [mine])
                return False
            have = _version(mine)
            try:
                seen = int(version)
            except (TypeError, ValueError):
                del self._overlay[key]
                self._bump(kind, key, [mine])
                return False
            if have is not None and seen >= have:
                del self._overlay[key]
                if seen != have:  # reads now return the indexed copy, another version than the own write
                    self._bump(kind, key, [mine])
                return seen == have
            return False

    def _bump(self, kind: str, obj_key: tuple, entries: list) -> None:
        """Under the lock: what reads of ``obj_key`` (``(kind, namespace, name)``) return changed; bump the
        epoch of every PDDeployment whose inputs it is (``entries``: its old and new :class:`Packed`, which
        name a child's and a pod's owner), or of its namespace when one of them names none."""
        namespace, name = obj_key[1], obj_key[2]
        if kind == KIND:
            owners = {name}
        elif kind == "ConfigMap":
            owners = set(self._references.get((namespace, name), ()))
        else:
            owners = set()
            for entry in entries:
                owner = entry.owner if isinstance(entry, Packed) else None
                if owner is None:
                    if entry is not None:  # an object with no owner we can tell: its namespace
                        owners = None
                        break
                    continue
                owners.update(self._indexes[INSTANCE_INDEX].get((namespace, owner)) if kind == "Pod" else [owner])
            if owners is not None and not owners and any(e is not None for e in entries):
                owners = None  # a pod whose PDDeployment is not cached (yet)
            if owners is None or not entries:
                self._namespace_epochs[namespace] = self._namespace_epochs.get(namespace, 0) + 1
                return
        for owner in owners:
            self._epochs[(namespace, owner)] = self._epochs.get((namespace, owner), 0) + 1

    def epoch(self, namespace: str, name: str) -> tuple[int, int, int]:
        """The change epoch of PDDeployment ``namespace/name``'s inputs (see the module docstring):
        ``(this cache's serial number in the process, its namespace's, its own)``. Equal epochs: every read
        of its inputs returns what it returned then. Epochs only grow: a PDDeployment deleted and created
        again under its name goes on from its last one (a number is kept per name ever seen)."""
        with self._lock:
            return self._serial, self._namespace_epochs.get(namespace, 0), self._epochs.get((namespace, name), 0)

    # --- reading ----------------------------------------------------------------------------

    def _read(self, index: str, index_key: tuple, key: tuple) -> tuple[Packed | None, Packed | dict | None]:
        """``(the index's first value under index_key, the overlay's entry of key)``, read under one hold
        of the lock. Read apart, a watch event could land between the two: the handlers index the event
        (:meth:`observe`) and only then drop the own write it delivers (:meth:`settle`), so a read of
        the index before and of the overlay after found neither, and a child just applied read as
        missing (a new object's first status said ``ChildMissing``)."""
        with self._lock:
            items = self._indexes[index].get(index_key)
            return (items[0] if items else None), self._overlay.get(key)

    @staticmethod
    def _newer(indexed: Packed | None, mine: Packed | dict | None) -> dict | None:
        """The newer of an indexed copy and an overlay entry read together (:meth:`_read`), unpacked;
        ``None`` for neither, or for an absence marker newer than the index."""
        if mine is not None:
            have, seen = _version(mine), _version(indexed) if indexed is not None else None
            if indexed is None or not (have is None or seen is None or seen >= have):
                return None if _absent(mine) else mine.unpack()
        return indexed.unpack() if indexed is not None else None

    def _newest(self, key: tuple, indexed: dict | None) -> dict | None:
        """``indexed`` (an unpacked copy read before) or the overlay's entry of ``key`` if that is newer:
        for pods, which the overlay never holds (no own write of a pod; see :meth:`_read`)."""
        with self._lock:
            mine = self._overlay.get(key)
        if mine is None:
            return indexed
        have, seen = _version(mine), resource_version(indexed)
        if indexed is not None and (have is None or seen is None or seen >= have):
            return indexed
        return None if _absent(mine) else mine.unpack()

    def pdd(self, namespace: str, name: str) -> dict | None:
        """The PDDeployment, or ``None``."""
        return self._newer(*self._read(PDD_INDEX, (namespace, name), (KIND, namespace, name)))

    def pdd_names_by_instance(self, namespace: str, instance: str) -> list[str]:
        """Names of the PDDeployments whose instance label value is ``instance``."""
        with self._lock:
            return sorted(set(self._indexes[INSTANCE_INDEX].get((namespace, instance))))

    def child(self, kind: str, namespace: str, name: str) -> dict | None:
        """A managed child of ``kind``, or ``None``."""
        key = (kind, namespace, name)
        return self._newer(*self._read(CHILD_INDEX, key, key))

    def _note_content(self, key: tuple, fingerprint: bytes | None, deleted: bool, version: str | None) -> None:
        """Record a child's event for :meth:`child_content_version` (under the lock)."""
        if deleted:
            self._content.pop(key, None)
            return
        prev = self._content.get(key)
        same = prev is not None and fingerprint is not None and prev[0] == fingerprint
        self._content[key] = (fingerprint, prev[1] if same else version, version)

    def content_stamp(self, kind: str, namespace: str, name: str, version: str | None) -> str | None:
        """The content version (:meth:`child_content_version`) of the child's copy at resourceVersion
        ``version``: the resourceVersion at which the child last changed other than in its status, when
        the watch delivered ``version`` and the cache recorded it, else ``version`` itself (never an older
        stamp than the content compared)."""
        with self._lock:
            record = self._content.get((kind, namespace, name))
        return record[1] if record is not None and version is not None and record[2] == version else version

    def child_content_version(self, kind: str, namespace: str, name: str) -> str | None:
        """Like :meth:`child_version`, but a version of the indexed copy stands for the resourceVersion at
        which the child last changed in anything but its ``status``, resourceVersion and
        ``managedFields`` (:func:`content_fingerprint`); an own write newer than the indexed copy is its
        own resourceVersion. ``None``: no such child. Two equal answers mean the same content apart from
        the status, which :meth:`~pdd_operator.controller.kube.Kube.apply_needed` never reads."""
        version = self.child_version(kind, namespace, name)
        return self.content_stamp(kind, namespace, name, version)

    def child_version(self, kind: str, namespace: str, name: str) -> str | None:
        """The resourceVersion of the copy :meth:`child` would return (``None``: no such child, or one
        without a version), without decoding it: a reconcile that finds a child at the version it last
        compared needs no second comparison (:meth:`~pdd_operator.controller.kube.Kube.apply_needed`)."""
        key = (kind, namespace, name)
        with self._lock:
            items = self._indexes[CHILD_INDEX].get(key)
            indexed = items[0] if items else None
            mine = self._overlay.get(key)
        if mine is None:
            return indexed.version if indexed is not None else None
        have = _version(mine)
        seen = _version(indexed) if indexed is not None else None
        if indexed is not None and (have is None or seen is None or seen >= have):
            return indexed.version
        return None if _absent(mine) else mine.version

    def pods(self, namespace: str, selector: Mapping[str, str]) -> list[dict]:
        """The managed pods matching ``selector`` (which must hold the instance label)."""
        with self._lock:
            store = self._indexes[POD_INDEX].get((namespace, selector.get(LABEL_INSTANCE)))
        pods = [packed.unpack() for packed in store]
        return [p for p in pods
                if selector_matches({"matchLabels": selector}, (p.get("metadata") or {}).get("labels") or {})
                and self._newest(("Pod", namespace, p["metadata"].get("name")), p) is not None]

    def prune(self, kind: str, listed: Mapping[tuple[str, str], str], list_version: int | None) -> set[tuple[str, str]]:
        """Drop what the cache holds of ``kind`` (``PDDeployment``, a child kind, ``Pod`` or
        ``ConfigMap``) but a list at ``list_version`` did not return: ``listed`` maps ``(namespace, name)`` to resourceVersion for
        every object of the kind in that list (see the module docstring). Cached objects newer than the
        list are kept (created after it). Returns the ``(namespace, PDDeployment)`` keys of the owners
        whose cached state changed. Does nothing without an integer ``list_version``."""
        if list_version is None:
            return set()
        index = {KIND: PDD_INDEX, "Pod": POD_INDEX, "ConfigMap": CONFIG_MAP_INDEX}.get(kind, CHILD_INDEX)
        owners: set[tuple[str, str]] = set()
        pruned: list[tuple[str, str]] = []
        with self._lock:
            for obj_key in self._indexes[index].objects():
                if obj_key[0] != kind or obj_key[1:] in listed:
                    continue
                packed = self._indexes[index].value(self._key_for(kind, obj_key), obj_key)
                version = _version(packed)
                if version is None or version >= list_version:
                    continue
                owners.update(self._owners(kind, obj_key[1:], packed))
                pruned.append(obj_key[1:])
                self._content.pop(obj_key, None)  # gone without a delete event: its content stamp too
                for name in INDEX_NAMES:
                    self._indexes[name].discard(obj_key)
            # The overlay too: a ConfigMap read directly (newly referenced) stays there until a watch
            # event of it, which an unchanged ConfigMap never gets; an own write whose object went.
            for key, entry in list(self._overlay.items()):
                if key[0] != kind or key[1:] in listed or _absent(entry):
                    continue
                version = _version(entry)
                if version is None or version >= list_version:
                    continue
                del self._overlay[key]
                owner = owner_of(entry.unpack()) if isinstance(entry, Packed) and kind in _CHILD_KINDS else None
                owners.update(self._owners(kind, key[1:], entry._replace(owner=owner)))
                if kind == KIND:
                    pruned.append(key[1:])
            # Reads of these owners' inputs changed, and of a pruned PDDeployment itself.
            for key in owners | set(pruned if kind == KIND else ()):
                self._epochs[key] = self._epochs.get(key, 0) + 1
        return owners

    def _key_for(self, kind: str, obj_key: tuple) -> tuple:
        """The index key under which ``obj_key``'s value is found (for :meth:`prune`)."""
        if kind in (KIND, "ConfigMap"):
            return obj_key[1:]
        if kind == "Pod":
            keys = self._indexes[POD_INDEX]._keys_of.get(obj_key) or ()
            return next(iter(keys), None)
        return obj_key

    def _owners(self, kind: str, key: tuple[str, str], obj: Packed) -> set[tuple[str, str]]:
        if kind == "ConfigMap":
            return {(key[0], name) for name in self._references.get(key, ())}
        if kind == KIND or obj.owner is None:
            return set()
        if kind == "Pod":
            store = self._indexes[INSTANCE_INDEX].get((key[0], obj.owner))
            return {(key[0], name) for name in (store or ())}
        return {(key[0], obj.owner)}

    def last_known(self, kind: str, namespace: str, name: str) -> dict | None:
        """What the indexes hold of any object of ``kind`` (a PDDeployment, a child, a pod: its
        :func:`pod_view`, a referenced ConfigMap), without the overlay, or ``None``: for a deletion
        reported without the object (an informer's relist), to find its owner."""
        obj_key = (kind, namespace, name)
        index = {KIND: PDD_INDEX, "Pod": POD_INDEX, "ConfigMap": CONFIG_MAP_INDEX}.get(kind, CHILD_INDEX)
        with self._lock:
            packed = self._indexes[index].value(self._key_for(kind, obj_key), obj_key)
        return packed.unpack() if isinstance(packed, Packed) else None

    def config_map(self, namespace: str, name: str) -> tuple[bool, dict | None]:
        """``(known, ConfigMap)``: known is False when neither the index nor the overlay can say
        (a ConfigMap referenced since its last watch event): read it directly and :meth:`remember` it."""
        indexed, mine = self._read(CONFIG_MAP_INDEX, (namespace, name), ("ConfigMap", namespace, name))
        if indexed is None and mine is None:
            return False, None
        return True, self._newer(indexed, mine)

    def has_config_maps(self) -> bool:
        """Whether any ConfigMap is cached, indexed or read directly (the resync then checks them
        against a list)."""
        with self._lock:
            return bool(self._indexes[CONFIG_MAP_INDEX].objects()) or any(
                key[0] == "ConfigMap" and not _absent(entry) for key, entry in self._overlay.items())

    def overlay_size(self) -> int:
        """Entries kept in the overlay (tests, logs)."""
        with self._lock:
            return len(self._overlay)
