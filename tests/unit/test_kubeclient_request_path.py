"""The operator's request path (kubeclient.request): straight to the client's urllib3 pool manager, sending what
the generated client's own path sends (URL, headers, body, timeout), answering as it does."""

from __future__ import annotations

import io
import json

import orjson
import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pdd_operator import kubeclient


@pytest.mark.parametrize(("path", "params", "query", "url"), [
    ("/api/v1/namespaces/{namespace}/pods", {"namespace": "ns"}, [], "https://h:6443/api/v1/namespaces/ns/pods"),
    ("/apis/apps/v1/namespaces/{namespace}/deployments/{name}", {"namespace": "ns", "name": "a-decode"},
     [("fieldManager", "pdd-operator"), ("force", "true")],
     "https://h:6443/apis/apps/v1/namespaces/ns/deployments/a-decode?fieldManager=pdd-operator&force=true"),
    # a label selector's = and , are quoted as the client quotes them
    ("/api/v1/pods", None, [("labelSelector", "a=b,c=d")], "https://h:6443/api/v1/pods?labelSelector=a%3Db%2Cc%3Dd"),
    # a name is quoted whole (the client's safe_chars_for_path_param is empty): a / cannot make a new path
    ("/api/v1/namespaces/{namespace}/configmaps/{name}", {"namespace": "ns", "name": "a/b c"}, [],
     "https://h:6443/api/v1/namespaces/ns/configmaps/a%2Fb%20c"),
    ("/api/v1/pods", None, [("watch", True), ("limit", 500)], "https://h:6443/api/v1/pods?watch=true&limit=500"),
])
def test_request_url_is_the_generated_clients(path, params, query, url):
    assert kubeclient.request_url("https://h:6443", path, params, query) == url
    api = client.ApiClient(client.Configuration(host="https://h:6443"))
    _, generated, *_ = api.param_serialize(method="GET", resource_path=path, path_params=params,
                                           query_params=list(query))
    assert generated == url


@pytest.mark.parametrize(("body", "sent"), [
    (None, None),
    (b'{"kind":"Deployment"}', b'{"kind":"Deployment"}'),  # an apply body: as it is
    ({"status": {"observedGeneration": 2, "conditions": []}}, b'{"status":{"observedGeneration":2,"conditions":[]}}'),
    ({"message": "llama \U0001f999"}, '{"message":"llama \U0001f999"}'.encode()),
    # what orjson refuses goes as the standard library writes it
    ({"message": "half \ud83d"}, json.dumps({"message": "half \ud83d"}).encode()),
    ({"n": 2**70}, b'{"n": 1180591620717411303424}'),
])
def test_request_body(body, sent):
    assert kubeclient.request_body(body) == sent
    if sent is not None and not isinstance(body, bytes):
        assert json.loads(sent) == body


class _Pool:
    """A pool manager that records each request and answers ``status`` with ``data``."""

    def __init__(self, status: int = 200, data: bytes = b'{"metadata":{"name":"a"}}') -> None:
        self.status, self.data, self.sent = status, data, []

    def request(self, method, url, **kwargs):
        self.sent.append((method, url, kwargs))
        return urllib3.HTTPResponse(body=io.BytesIO(self.data), status=self.status, reason="Reason",
                                    headers={"Content-Type": "application/json"}, preload_content=True)


def _client(pool: _Pool, **conf) -> kubeclient.TimeoutApiClient:
    configuration = client.Configuration(host="https://h:6443", api_key={"authorization": "Bearer t0k"})
    for key, value in conf.items():
        setattr(configuration, key, value)
    api = kubeclient.TimeoutApiClient(configuration, request_timeout=(3.0, 7.0))
    api.rest_client.pool_manager = pool
    return api


def test_a_request_goes_to_the_pool_with_the_clients_url_headers_body_and_timeout():
    pool = _Pool()
    api = _client(pool)
    answer = kubeclient.request(api, "PATCH", "/apis/g/v1/namespaces/{namespace}/x/{name}/status",
                                path_params={"namespace": "ns", "name": "a"}, body={"status": {"a": 1}},
                                content_type="application/merge-patch+json")
    assert answer == {"metadata": {"name": "a"}}
    (method, url, kwargs), = pool.sent
    assert (method, url) == ("PATCH", "https://h:6443/apis/g/v1/namespaces/ns/x/a/status")
    assert kwargs["body"] == b'{"status":{"a":1}}'
    assert kwargs["headers"] == {"Accept": "application/json", "Content-Type": "application/merge-patch+json",
                                 "User-Agent": api.user_agent, "authorization": "Bearer t0k"}
    assert (kwargs["timeout"].connect_timeout, kwargs["timeout"].read_timeout) == (3.0, 7.0)


def test_the_token_hook_runs_for_every_request():
    pool, tokens = _Pool(), iter(["one", "two"])
    api = _client(pool)

    def refresh(configuration):
        configuration.api_key["authorization"] = f"Bearer {next(tokens)}"
    api.configuration.refresh_api_key_hook = refresh
    for _ in range(2):
        kubeclient.request(api, "GET", "/api/v1/pods")
    assert [kwargs["headers"]["authorization"] for _, _, kwargs in pool.sent] == ["Bearer one", "Bearer two"]


def test_a_body_without_a_content_type_is_json_and_a_get_has_neither():
    pool = _Pool()
    api = _client(pool)
    kubeclient.request(api, "POST", "/api/v1/namespaces/ns/events", body={"a": 1})
    kubeclient.request(api, "GET", "/api/v1/pods")
    assert pool.sent[0][2]["headers"]["Content-Type"] == "application/json"
    assert "Content-Type" not in pool.sent[1][2]["headers"] and pool.sent[1][2]["body"] is None


@pytest.mark.parametrize(("status", "data", "expected"), [
    (200, b"", None),
    (201, b'{"a":[1,2]}', {"a": [1, 2]}),
])
def test_answers(status, data, expected):
    assert kubeclient.request(_client(_Pool(status, data)), "GET", "/api/v1/pods") == expected


def test_a_refusal_raises_the_clients_api_exception_with_the_apiservers_body():
    body = orjson.dumps({"kind": "Status", "message": "Deployment.apps \"a\" is invalid", "code": 422})
    with pytest.raises(ApiException) as raised:
        kubeclient.request(_client(_Pool(422, body)), "PATCH", "/apis/apps/v1/namespaces/ns/deployments/a", body=b"{}",
                           content_type="application/apply-patch+yaml")
    assert raised.value.status == 422 and raised.value.reason == "Reason"
    assert json.loads(raised.value.body)["message"] == 'Deployment.apps "a" is invalid'


@pytest.mark.parametrize("conf", [{"client_go_retries": True}], ids=["client-go read retries"])
def test_a_client_set_up_in_a_way_the_path_does_not_reproduce_goes_the_clients_own_way(conf, monkeypatch):
    pool = _Pool()
    api = _client(pool, **conf)
    seen = []
    monkeypatch.setattr(kubeclient, "_request_generated", lambda *args: seen.append(args[1:3]) or "generated")
    assert kubeclient.request(api, "GET", "/api/v1/pods") == "generated"
    assert seen == [("GET", "/api/v1/pods")] and not pool.sent


def test_a_cookie_goes_the_clients_own_way_and_is_sent():
    pool = _Pool()
    api = _client(pool)
    api.cookie = "session=1"
    assert kubeclient.request(api, "GET", "/api/v1/pods") == {"metadata": {"name": "a"}}
    (_, _, kwargs), = pool.sent
    assert kwargs["headers"]["Cookie"] == "session=1"
