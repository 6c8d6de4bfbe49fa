"""Required node affinity and required pod affinity read as kube-scheduler's NodeAffinity and InterPodAffinity
filters apply them, through ``pdd check`` on hostNetwork Deployment pairs as users write them, and what that
placement means for a loopback NIXL side-channel host (issue 9: an error only where the pods can never share a
node, a warning where the scheduler decides, nothing where they must share one).

Each way of writing a constraint has a negative control that does not decide the placement."""

from __future__ import annotations

import pytest

from pdd_operator.compat.placement import node_terms, nodes_disjoint, pinned_node
from tests.unit.test_anti_affinity import expr
from tests.unit.test_turn2_variants import KV, check, pd, rules

HOST = "kubernetes.io/hostname"
HOST_RULE = "side-channel-host-not-routable"
PORT_RULE = "side-channel-port-conflict"


def _pair(p_pod: dict | None, d_pod: dict | None, side_host: str | None = None, distinct_ports: bool = True,
          host_network: bool = True, replicas: tuple[int, int] = (1, 1)) -> list[dict]:
    """Two Deployments of one model on the host network (``host_network``) with extra pod-spec fields ``p_pod`` /
    ``d_pod``. ``side_host``: VLLM_NIXL_SIDE_CHANNEL_HOST (``None``: unset, vLLM's localhost). ``distinct_ports``:
    each role its own HTTP and side-channel port (so only the host is judged), else both on vLLM's defaults."""
    ports = ("8100", "8200") if distinct_ports else ("8000", "8000")
    docs = pd("l", ["--kv-transfer-config", KV, "--port", ports[0]], ["--kv-transfer-config", KV, "--port", ports[1]])
    for i, (doc, extra, n) in enumerate(zip(docs, (p_pod or {}, d_pod or {}), replicas, strict=True)):
        doc["spec"]["replicas"] = n
        spec = doc["spec"]["template"]["spec"]
        spec.update({"hostNetwork": host_network, **extra})
        env = [{"name": "UCX_NET_DEVICES", "value": "mlx5_0:1"}]
        if side_host is not None:
            env.append({"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": side_host})
        if distinct_ports:
            env.append({"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(5600 + 100 * i)})
        spec["containers"][0]["env"] = env
    return docs


def _host_verdict(tmp_path, capsys, p_pod=None, d_pod=None, **kw) -> str:
    """``ok`` (no side-channel host finding), ``warning`` or ``error``, with pdd check's exit code to match."""
    code, out = check(tmp_path, capsys, *_pair(p_pod, d_pod, **kw))
    assert len(out["results"]) == 1, out
    if HOST_RULE in rules(out, "error"):
        assert code == 1
        return "error"
    assert code == 0, out
    return "warning" if HOST_RULE in rules(out, "warning") else "ok"


def _port_verdict(tmp_path, capsys, p_pod=None, d_pod=None) -> str:
    """``apart`` (no port finding), ``warning`` or ``error`` for default side-channel ports on both hostNetwork pods
    (the side-channel host the node IP, so only the ports are judged)."""
    docs = _pair(p_pod, d_pod, side_host="x", distinct_ports=False)
    for doc in docs:
        doc["spec"]["template"]["spec"]["containers"][0]["env"][1] = {
            "name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}
    code, out = check(tmp_path, capsys, *docs)
    if PORT_RULE in rules(out, "error"):
        assert code == 1
        return "error"
    return "warning" if PORT_RULE in rules(out, "warning") else "apart"


def _node_affinity(*terms: dict, kind="requiredDuringSchedulingIgnoredDuringExecution") -> dict:
    if kind == "requiredDuringSchedulingIgnoredDuringExecution":
        return {"affinity": {"nodeAffinity": {kind: {"nodeSelectorTerms": list(terms)}}}}
    return {"affinity": {"nodeAffinity": {kind: [{"weight": 1, "preference": t} for t in terms]}}}


def _hosts(op: str, *names: str) -> dict:
    return {"matchExpressions": [expr(HOST, op, *names)]}


def _name(op: str, name: str) -> dict:
    return {"matchFields": [expr("metadata.name", op, name)]}


def _pod_affinity(selector: dict, key: str = HOST) -> dict:
    return {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": selector, "topologyKey": key}]}}}


def _anti(selector: dict) -> dict:
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": selector, "topologyKey": HOST}]}}}


PREFILL = {"matchLabels": {"app": "l", "llm-d.ai/role": "prefill"}}
DECODE = {"matchLabels": {"app": "l", "llm-d.ai/role": "decode"}}
BOTH = {"matchLabels": {"app": "l"}}


# --- a loopback side-channel host on hostNetwork pods ----------------------------------------------------------


@pytest.mark.parametrize("side_host", [None, "localhost", "127.0.0.1", "0.0.0.0"])
def test_unplaced_hostnetwork_pods_with_a_loopback_host_are_a_warning(tmp_path, capsys, side_host):
    # the scheduler may put both on one node, where the node's loopback reaches the peer's listener
    assert _host_verdict(tmp_path, capsys, side_host=side_host) == "warning"


def test_the_warning_says_the_scheduler_decides_and_how_to_pin(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_pair(None, None))
    finding = next(f for r in out["results"] for f in r["findings"] if f["rule"] == HOST_RULE)
    assert "scheduler" in finding["message"] and "kubernetes.io/hostname" in finding["fix"]


@pytest.mark.parametrize(("p_pod", "d_pod"), [
    ({"nodeSelector": {HOST: "a"}}, {"nodeSelector": {HOST: "b"}}),
    ({"nodeName": "a"}, {"nodeName": "b"}),
    (_node_affinity(_hosts("In", "a")), _node_affinity(_hosts("In", "b"))),
    (_node_affinity(_hosts("In", "a")), _node_affinity(_hosts("NotIn", "a"))),
    (_node_affinity(_name("In", "a")), {"nodeName": "b"}),
    (_anti(DECODE), None),
    (None, _anti(PREFILL)),
])
def test_pods_that_never_share_a_node_are_refused(tmp_path, capsys, p_pod, d_pod):
    assert _host_verdict(tmp_path, capsys, p_pod, d_pod) == "error"


@pytest.mark.parametrize(("p_pod", "d_pod"), [
    ({"nodeSelector": {HOST: "a"}}, {"nodeSelector": {HOST: "a"}}),
    ({"nodeName": "a"}, {"nodeName": "a"}),
    (_node_affinity(_hosts("In", "a")), {"nodeSelector": {HOST: "a"}}),
    (_node_affinity(_name("In", "a")), {"nodeName": "a"}),
    (None, _pod_affinity(PREFILL)),     # decode joins the prefill's node (it does not match its own term)
    (_pod_affinity(DECODE), None),
    (_pod_affinity(BOTH), _pod_affinity(BOTH)),  # each selects the other: whichever comes second joins the first
])
def test_pods_that_must_share_a_node_share_its_loopback(tmp_path, capsys, p_pod, d_pod):
    assert _host_verdict(tmp_path, capsys, p_pod, d_pod) == "ok"


@pytest.mark.parametrize(("p_pod", "d_pod"), [
    (_node_affinity(_hosts("In", "a", "b")), _node_affinity(_hosts("In", "b", "c"))),  # both may land on b
    (_node_affinity(_hosts("In", "a"), _hosts("In", "b")), _node_affinity(_hosts("In", "b"))),  # terms are ORed
    (_node_affinity(_hosts("NotIn", "a")), _node_affinity(_hosts("NotIn", "b"))),
    (_node_affinity(_hosts("In", "a"), kind="preferredDuringSchedulingIgnoredDuringExecution"),
     _node_affinity(_hosts("In", "b"), kind="preferredDuringSchedulingIgnoredDuringExecution")),  # scores only
    (None, _pod_affinity(BOTH)),  # decode matches its own term: it may start first, anywhere
    (None, _pod_affinity(PREFILL, key="topology.kubernetes.io/zone")),  # one zone, several nodes
    (_anti({"matchLabels": {"app": "other"}}), None),
])
def test_placement_the_scheduler_decides_is_a_warning(tmp_path, capsys, p_pod, d_pod):
    assert _host_verdict(tmp_path, capsys, p_pod, d_pod) == "warning"


def test_expressions_of_one_term_are_anded(tmp_path, capsys):
    # hostname In [a, b] AND NotIn [b] leaves a only; the decode on b never shares it
    p = _node_affinity({"matchExpressions": [expr(HOST, "In", "a", "b"), expr(HOST, "NotIn", "b")]})
    assert _host_verdict(tmp_path, capsys, p, {"nodeSelector": {HOST: "b"}}) == "error"
    assert _host_verdict(tmp_path, capsys, p, {"nodeSelector": {HOST: "a"}}) == "ok"
    p = _node_affinity({"matchExpressions": [expr(HOST, "In", "a", "b")]})
    assert _host_verdict(tmp_path, capsys, p, {"nodeSelector": {HOST: "b"}}) == "warning"


def test_a_role_with_more_replicas_than_one_node_holds_is_refused(tmp_path, capsys):
    # each replica binds the node's HTTP and side-channel ports: one per node, so some pair is on two nodes
    assert _host_verdict(tmp_path, capsys, replicas=(1, 2)) == "error"
    assert _host_verdict(tmp_path, capsys, replicas=(3, 1)) == "error"
    assert _host_verdict(tmp_path, capsys, replicas=(1, 1)) == "warning"


@pytest.mark.parametrize(("replicas", "want"), [
    (None, "warning"),          # no spec.replicas (an autoscaler's): 1 until scaled
    ("{{ .Values.decodeReplicas }}", "warning"),  # a chart's template: not known
    (2, "error"),
])
def test_replica_counts_as_written(tmp_path, capsys, replicas, want):
    docs = _pair(None, None)
    if replicas is None:
        del docs[1]["spec"]["replicas"]
    else:
        docs[1]["spec"]["replicas"] = replicas
    code, out = check(tmp_path, capsys, *docs)
    assert ("error" if HOST_RULE in rules(out, "error") else "warning" if HOST_RULE in rules(out) else "ok") == want


def test_replicas_of_nested_objects_multiply(tmp_path, capsys):
    # an AIBrix StormService: spec.replicas copies of the role set, each with the role's replicas
    def storm(total):
        roles = [{"name": r, "replicas": 1, "template": {"metadata": {"labels": {"app": "s"}}, "spec": {
            "hostNetwork": True, "containers": [doc["spec"]["template"]["spec"]["containers"][0]]}}}
            for r, doc in zip(("prefill", "decode"), _pair(None, None), strict=True)]
        return {"apiVersion": "orchestration.aibrix.ai/v1alpha1", "kind": "StormService", "metadata": {"name": "s"},
                "spec": {"replicas": total, "template": {"spec": {"roles": roles}}}}
    _, out = check(tmp_path, capsys, storm(1))
    assert HOST_RULE in rules(out, "warning") and HOST_RULE not in rules(out, "error")
    code, out = check(tmp_path, capsys, storm(2))
    assert code == 1 and HOST_RULE in rules(out, "error")


def _pddeployment(decode_replicas: int, placement: dict | None = None) -> dict:
    return {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "q"}, "spec": {
        "model": {"name": "Qwen/Qwen3-8B", "hfArchitecture": "Qwen3ForCausalLM", "numKvHeads": 8},
        "engine": {"image": "vllm/vllm-openai:v0.24.0",
                   "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "localhost"}]},
        "network": {"hostNetwork": True, "rdma": {"resourceName": "rdma/ib"}, "ucx": {"netDevices": "mlx5_0:1"}},
        **({"placement": placement} if placement else {}),
        "prefill": {"replicas": 1}, "decode": {"replicas": decode_replicas}}}


def test_a_pddeployment_reads_its_replicas_and_placement(tmp_path, capsys):
    # a user's localhost on a hostNetwork PDDeployment: the rendered pods are judged like any others
    _, out = check(tmp_path, capsys, _pddeployment(1))
    finding = next(f for r in out["results"] for f in r["findings"] if f["rule"] == HOST_RULE)
    assert finding["severity"] == "warning" and "spec.placement.topologyKey" in finding["fix"]
    code, out = check(tmp_path, capsys, _pddeployment(2))
    assert code == 1 and HOST_RULE in rules(out, "error")
    # required pod affinity of the whole deployment on the hostname: every pod joins the first one's node
    one_node = {"topologyKey": HOST, "topologyPolicy": "Required"}
    _, out = check(tmp_path, capsys, _pddeployment(1, one_node))
    assert HOST_RULE not in rules(out)
    _, out = check(tmp_path, capsys, _pddeployment(1, {**one_node, "topologyPolicy": "Preferred"}))
    assert HOST_RULE in rules(out, "warning")


def test_pods_without_the_host_network_are_refused_wherever_they_run(tmp_path, capsys):
    # separate network namespaces: loopback never reaches the other pod, even on one node
    one = {"nodeSelector": {HOST: "a"}}
    assert _host_verdict(tmp_path, capsys, one, one, host_network=False) == "error"
    assert _host_verdict(tmp_path, capsys, None, _pod_affinity(PREFILL), host_network=False) == "error"
    assert _host_verdict(tmp_path, capsys, host_network=False) == "error"


# --- the same placement decides hostNetwork side-channel port conflicts ----------------------------------------


@pytest.mark.parametrize(("p_pod", "d_pod", "want"), [
    (_node_affinity(_hosts("In", "a")), _node_affinity(_hosts("In", "b")), "apart"),
    (_node_affinity(_name("In", "a")), _node_affinity(_name("NotIn", "a")), "apart"),
    (_node_affinity({"matchExpressions": [expr("gpus", "Gt", "4")]}),
     _node_affinity({"matchExpressions": [expr("gpus", "Lt", "3")]}), "apart"),  # no label value is both
    (_node_affinity({"matchExpressions": [expr("pool", "Exists")]}),
     _node_affinity({"matchExpressions": [expr("pool", "DoesNotExist")]}), "apart"),
    (_node_affinity({"matchExpressions": [expr("gpus", "Gt", "4")]}),
     _node_affinity({"matchExpressions": [expr("gpus", "Lt", "6")]}), "warning"),  # 5 is both
    (_node_affinity({"matchExpressions": [expr("pool", "DoesNotExist")]}),
     _node_affinity({"matchExpressions": [expr("pool", "NotIn", "x")]}), "warning"),  # NotIn holds without the label
    (_node_affinity({"matchExpressions": [expr("gpus", "In", "eight")]}),
     _node_affinity({"matchExpressions": [expr("gpus", "Gt", "4")]}), "apart"),  # Gt needs an integer value
    (_node_affinity({"matchExpressions": [expr("pool", "In", "x")]}),
     _node_affinity({"matchExpressions": [expr("zone", "In", "y")]}), "warning"),  # one node may carry both
    (_node_affinity(_hosts("In", "a")), _node_affinity(_hosts("In", "a")), "error"),
    (None, _pod_affinity(PREFILL), "error"),
    (None, _pod_affinity(BOTH), "warning"),
])
def test_port_conflicts_follow_node_and_pod_affinity(tmp_path, capsys, p_pod, d_pod, want):
    assert _port_verdict(tmp_path, capsys, p_pod, d_pod) == want


# --- the reading itself ----------------------------------------------------------------------------------------


def test_node_terms_and_the_nodeselector_and_nodename_anded_into_each():
    spec = {"nodeSelector": {"pool": "gpu"}, "nodeName": "n1", **_node_affinity(_hosts("In", "a"), _hosts("In", "b"))}
    assert node_terms(spec) == (
        (("pool", "In", ("gpu",)), ("field:metadata.name", "In", ("n1",)), (HOST, "In", ("a",))),
        (("pool", "In", ("gpu",)), ("field:metadata.name", "In", ("n1",)), (HOST, "In", ("b",))),
    )
    # an empty term matches no node (k8s NodeSelectorTerm): only the other counts
    assert node_terms(_node_affinity({}, _hosts("In", "a"))) == (((HOST, "In", ("a",)),),)


@pytest.mark.parametrize("term", [
    {"matchFields": [expr("metadata.name", "In", "a", "b")]},   # one value only
    {"matchFields": [expr("metadata.uid", "In", "a")]},         # metadata.name only
    {"matchFields": [expr("metadata.name", "Exists")]},
    {"matchExpressions": [expr("gpus", "Gt", "four")]},
    {"matchExpressions": [expr(HOST, "In")]},
    {"matchExpressions": [expr(HOST, "Equals", "a")]},
])
def test_terms_the_apiserver_refuses_leave_the_placement_unknown(term):
    spec = _node_affinity(term)
    assert node_terms(spec) is None
    assert not nodes_disjoint(node_terms(spec), node_terms({"nodeName": "z"}))


def test_a_pinned_node_needs_every_term_to_name_it():
    assert pinned_node(node_terms(_node_affinity(_hosts("In", "a")))) == (HOST, "a")
    assert pinned_node(node_terms(_node_affinity(_hosts("In", "a"), _hosts("In", "b")))) is None
    assert pinned_node(node_terms(_node_affinity(_hosts("In", "a", "b")))) is None
    assert pinned_node(node_terms({"nodeName": "n"})) == ("field:metadata.name", "n")
    assert pinned_node(node_terms({})) is None


# --- whose side-channel host is dialed: the prefill's always, the decode's in push mode or bidirectional ---------

_POD_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


@pytest.mark.parametrize(("kv", "want"), [
    (KV, "ok"),  # pull: the decode handshakes with the prefill's listener; its own host goes nowhere
    ('{"kv_connector":"NixlPushConnector","kv_role":"kv_both"}', "error"),  # push: the prefill dials the decode
    ('{"kv_connector":"NixlConnector","kv_role":"kv_both",'
     '"kv_connector_extra_config":{"bidirectional_kv_xfer":true}}', "error"),  # the prefill reads a later turn's KV
])
def test_the_decodes_host_matters_only_where_the_prefill_dials_it(tmp_path, capsys, kv, want):
    """Pods in their own network namespaces, the prefill advertising its pod IP and the decode vLLM's default
    localhost: a refusal only where something dials the decode (vllm nixl pull_scheduler.py / push_scheduler.py)."""
    docs = _pair(None, None, host_network=False)
    for doc in docs:
        args = doc["spec"]["template"]["spec"]["containers"][0]["args"]
        args[args.index("--kv-transfer-config") + 1] = kv
    docs[0]["spec"]["template"]["spec"]["containers"][0]["env"].append(_POD_IP)
    code, out = check(tmp_path, capsys, *docs)
    errors = [f for r in out["results"] for f in r.get("findings", []) if f.get("rule") == HOST_RULE]
    if want == "ok":
        assert HOST_RULE not in rules(out), out
    else:
        assert code == 1 and HOST_RULE in rules(out, "error"), out
        assert errors and all("decode" in f["message"] for f in errors), errors
