"""Which children a PDDeployment's render produced, so a reconcile that finds them all in place does
not render them again.

Rendering the 9 children (:func:`~pdd_operator.render.workloads.render_children`) is about a third
of a no-op reconcile's CPU (0.45 of 1.5 ms on the development machine, bench/README.md 2026-12-06),
and no-op reconciles are most of the operator's work: every child and pod event of an object and
every resync round reconciles it. Rendering is a pure function of the owner (name, namespace, uid,
generation: the apiserver raises ``metadata.generation`` on every spec change, so one generation of
one object has one spec), the revision slot and the model's config.json, which make the memo key.
What the memo keeps per key is small: each child's kind, name and applied hash
(:func:`~pdd_operator.controller.kube.applied_hash`), about 1.5 KiB for 9 children. When each of
them was last found in place at the content version the cache holds now (its resourceVersion but
for status-only updates: a new object's Deployment status updates do not render it again)
(:meth:`~pdd_operator.controller.kube.Kube.all_in_place`), the render would only lead to an apply
that sends nothing, so it is skipped; any other answer (a child edited, deleted, never compared, an
unknown key) renders as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.controller.kube import Kube, applied_hash
from pdd_operator.render.workloads import Owner, render_children

#: A render function as :func:`~pdd_operator.controller.plan.plan_children` calls it:
#: ``(owner, spec, model_config, slot) -> children``.
Render = Callable[[Owner, PDDeploymentSpec, "dict | None", str], list[dict]]


class RenderMemo:
    """The children (kind, name, applied hash) each render key produced, least recently used dropped
    beyond ``size`` entries (4,096: every object of a namespace of 1,000 with room for rollouts);
    thread-safe (the reconcile workers share it). Raises ``ValueError`` for ``size < 1``."""

    def __init__(self, size: int = 4096) -> None:
        if size < 1:
            raise ValueError(f"a memo needs room for at least one entry, got {size}")
        self.size = size
        self._entries: OrderedDict[tuple, tuple[tuple[str, str, str], ...]] = OrderedDict()
        self._lock = threading.Lock()
        #: Renders skipped and made (tests and the bench read them).
        self.skipped = 0
        self.rendered = 0

    def renderer(self, kube: Kube, config_key: str | None) -> Render:
        """A render function for one reconcile: ``[]`` when the children of this key are all in place
        in ``kube``'s cache (nothing to apply), else :func:`render_children`'s children (remembered).
        ``config_key``: the model's config.json as canonical JSON (``None``: no config.json)."""

        def render(owner: Owner, spec: PDDeploymentSpec, model_config: dict | None = None,
                   slot: str = "a") -> list[dict]:
            key = (owner, slot, config_key)
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
            if entry is not None and kube.all_in_place(owner.namespace, entry):
                with self._lock:
                    self.skipped += 1
                return []
            children = render_children(owner, spec, model_config, slot=slot)
            entry = tuple((c["kind"], c["metadata"]["name"], applied_hash(c)) for c in children)
            with self._lock:
                self.rendered += 1
                self._entries[key] = entry
                self._entries.move_to_end(key)
                while len(self._entries) > self.size:
                    self._entries.popitem(last=False)
            return children

        return render

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
