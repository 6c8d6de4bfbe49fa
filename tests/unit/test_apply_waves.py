"""One reconcile's applies: independent children at once, a RoleBinding after its Role, a Deployment after
the ServiceAccount it runs as (not after that account's RoleBinding); every refusal reported, the rest applied.

The concurrency is checked against a real HTTP listener that answers like the apiserver (PATCH: the
object, 422 or 500; GET: 404), through the operator's real client."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pdd_operator import kubeclient
from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.controller.kube import Kube
from pdd_operator.controller.plan import apply_waves
from pdd_operator.controller.reconcile import APPLY_THREADS, apply_all
from pdd_operator.render.workloads import Owner, render_children
from tests.unit.test_cache import obj

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def children(**router) -> list[dict]:
    spec = yaml.safe_load((ROOT / "examples" / "cpu-tiny-pd.yaml").read_text())["spec"]
    spec["router"] = {**spec.get("router", {}), **router}
    return render_children(Owner(name="a", namespace="ns", uid="u", generation=1), PDDeploymentSpec.model_validate(spec))


def names(objs: list[dict], wave: list[int]) -> list[str]:
    return [f"{objs[i]['kind']}/{objs[i]['metadata']['name']}" for i in wave]


def test_a_pddeployment_s_children_go_in_two_waves():
    objs = children()
    assert [names(objs, w) for w in apply_waves(objs)] == [
        ["Service/a-prefill", "Deployment/a-prefill", "Service/a-decode", "Deployment/a-decode",
         "ServiceAccount/a-router", "Role/a-router", "Service/a-router"],
        ["RoleBinding/a-router", "Deployment/a-router"],
    ]


def test_a_router_running_as_the_user_s_account_needs_nothing_first():
    objs = children(serviceAccountName="mine")
    assert [names(objs, w) for w in apply_waves(objs)] == [
        ["Service/a-prefill", "Deployment/a-prefill", "Service/a-decode", "Deployment/a-decode", "Service/a-router",
         "Deployment/a-router"]]


SA = obj("ServiceAccount", "sa", 1)
ROLE = obj("Role", "r", 1)
BINDING = obj("RoleBinding", "rb", 1, roleRef={"kind": "Role", "name": "r"},
              subjects=[{"kind": "ServiceAccount", "name": "sa"}])
OTHER_BINDING = obj("RoleBinding", "other", 1, roleRef={"kind": "ClusterRole", "name": "r"},
                    subjects=[{"kind": "ServiceAccount", "name": "sa", "namespace": "elsewhere"}])


def runs_as(account: str | None, name: str = "d", ns: str = "ns") -> dict:
    pod = {"serviceAccountName": account} if account else {}
    return obj("Deployment", name, 1, ns=ns, spec={"template": {"spec": pod}})


@pytest.mark.parametrize(("objs", "waves"), [
    ([], []),
    ([ROLE, BINDING], [[0], [1]]),
    ([BINDING, ROLE], [[1], [0]]),  # plan order does not matter
    ([runs_as("sa"), SA], [[1], [0]]),
    ([runs_as("sa"), BINDING, ROLE, SA], [[2, 3], [0, 1]]),  # the account first; its binding is no wait
    ([runs_as(None), SA, ROLE, BINDING], [[0, 1, 2], [3]]),
    ([runs_as("sa"), OTHER_BINDING], [[0, 1]]),  # a ClusterRole, another namespace's account: no order
    ([runs_as("sa", ns="other"), SA], [[0, 1]]),  # another namespace's account of the same name
    ([runs_as("other"), SA, BINDING, ROLE], [[0, 1, 3], [2]]),
])
def test_apply_waves(objs, waves):
    assert apply_waves(objs) == waves


# --- against a listener that answers like the apiserver ----------------------------------------------

class Apiserver:
    """A threading HTTP server: GET -> 404; PATCH -> the status in ``answers`` by ``<resource>/<name>``
    or object name (default 200 with the object); the first PATCHes wait until ``together`` of them are
    in flight, and one named in ``hold`` until the request it names has started (each at most 30 s: the waits end
    as soon as the condition holds, and a loaded 2-core machine took more than 5 s to start seven threads)."""

    def __init__(self) -> None:
        self.answers: dict[str, int] = {}
        self.together = 1
        self.wait_s = 30.0  # how long a held PATCH waits for its group at most
        self.log: list[tuple[str, str]] = []  # ("start"|"end", name)
        self.resources: list[tuple[str, str]] = []  # ("start"|"end", "<resource>/<name>")
        self.hold: dict[str, str] = {}  # "<resource>/<name>" answers once the other has started
        self.in_flight = self.most = 0
        self.cond = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(404)
                self.send_header("Content-Type", "application/json")
                body = b'{"kind":"Status","code":404}'
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_PATCH(self):
                length = int(self.headers.get("Content-Length") or 0)
                sent = json.loads(self.rfile.read(length) or b"{}")
                resource, name = self.path.split("?")[0].rsplit("/", 2)[-2:]
                with outer.cond:
                    outer.log.append(("start", name))
                    outer.resources.append(("start", f"{resource}/{name}"))
                    outer.in_flight += 1
                    outer.most = max(outer.most, outer.in_flight)
                    outer.cond.notify_all()
                    if outer.cond.wait_for(lambda: outer.in_flight >= outer.together, timeout=outer.wait_s):
                        outer.together = 1  # only the first group is held
                    held = outer.hold.get(f"{resource}/{name}")
                    if held is not None:  # answer only once that other request has started
                        outer.cond.wait_for(lambda: ("start", held) in outer.resources, timeout=outer.wait_s)
                code = outer.answers.get(f"{resource}/{name}", outer.answers.get(name, 200))
                body = json.dumps({**sent, "metadata": {**sent.get("metadata", {}), "resourceVersion": "2"}}
                                  if code == 200 else {"kind": "Status", "code": code, "message": f"no {name}"}).encode()
                with outer.cond:
                    outer.in_flight -= 1
                    outer.log.append(("end", name))
                    outer.resources.append(("end", f"{resource}/{name}"))
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # listen() backlog: many clients connect at once (socketserver's default is 5)

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kube(self) -> Kube:
        conf = client.Configuration()
        conf.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        conf.connection_pool_maxsize = 32
        return Kube(kubeclient.TimeoutApiClient(conf, request_timeout=(5.0, 60.0)))

    def started(self, name: str) -> int:
        return self.log.index(("start", name))

    def ended(self, name: str) -> int:
        return self.log.index(("end", name))


@pytest.fixture
def apiserver() -> Iterator[Apiserver]:
    server = Apiserver()
    yield server
    server.server.shutdown()


def test_independent_applies_go_at_once_and_dependent_ones_after(apiserver):
    apiserver.together = 7  # every PATCH of the first wave waits until all seven are in flight
    objs = children()
    sent, errors, first = apply_all(apiserver.kube(), objs)
    assert (sent, errors) == (9, []) and first is not None
    assert apiserver.most == 7
    # the router's objects: ServiceAccount, Role and Service at once; then the RoleBinding and the
    # Deployment, after the Role's and the ServiceAccount's answers
    router = [what for what, name in apiserver.log if name == "a-router"]
    assert router[:6] == ["start"] * 3 + ["end"] * 3 and sorted(router[6:]) == ["end", "end", "start", "start"]


def test_a_refused_child_is_reported_in_plan_order_and_the_others_are_still_applied(apiserver):
    apiserver.answers = {"a-decode": 422, "a-prefill": 422}
    sent, errors, _ = apply_all(apiserver.kube(), children())
    assert sent == 5  # 9 children, 4 refused (a Service and a Deployment per engine role)
    assert [e.split(":")[0] for e in errors] == ["Service a-prefill", "Deployment a-prefill", "Service a-decode",
                                                "Deployment a-decode"]
    assert all("422" in e and "no a-" in e for e in errors)


def test_a_dependent_child_goes_as_soon_as_what_it_needs_is_answered(apiserver):
    """The router's Deployment is sent once its ServiceAccount is answered, while the decode Deployment
    (independent, slow) is still in flight: the longest chain sets a new object's time, not the slowest
    first apply plus a second round."""
    apiserver.hold = {"deployments/a-decode": "deployments/a-router"}
    sent, errors, _ = apply_all(apiserver.kube(), children())
    assert (sent, errors) == (9, [])
    order = apiserver.resources
    assert order.index(("start", "deployments/a-router")) > order.index(("end", "serviceaccounts/a-router"))
    assert order.index(("start", "deployments/a-router")) < order.index(("end", "deployments/a-decode"))
    assert order.index(("start", "rolebindings/a-router")) > order.index(("end", "roles/a-router"))


def test_an_apiserver_failure_stops_what_is_not_sent_and_is_raised_after_what_is_in_flight(apiserver):
    """A 500 for the router's ServiceAccount: the 7 independent applies were all sent, the Deployment
    that needs the account is never sent, and the 500 is raised (the reconcile is retried)."""
    apiserver.together = 7
    apiserver.answers = {"serviceaccounts/a-router": 500}
    with pytest.raises(ApiException) as raised:
        apply_all(apiserver.kube(), children())
    assert raised.value.status == 500
    starts = [what for event, what in apiserver.resources if event == "start"]
    assert "deployments/a-router" not in starts
    assert sorted(s for s in starts if s != "rolebindings/a-router") == sorted([
        "services/a-prefill", "deployments/a-prefill", "services/a-decode", "deployments/a-decode",
        "serviceaccounts/a-router", "roles/a-router", "services/a-router"])
    assert len(apiserver.resources) == 2 * len(starts)  # every request sent had ended when it was raised


def test_many_reconciles_never_have_more_applies_in_flight_than_the_apply_threads(apiserver):
    """Three times as many reconciles as apply threads, each applying one child (a spec change's usual
    single apply): the first PATCHes wait for one more than the pool can send, so with every apply on
    the pool the apiserver sees exactly APPLY_THREADS at once, never more (bench_scale's direct baseline
    gets that many threads: the operator's concurrency against the apiserver, whatever its workers)."""
    apiserver.together, apiserver.wait_s = APPLY_THREADS + 1, 1.0
    kube = apiserver.kube()
    service = next(c for c in children() if c["kind"] == "Service")
    outcomes: list[tuple[int, list[str]]] = []

    def one(i: int) -> None:
        sent, errors, _ = apply_all(kube, [{**service, "metadata": {**service["metadata"], "name": f"s{i}"}}])
        outcomes.append((sent, errors))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(3 * APPLY_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes) == [(1, [])] * (3 * APPLY_THREADS)
    assert apiserver.most == APPLY_THREADS
