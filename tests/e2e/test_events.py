"""End to end: the Events of a PDDeployment's life on the real apiserver (controller/events.py):
created, scaled, degraded, recovered, refused, recovered again, each once, and none from resyncs."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from tests.e2e.conftest import ROOT, condition, pdd_status, wait_for

pytestmark = pytest.mark.cluster

NAME = "llama-8b"
LLAMA = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())


def events(cluster, namespace: str) -> list[tuple[str, str, str]]:
    """``(type, reason, message)`` of the Events on the PDDeployment, oldest first."""
    items = cluster.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={NAME},"
                                               "involvedObject.kind=PDDeployment").items
    items.sort(key=lambda e: (e.first_timestamp or e.event_time, e.metadata.creation_timestamp))
    return [(e.type, e.reason, e.message) for e in items]


def reasons(cluster, namespace: str) -> Counter:
    return Counter(reason for _, reason, _ in events(cluster, namespace))


def apply(cluster, namespace: str, **spec_patch) -> None:
    doc = yaml.safe_load(yaml.safe_dump(LLAMA))
    for section, values in spec_patch.items():
        doc["spec"].setdefault(section, {}).update(values)
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))


def at(cluster, namespace: str, generation: int, type_: str, status: str, reason: str | None = None) -> dict:
    def check():
        st = pdd_status(cluster, namespace, NAME)
        c = condition(st, type_)
        return (st.get("observedGeneration") == generation and c.get("status") == status
                and (reason is None or c.get("reason") == reason) and st)
    return wait_for(check, 180, what=f"{type_}={status} {reason or ''} at generation {generation}")


def has_events(cluster, namespace: str, expected: dict[str, int]) -> Counter:
    return wait_for(lambda: (got := reasons(cluster, namespace)) == Counter(expected) and got, 30,
                    what=f"exactly the Events {expected} (got {dict(reasons(cluster, namespace))})")


def test_each_transition_is_one_event_and_a_resync_posts_none(cluster, operator, namespace):
    apply(cluster, namespace)
    at(cluster, namespace, 1, "Ready", "True")
    has_events(cluster, namespace, {"RolledOut": 1})

    apply(cluster, namespace, prefill={"replicas": 3})
    at(cluster, namespace, 2, "Ready", "True")
    has_events(cluster, namespace, {"RolledOut": 2, "Scaled": 1})
    assert ("Normal", "Scaled", "Scaled prefill from 2 to 3 replicas.") in events(cluster, namespace)

    # Degraded: no node has the GPU product asked for, so the new pods stay Pending; then back. (Not a
    # decode TP past the node's 8 GPUs: TP 16 against prefill TP 1 is refused on 0.20.2 by
    # hetero-tp-kv-replicated before any pod is made.)
    apply(cluster, namespace, prefill={"replicas": 3}, placement={"gpuProduct": "NVIDIA-B200"})
    at(cluster, namespace, 3, "Degraded", "True", "Unschedulable")
    has_events(cluster, namespace, {"RolledOut": 2, "Scaled": 1, "Unschedulable": 1})
    apply(cluster, namespace, prefill={"replicas": 3})
    at(cluster, namespace, 4, "Ready", "True")
    has_events(cluster, namespace, {"RolledOut": 3, "Scaled": 1, "Unschedulable": 1, "Recovered": 1})

    # Refused (an architecture vLLM's NixlConnector P/D cannot serve; only the operator's rules know), then fixed.
    apply(cluster, namespace, prefill={"replicas": 3},
          model={"name": "openai/whisper-large-v3", "hfArchitecture": "WhisperForConditionalGeneration"})
    st = at(cluster, namespace, 5, "Compatible", "False", "Incompatible")
    has_events(cluster, namespace, {"RolledOut": 3, "Scaled": 1, "Unschedulable": 1, "Recovered": 1,
                                    "Incompatible": 1})
    (refused,) = [e for e in events(cluster, namespace) if e[1] == "Incompatible"]
    assert refused[0] == "Warning" and refused[2].startswith("Generation 5 refused: [")
    assert condition(st, "Compatible")["message"] in refused[2]
    apply(cluster, namespace, prefill={"replicas": 3})
    at(cluster, namespace, 6, "Ready", "True")
    final = {"RolledOut": 4, "Scaled": 1, "Unschedulable": 1, "Recovered": 2, "Incompatible": 1}
    has_events(cluster, namespace, final)

    # Resyncs (every 2 s here) and reconciles with nothing to change post nothing.
    operator.wait_quiet()
    seen = operator.reconciles()
    wait_for(lambda: operator.reconciles() >= seen + 5, 60, what="five more reconciles")
    assert reasons(cluster, namespace) == Counter(final)
    assert all(t == "Normal" for t, r, _ in events(cluster, namespace) if r not in ("Unschedulable", "Incompatible"))
