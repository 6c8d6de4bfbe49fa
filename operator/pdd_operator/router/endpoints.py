"""Engine endpoints, the registry of the ready ones, and load-aware choice between them.

Prefill and decode endpoints are paired only when their compat hash (the ``pdd-operator.dev/compat-hash``
pod label: a hash of every setting that must match between P and D) is equal, so during a rollout KV
never moves between pods of incompatible revisions. Static endpoints have the empty hash and all pair.

Choice is "power of two choices" on the number of requests each endpoint has in flight through this
router: two random candidates, the less loaded one wins (ties: the first drawn, itself random).

An endpoint that could not be connected to is set aside for a few seconds (passive outlier ejection,
as Envoy's): discovery only drops a pod once the cluster marks it not Ready, which for a lost node
takes the node lifecycle controller's grace period (~40 s), and each try costs a refused connection
or, on a real network, the connect timeout. Set-aside endpoints are still chosen when no other is left.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from yarl import URL

from pdd_operator.api.constants import ROLES, other_role


@dataclass(eq=False)
class Endpoint:
    """One vLLM engine (a pod, or a static URL).

    Attributes:
        url: base URL, ``http://host:port`` (no trailing slash).
        role: ``prefill`` or ``decode``.
        compat_hash: value of the pod's compat-hash label; ``""`` for static endpoints.
        name: pod name (or the URL), for logs and metrics.
        engine_id: the NIXL ``engine_id`` of the engine process now serving this endpoint, as that
            engine itself reported it (``kv_transfer_params.remote_engine_id`` of a prefill answer;
            push mode, prefill only), or ``None`` while it is not known: then the router runs the
            request prefill first (:meth:`pdd_operator.router.proxy.Router._pull`) and learns it.
            Never taken from configuration: a restarted process draws a new one.
        instance: which process of the endpoint this is, as discovery sees it (pod UID and the engine
            container's restart count); a change forgets ``engine_id``. ``""`` for static endpoints.
        kv_host: the engine's NIXL side-channel host (push mode).
        kv_port: the engine's NIXL side-channel port (push mode).
        tp_size: tensor parallel size (push mode: decode is told prefill's).
        pp_size: pipeline parallel size (push mode).
        outstanding: requests in flight to this endpoint through this router.
        unreachable_until: ``time.monotonic()`` until which the endpoint is set aside (a connection
            to it failed); 0 when it is not.
    """

    url: str
    role: str
    compat_hash: str = ""
    name: str = ""
    engine_id: str | None = None
    instance: str = ""
    kv_host: str | None = None
    kv_port: int | None = None
    tp_size: int = 1
    pp_size: int = 1
    outstanding: int = field(default=0, compare=False)
    unreachable_until: float = field(default=0.0, compare=False)
    _targets: dict = field(default_factory=dict, repr=False, compare=False)

    def target(self, path: str) -> URL:
        """``url + path`` as a parsed URL, cached (parsing a URL per request costs measurable CPU)."""
        target = self._targets.get(path)
        if target is None:
            target = self._targets[path] = URL(self.url + path)
        return target

    @property
    def push_ready(self) -> bool:
        """Whether the router can drive the push protocol with this prefill endpoint: its side channel
        is known (the engine id is learned from the engine, see ``engine_id``)."""
        return bool(self.kv_host and self.kv_port)

    def update_from(self, other: Endpoint) -> None:
        """Take ``other``'s metadata, keeping this endpoint's in-flight count and, unless the process
        changed (``instance``), the engine id learned from it."""
        if other.instance != self.instance:
            self.engine_id = None
        for name in ("compat_hash", "name", "instance", "kv_host", "kv_port", "tp_size", "pp_size"):
            setattr(self, name, getattr(other, name))

    def forget_engine_id(self) -> None:
        """The process behind this endpoint may have been replaced (a connection to it failed): the
        next request learns its engine id again before decode is told it."""
        self.engine_id = None


def parse_static(role: str, spec: str) -> Endpoint:
    """An endpoint from ``--static-prefill``/``--static-decode``: ``http://host:port`` with optional
    push metadata as query parameters: ``?kv_host=H&kv_port=P&tp=N&pp=N``. An ``engine_id`` parameter
    (needed before this release) is accepted and ignored: the engine id is learned from the engine."""
    parts = urlsplit(spec.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.port is None:
        raise ValueError(f"{role} endpoint {spec!r}: expected http://HOST:PORT")
    q = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    url = f"{parts.scheme}://{parts.netloc}"
    return Endpoint(
        url=url, role=role, name=url, kv_host=q.get("kv_host"),
        kv_port=int(q["kv_port"]) if "kv_port" in q else None,
        tp_size=int(q.get("tp", 1)), pp_size=int(q.get("pp", 1)),
    )


class NoEndpoint(Exception):
    """No ready endpoint (pair) can serve the request; the message says which is missing.

    Attributes:
        missing: the role with no ready endpoint at all (``prefill`` or ``decode``), or ``None`` when
            both roles have some but none can serve (no common compat hash, every one tried failed, push
            metadata missing).
    """

    def __init__(self, message: str, missing: str | None = None) -> None:
        super().__init__(message)
        self.missing = missing


def reachable(candidates: list[Endpoint], now: float) -> list[Endpoint]:
    """``candidates`` not set aside at ``now`` (``time.monotonic()``), or all of them when every one is."""
    return [e for e in candidates if e.unreachable_until <= now] or candidates


def choose(candidates: list[Endpoint], rng: random.Random | None = None) -> Endpoint:
    """Power of two choices on ``outstanding``. ``candidates`` must not be empty."""
    if len(candidates) == 1:
        return candidates[0]
    r = rng or random
    a, b = r.sample(candidates, 2)
    return b if b.outstanding < a.outstanding else a


class Registry:
    """The ready endpoints of each role. Replaced wholesale by discovery; chosen from per request.

    Endpoint objects are kept across updates (keyed by URL), so in-flight counts survive a refresh.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._by_role: dict[str, dict[str, Endpoint]] = {r: {} for r in ROLES}
        self._rng = rng or random.Random()
        self.generation = 0

    def replace(self, role: str, endpoints: list[Endpoint]) -> None:
        """Set the ready endpoints of ``role`` (those not listed are dropped; requests in flight finish)."""
        old = self._by_role[role]
        new: dict[str, Endpoint] = {}
        for ep in endpoints:
            kept = old.get(ep.url)
            if kept is not None:
                kept.update_from(ep)
                ep = kept
            new[ep.url] = ep
        self._by_role[role] = new
        self.generation += 1

    def endpoints(self, role: str) -> list[Endpoint]:
        """The ready endpoints of ``role``."""
        return list(self._by_role[role].values())

    def pairs(self) -> int:
        """Number of (prefill, decode) pairs with equal compat hash."""
        decode: dict[str, int] = {}
        for d in self._by_role["decode"].values():
            decode[d.compat_hash] = decode.get(d.compat_hash, 0) + 1
        return sum(decode.get(p.compat_hash, 0) for p in self._by_role["prefill"].values())

    def pick_prefill(self, exclude: set[str] = frozenset(), push: bool = False) -> Endpoint:
        """Choose a prefill endpoint that has at least one decode endpoint of its compat hash.

        ``exclude``: URLs already tried for this request. ``push``: only endpoints whose
        side channel is known. Raises :class:`NoEndpoint` saying what is missing.
        """
        return choose(reachable(self._prefill_candidates(exclude, push), time.monotonic()), self._rng)

    def unservable(self, push: bool = False) -> NoEndpoint | None:
        """Why no P/D pair could serve a request now (its :class:`NoEndpoint`: message and missing
        role), or ``None`` when one could."""
        try:
            self._prefill_candidates(frozenset(), push)
        except NoEndpoint as exc:
            return exc
        return None

    def _prefill_candidates(self, exclude: set[str], push: bool) -> list[Endpoint]:
        prefill = self._by_role["prefill"]
        decode_hashes = {d.compat_hash for d in self._by_role["decode"].values()}
        if not prefill:
            raise NoEndpoint("no ready prefill endpoint", missing="prefill")
        if not decode_hashes:
            raise NoEndpoint("no ready decode endpoint", missing="decode")
        candidates = [p for p in prefill.values() if p.compat_hash in decode_hashes]
        if not candidates:
            raise NoEndpoint("no ready prefill and decode endpoints with the same compat hash "
                             f"(prefill: {sorted({p.compat_hash for p in prefill.values()})}, "
                             f"decode: {sorted(decode_hashes)})")
        if push:
            candidates = [p for p in candidates if p.push_ready]
            if not candidates:
                raise NoEndpoint("no ready prefill endpoint publishes its side channel (push mode)")
        candidates = [p for p in candidates if p.url not in exclude]
        if not candidates:
            raise NoEndpoint("every ready prefill endpoint failed for this request")
        return candidates

    def paired_elsewhere(self, compat_hash: str, push: bool = False) -> bool:
        """Whether a prefill endpoint of another compat hash than ``compat_hash`` has a decode endpoint of
        its own hash (and, with ``push``, publishes its side channel): a new P/D request could be served
        by a pair of another revision (:meth:`pdd_operator.router.proxy.Router._pull`, reason
        ``pair_gone``)."""
        try:
            candidates = self._prefill_candidates(frozenset(), push)
        except NoEndpoint:
            return False
        return any(p.compat_hash != compat_hash for p in candidates)

    def pick_decode(self, compat_hash: str, exclude: set[str] = frozenset()) -> Endpoint:
        """Choose a decode endpoint with ``compat_hash`` (``exclude``: URLs already tried for this
        request). Raises :class:`NoEndpoint`."""
        candidates = [d for d in self._by_role["decode"].values()
                      if d.compat_hash == compat_hash and d.url not in exclude]
        if not candidates:
            raise NoEndpoint(f"no ready decode endpoint with compat hash {compat_hash!r}")
        return choose(reachable(candidates, time.monotonic()), self._rng)

    def pick_alone(self, role: str, exclude: set[str] = frozenset()) -> Endpoint:
        """Choose an endpoint of ``role`` to serve a request alone, as a plain request (the other role
        has no usable endpoint: :meth:`pdd_operator.router.proxy.Router._alone`).

        Compat: the pairing rule still holds. While the other role has endpoints (Ready, but refusing
        connections), only endpoints of ``role`` with one of their compat hashes are chosen, so a request
        is not moved to an engine of another revision than the pairs it would have used; when the other
        role has none at all, any endpoint of ``role`` may serve. ``exclude``: URLs already tried.
        Raises :class:`NoEndpoint`.
        """
        hashes = {e.compat_hash for e in self._by_role[other_role(role)].values()}
        candidates = [e for e in self._by_role[role].values()
                      if (not hashes or e.compat_hash in hashes) and e.url not in exclude]
        if not candidates:
            raise NoEndpoint(f"no ready {role} endpoint can serve the request alone"
                             + (f" (compat hash {sorted(hashes)})" if hashes else ""), missing=role)
        return choose(reachable(candidates, time.monotonic()), self._rng)

    def all_set_aside(self, role: str) -> bool:
        """Whether every endpoint of ``role`` is set aside now (each refused a connection within the last
        ``unreachable_seconds``: :func:`reachable`); ``False`` when there is none."""
        eps = self._by_role[role].values()
        now = time.monotonic()
        return bool(eps) and all(e.unreachable_until > now for e in eps)

    def any_decode(self) -> Endpoint:
        """Any decode endpoint (for ``/v1/models``). Raises :class:`NoEndpoint`."""
        candidates = self.endpoints("decode")
        if not candidates:
            raise NoEndpoint("no ready decode endpoint")
        return choose(candidates, self._rng)
