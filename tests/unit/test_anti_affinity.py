"""Label selectors as Kubernetes evaluates them, and required pod anti-affinity as kube-scheduler applies it,
where the checker decides whether two hostNetwork pods can share a node (their NIXL side-channel ports then
clash). Each way of writing a term that keeps the pair apart has a negative control that does not."""

from __future__ import annotations

import pytest

from pdd_operator.api.selectors import selector_matches
from tests.unit.test_turn2_variants import KV, check, pd, rules

LABELS = {"app": "l", "llm-d.ai/role": "decode"}


def expr(key, op, *values):
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


@pytest.mark.parametrize(("selector", "want"), [
    (None, False),  # a null selector matches nothing
    ({}, True),  # an empty one everything
    ({"matchLabels": {"app": "l"}}, True),
    ({"matchLabels": {"app": "x"}}, False),
    ({"matchLabels": {"tier": "l"}}, False),
    ({"matchExpressions": [expr("llm-d.ai/role", "In", "prefill", "decode")]}, True),
    ({"matchExpressions": [expr("llm-d.ai/role", "In", "prefill")]}, False),
    ({"matchExpressions": [expr("tier", "In", "a")]}, False),
    ({"matchExpressions": [expr("llm-d.ai/role", "NotIn", "prefill")]}, True),
    ({"matchExpressions": [expr("llm-d.ai/role", "NotIn", "decode")]}, False),
    ({"matchExpressions": [expr("tier", "NotIn", "a")]}, True),  # NotIn holds for an absent key
    ({"matchExpressions": [expr("app", "Exists")]}, True),
    ({"matchExpressions": [expr("tier", "Exists")]}, False),
    ({"matchExpressions": [expr("tier", "DoesNotExist")]}, True),
    ({"matchExpressions": [expr("app", "DoesNotExist")]}, False),
    # matchLabels and matchExpressions are ANDed
    ({"matchLabels": {"app": "l"}, "matchExpressions": [expr("llm-d.ai/role", "In", "decode")]}, True),
    ({"matchLabels": {"app": "x"}, "matchExpressions": [expr("llm-d.ai/role", "In", "decode")]}, False),
    ({"matchLabels": {"app": "l"}, "matchExpressions": [expr("llm-d.ai/role", "In", "decode"), expr("app", "DoesNotExist")]},
     False),
    # selectors the apiserver refuses have no meaning
    ({"matchExpressions": [expr("app", "In")]}, None),
    ({"matchExpressions": [expr("app", "Exists", "l")]}, None),
    ({"matchExpressions": [expr("app", "Equals", "l")]}, None),
    ({"matchLabels": {"app": 1}}, None),
])
def test_selector_semantics_are_apimachinerys(selector, want):
    assert selector_matches(selector, LABELS) is want


def test_absent_keys_are_unknown_when_the_object_may_carry_more_labels():
    # a Deployment's pods carry pod-template-hash, which the manifest does not write
    for op in ("In", "NotIn", "Exists", "DoesNotExist"):
        sel = {"matchExpressions": [expr("pod-template-hash", op, *(["abc"] if op in ("In", "NotIn") else []))]}
        assert selector_matches(sel, LABELS, more_labels_possible=True) is None
    # a requirement on a written key that fails decides the AND regardless
    sel = {"matchLabels": {"app": "x"}, "matchExpressions": [expr("tier", "DoesNotExist")]}
    assert selector_matches(sel, LABELS, more_labels_possible=True) is False
    assert selector_matches({"matchExpressions": [expr("app", "NotIn", "x")]}, LABELS, more_labels_possible=True) is True


# --- placement through pdd check: two hostNetwork Deployments with the same side-channel ports ---------------


def _hostnet(p_pod=None, d_pod=None, namespace=None):
    docs = pd("l", ["--kv-transfer-config", KV, "--port", "8100"], ["--kv-transfer-config", KV, "--port", "8200"])
    for doc, extra in zip(docs, (p_pod or {}, d_pod or {}), strict=True):
        doc["spec"]["template"]["spec"].update({"hostNetwork": True, **extra})
        doc["spec"]["template"]["spec"]["containers"][0]["env"][0] = {
            "name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}
        if namespace is None:
            del doc["metadata"]["namespace"]
        else:
            doc["metadata"]["namespace"] = namespace
    return docs


def _anti(*terms, kind="requiredDuringSchedulingIgnoredDuringExecution"):
    return {"affinity": {"podAntiAffinity": {kind: list(terms)}}}


def _term(selector, key="kubernetes.io/hostname", **extra):
    return {"labelSelector": selector, "topologyKey": key, **extra}


def _verdict(tmp_path, capsys, p_pod=None, d_pod=None, namespace=None) -> str:
    """``apart`` (no port finding), ``warning`` (the scheduler decides) or ``error``."""
    code, out = check(tmp_path, capsys, *_hostnet(p_pod, d_pod, namespace))
    assert len(out["results"]) == 1, out
    if "side-channel-port-conflict" in rules(out, "error"):
        assert code == 1
        return "error"
    assert code == 0
    return "warning" if "side-channel-port-conflict" in rules(out, "warning") else "apart"


def test_without_constraints_the_scheduler_decides(tmp_path, capsys):
    assert _verdict(tmp_path, capsys) == "warning"


SELECTS_DECODE = [
    {"matchExpressions": [expr("llm-d.ai/role", "In", "decode")]},
    {"matchExpressions": [expr("llm-d.ai/role", "In", "decode", "prefill")]},
    {"matchExpressions": [expr("llm-d.ai/role", "NotIn", "prefill")]},
    {"matchExpressions": [expr("llm-d.ai/role", "Exists")]},
    {"matchLabels": {"app": "l"}, "matchExpressions": [expr("llm-d.ai/role", "In", "decode")]},
    {"matchLabels": {"app": "l"}},
    {},
]
MISSES_DECODE = [
    {"matchExpressions": [expr("llm-d.ai/role", "In", "prefill")]},
    {"matchExpressions": [expr("llm-d.ai/role", "NotIn", "decode")]},
    {"matchExpressions": [expr("llm-d.ai/role", "DoesNotExist")]},
    {"matchLabels": {"app": "other"}, "matchExpressions": [expr("llm-d.ai/role", "In", "decode")]},
    {"matchLabels": {"app": "l"}, "matchExpressions": [expr("llm-d.ai/role", "In", "decode"), expr("app", "DoesNotExist")]},
    # unknown: the pods may carry labels their manifest does not write
    {"matchExpressions": [expr("nvidia.com/dynamo-component-type", "In", "worker")]},
    {"matchExpressions": [expr("gpu-pool", "DoesNotExist")]},
    {"matchExpressions": [expr("llm-d.ai/role", "Gt", "1")]},  # refused by the apiserver: not judged
]


@pytest.mark.parametrize("selector", SELECTS_DECODE)
def test_a_prefill_term_selecting_decode_keeps_the_pair_apart(tmp_path, capsys, selector):
    assert _verdict(tmp_path, capsys, _anti(_term(selector))) == "apart"


@pytest.mark.parametrize("selector", [
    {"matchExpressions": [expr("llm-d.ai/role", "In", "prefill")]},
    {"matchExpressions": [expr("llm-d.ai/role", "NotIn", "decode")]},
    {"matchLabels": {"app": "l"}, "matchExpressions": [expr("llm-d.ai/role", "Exists")]},
])
def test_the_term_of_either_pod_counts(tmp_path, capsys, selector):
    # kube-scheduler also refuses a node whose existing pods' terms select the incoming pod
    assert _verdict(tmp_path, capsys, None, _anti(_term(selector))) == "apart"


@pytest.mark.parametrize("selector", MISSES_DECODE)
def test_a_term_not_certainly_selecting_the_peer_leaves_it_to_the_scheduler(tmp_path, capsys, selector):
    assert _verdict(tmp_path, capsys, _anti(_term(selector))) == "warning"


def test_only_the_hostname_topology_key_guarantees_different_nodes(tmp_path, capsys):
    sel = SELECTS_DECODE[0]
    # a node without the zone (or custom) label satisfies the term: both pods may land on it
    for key in ("topology.kubernetes.io/zone", "example.com/rack"):
        assert _verdict(tmp_path, capsys, _anti(_term(sel, key=key))) == "warning"
    # several terms: one on the hostname that selects the peer is enough
    assert _verdict(tmp_path, capsys, _anti(_term(sel, key="topology.kubernetes.io/zone"), _term(sel))) == "apart"


def test_preferred_anti_affinity_never_guarantees_separation(tmp_path, capsys):
    preferred = _anti({"weight": 100, "podAffinityTerm": _term(SELECTS_DECODE[0])},
                      kind="preferredDuringSchedulingIgnoredDuringExecution")
    assert _verdict(tmp_path, capsys, preferred, preferred) == "warning"


def test_a_null_label_selector_selects_no_pod(tmp_path, capsys):
    assert _verdict(tmp_path, capsys, _anti({"topologyKey": "kubernetes.io/hostname"})) == "warning"


def test_namespace_scope_of_the_term(tmp_path, capsys):
    sel = SELECTS_DECODE[0]
    assert _verdict(tmp_path, capsys, _anti(_term(sel, namespaces=["serving"])), namespace="serving") == "apart"
    assert _verdict(tmp_path, capsys, _anti(_term(sel, namespaces=["other"])), namespace="serving") == "warning"
    # the manifests write no namespace: whether it is "serving" is not known
    assert _verdict(tmp_path, capsys, _anti(_term(sel, namespaces=["serving"]))) == "warning"
    assert _verdict(tmp_path, capsys, _anti(_term(sel, namespaceSelector={}))) == "apart"  # every namespace
    by_name = {"matchLabels": {"kubernetes.io/metadata.name": "serving"}}
    assert _verdict(tmp_path, capsys, _anti(_term(sel, namespaceSelector=by_name)), namespace="serving") == "apart"
    assert _verdict(tmp_path, capsys, _anti(_term(sel, namespaceSelector=by_name)), namespace="other") == "warning"
    team = {"matchLabels": {"team": "ml"}}  # namespace labels are not in the files
    assert _verdict(tmp_path, capsys, _anti(_term(sel, namespaceSelector=team)), namespace="serving") == "warning"


def test_match_label_keys_extend_the_selector_with_the_pods_own_values(tmp_path, capsys):
    sel = SELECTS_DECODE[0]
    # both pods carry app=l: ``app In [l]`` still selects the decode
    assert _verdict(tmp_path, capsys, _anti(_term(sel, matchLabelKeys=["app"]))) == "apart"
    # ``llm-d.ai/role NotIn [prefill]`` holds for the decode too
    assert _verdict(tmp_path, capsys, _anti(_term(sel, mismatchLabelKeys=["llm-d.ai/role"]))) == "apart"
    # ``llm-d.ai/role In [prefill]`` no longer selects it
    assert _verdict(tmp_path, capsys, _anti(_term(sel, matchLabelKeys=["llm-d.ai/role"]))) == "warning"
    # pod-template-hash is added by the Deployment controller: its value is not in the files
    assert _verdict(tmp_path, capsys, _anti(_term(sel, matchLabelKeys=["pod-template-hash"]))) == "warning"


def test_pods_that_must_share_a_node_are_still_refused(tmp_path, capsys):
    pin = {"nodeSelector": {"kubernetes.io/hostname": "gpu-1"}}
    assert _verdict(tmp_path, capsys, pin, pin) == "error"
    assert _verdict(tmp_path, capsys, {**pin, **_anti(_term(MISSES_DECODE[0]))}, pin) == "error"
