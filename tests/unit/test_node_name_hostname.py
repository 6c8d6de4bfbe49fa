"""``spec.nodeName`` and the ``kubernetes.io/hostname`` label as two spellings of one node (compat/placement.py): a
pod placed by name and its peer by the label (``nodeSelector``, required node affinity) are on one node when the two
values are equal and on two when they differ, if the node's hostname label is its name (the kubelet's default, true
on kwok and most clusters). What follows only from that assumption is a warning that states it, never an error or a
silent pass; the same placement written one way on both pods keeps its certain verdict (negative controls)."""

from __future__ import annotations

import pytest

from pdd_operator.compat.placement import HOSTNAME_ASSUMPTION, hostname_assumed, may_share_node, node_terms, same_node
from tests.unit.test_placement_filters import (
    HOST,
    HOST_RULE,
    PORT_RULE,
    _host_verdict,
    _hosts,
    _name,
    _node_affinity,
    _pair,
    _port_verdict,
)
from tests.unit.test_turn2_variants import check, rules


class _Pod:
    """What placement reads of a pod (placement.Placed), from a pod spec."""

    def __init__(self, spec: dict):
        self.pod_labels, self.namespace, self.nodes = {}, "default", node_terms(spec)
        self.anti_affinity = self.pod_affinity = ()
        self.host_ports = frozenset()


BY_NAME_A = {"nodeName": "a"}
LABEL_A, LABEL_B = {"nodeSelector": {HOST: "a"}}, {"nodeSelector": {HOST: "b"}}


@pytest.mark.parametrize("label_a", [LABEL_A, _node_affinity(_hosts("In", "a"))])
def test_a_node_name_and_the_same_hostname_label_are_one_node(label_a):
    a, b = _Pod(BY_NAME_A), _Pod(label_a)
    assert same_node(a, b) and same_node(b, a) and hostname_assumed(a, b)
    assert not same_node(a, b, assume_hostname_is_name=False)


@pytest.mark.parametrize("other", [LABEL_B, _node_affinity(_hosts("NotIn", "a")), _node_affinity(_hosts("In", "b", "c"))])
def test_a_node_name_and_another_hostname_label_are_two_nodes(other):
    a, b = _Pod(BY_NAME_A), _Pod(other)
    assert not may_share_node(a, b) and hostname_assumed(a, b)
    assert may_share_node(a, b, assume_hostname_is_name=False)


@pytest.mark.parametrize(("p", "d"), [
    (BY_NAME_A, BY_NAME_A), (LABEL_A, LABEL_A), (_node_affinity(_name("In", "a")), BY_NAME_A),  # one spelling
    (BY_NAME_A, {"nodeName": "b"}), (LABEL_A, LABEL_B),
    (BY_NAME_A, {"nodeSelector": {"pool": "gpu"}}),  # another label: nothing to unify
    (BY_NAME_A, _node_affinity(_hosts("In", "a", "b"))),  # may or may not be a's node: no verdict either way
])
def test_one_spelling_or_nothing_to_unify_assumes_nothing(p, d):
    assert not hostname_assumed(_Pod(p), _Pod(d))


# --- through pdd check on hostNetwork Deployment pairs ------------------------------------------------------------


@pytest.mark.parametrize(("p_pod", "d_pod", "want"), [
    (BY_NAME_A, LABEL_A, "warning"),  # one node only by the assumption: not an error
    (_node_affinity(_hosts("In", "a")), BY_NAME_A, "warning"),
    (BY_NAME_A, LABEL_B, "warning"),  # two nodes by the assumption: still a warning, not silent
    (BY_NAME_A, BY_NAME_A, "error"),  # controls: one spelling
    (LABEL_A, LABEL_A, "error"),
    (BY_NAME_A, {"nodeName": "b"}, "apart"),
])
def test_port_conflicts_across_the_two_spellings(tmp_path, capsys, p_pod, d_pod, want):
    assert _port_verdict(tmp_path, capsys, p_pod, d_pod) == want


def test_the_port_warning_states_the_assumption(tmp_path, capsys):
    docs = _pair(BY_NAME_A, LABEL_A, side_host="x", distinct_ports=False)
    for doc in docs:
        doc["spec"]["template"]["spec"]["containers"][0]["env"][1] = {
            "name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}
    code, out = check(tmp_path, capsys, *docs)
    (finding,) = [f for r in out["results"] for f in r["findings"] if f["rule"] == PORT_RULE]
    assert code == 0 and finding["severity"] == "warning"
    assert "one node " + HOSTNAME_ASSUMPTION in finding["message"]


@pytest.mark.parametrize(("p_pod", "d_pod", "want"), [
    (BY_NAME_A, LABEL_A, "warning"),   # the loopback reaches the peer only if it is one node
    (LABEL_A, BY_NAME_A, "warning"),
    (BY_NAME_A, LABEL_B, "warning"),   # apart only if the label is the name: lowered from an error
    (BY_NAME_A, BY_NAME_A, "ok"),      # controls: one spelling
    (LABEL_A, LABEL_A, "ok"),
    (BY_NAME_A, {"nodeName": "b"}, "error"),
    (LABEL_A, LABEL_B, "error"),
])
def test_a_loopback_side_channel_host_across_the_two_spellings(tmp_path, capsys, p_pod, d_pod, want):
    assert _host_verdict(tmp_path, capsys, p_pod, d_pod) == want


def test_the_loopback_warning_names_both_spellings(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(BY_NAME_A, LABEL_A))
    messages = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == HOST_RULE]
    assert code == 0 and messages and all(HOSTNAME_ASSUMPTION in m and "spec.nodeName" in m for m in messages)
    assert HOST_RULE not in rules(out, "error")
