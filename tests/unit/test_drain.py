"""The engine pods' drain: how long, and the preStop program itself run against a /metrics server."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading

import pytest

from pdd_operator.render.drain import (
    ENGINE_SHUTDOWN_SECONDS,
    drain_seconds,
    pre_stop,
    termination_grace_seconds,
)
from pdd_operator.render.workloads import Owner, pod_template
from tests.helpers import make_spec


@pytest.mark.parametrize("patch, role, want", [
    ({}, "prefill", 30),
    ({}, "decode", 300),                                   # no maxModelLen
    ({"model": {"maxModelLen": 2048}}, "decode", 103),     # 2048 tokens at 20 tokens/s
    ({"model": {"maxModelLen": 128}}, "decode", 30),       # at least 30 s
    ({"model": {"maxModelLen": 131072}}, "decode", 600),   # at most 600 s
    ({"decode": {"drainSeconds": 7}}, "decode", 7),        # the field wins
    ({"prefill": {"drainSeconds": 0}}, "prefill", 0),
])
def test_drain_seconds(patch, role, want):
    spec = make_spec(**patch)
    assert drain_seconds(spec, role) == want
    assert termination_grace_seconds(spec, role) == want + ENGINE_SHUTDOWN_SECONDS


def test_pod_template_has_the_hook_and_the_grace_period():
    spec = make_spec(decode={"drainSeconds": 12})
    pod = pod_template(Owner("demo"), "decode", spec)["spec"]
    assert pod["terminationGracePeriodSeconds"] == 12 + ENGINE_SHUTDOWN_SECONDS
    assert pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"][:2] == ["python3", "-c"]
    off = pod_template(Owner("demo"), "prefill", make_spec(prefill={"drainSeconds": 0}))["spec"]
    assert "lifecycle" not in off["containers"][0]


class _Metrics(http.server.BaseHTTPRequestHandler):
    """vLLM's /metrics with ``busy`` running requests until ``polls_busy`` scrapes were answered."""

    polls: list[int] = []
    busy_polls = 0

    def do_GET(self):  # noqa: N802 - http.server's name
        self.polls.append(1)
        busy = 1 if len(self.polls) <= self.busy_polls else 0
        body = (f'vllm:num_requests_running{{engine="0",model_name="m"}} {busy}.0\n'
                'vllm:num_requests_waiting{engine="0",model_name="m"} 0.0\n'
                'vllm:num_requests_running_total 5.0\n').encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


@pytest.mark.parametrize("busy_polls, want_polls", [(0, 1), (3, 4)])
def test_prestop_program_waits_until_no_request_runs(busy_polls, want_polls):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    _Metrics.polls, _Metrics.busy_polls = [], busy_polls
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        hook = pre_stop(make_spec(decode={"drainSeconds": 30}), "decode", server.server_address[1])
        program = hook["exec"]["command"][2].replace("time.sleep(5)", "time.sleep(0)")  # skip the router notice
        env = {**os.environ, "VLLM_NIXL_SIDE_CHANNEL_HOST": "127.0.0.1"}
        subprocess.run([sys.executable, "-c", program], env=env, check=True, timeout=60)
    finally:
        server.shutdown()
    assert len(_Metrics.polls) == want_polls  # idle: one scrape; busy: until a scrape says 0


def test_prestop_program_ends_when_metrics_are_unreachable():
    hook = pre_stop(make_spec(decode={"drainSeconds": 30}), "decode", 9)  # nothing listens on port 9
    program = hook["exec"]["command"][2].replace("time.sleep(5)", "time.sleep(0)")
    env = {**os.environ, "VLLM_NIXL_SIDE_CHANNEL_HOST": "127.0.0.1"}
    assert subprocess.run([sys.executable, "-c", program], env=env, timeout=20).returncode == 0
