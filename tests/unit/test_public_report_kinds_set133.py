"""Variants of the kind of fault the hundred-and-thirty-third public-report set (tests/unit/data/public_reports_133)
found: a Python program that starts no vLLM engine (a disaggregation proxy that forwards each request to a prefill
server with ``max_tokens`` 1, then to a decode server, both started elsewhere: chaojun-zhang/vllm
pd_distributed/proxy_server_v2.py, a Quart app) is no YAML and configures no KV transfer, so it is nothing to check
(exit 4) as a shell script of the same kind is, not an unreadable input (exit 2).

Negative controls: Python that may start a vLLM engine (a ``vllm serve`` argument list or command string, an engine
constructor, an import of vllm) stays out of "nothing to check", and a Python launcher whose engines name a KV
connector stays "not checked"."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdd_operator.compat.python_inputs import starts_no_engine
from tests.unit.cli_check import check_text

SET = Path(__file__).parent / "data" / "public_reports_133" / "inputs"

#: Proxies in the styles P/D examples ship: a Quart app over aiohttp (the set's), a FastAPI app over httpx that sends
#: ``kv_transfer_params`` (vLLM's tests/v1/kv_connector/nixl_integration/toy_proxy_server.py), and a plain
#: http.server one whose docstring names vLLM.
QUART = (SET / "cz-proxy-server-v2-as-published.py").read_text()

FASTAPI = '''\
import argparse
import uuid

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

app = FastAPI()
parser = argparse.ArgumentParser()
parser.add_argument("--prefiller-host", default="localhost")
parser.add_argument("--prefiller-port", type=int, default=8100)
parser.add_argument("--decoder-host", default="localhost")
parser.add_argument("--decoder-port", type=int, default=8200)
args = parser.parse_args()


@app.post("/v1/completions")
async def completions(request: Request):
    req = await request.json()
    prefill = dict(req, max_tokens=1, stream=False,
                   kv_transfer_params={"do_remote_decode": True, "do_remote_prefill": False})
    async with httpx.AsyncClient() as client:
        resp = await client.post(f"http://{args.prefiller_host}:{args.prefiller_port}/v1/completions", json=prefill,
                                 headers={"X-Request-Id": str(uuid.uuid4())})
        req["kv_transfer_params"] = resp.json().get("kv_transfer_params")
        out = await client.post(f"http://{args.decoder_host}:{args.decoder_port}/v1/completions", json=req)
    return StreamingResponse(iter([out.content]))
'''

HTTP_SERVER = '''\
"""Round-robin proxy in front of vLLM prefill and decode instances (prefill: max_tokens=1; decode: the rest)."""
import json
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

PREFILL = ["http://10.0.0.1:8100", "http://10.0.0.2:8100"]
DECODE = ["http://10.0.0.3:8200"]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        first = dict(body, max_tokens=1)
        urllib.request.urlopen(urllib.request.Request(PREFILL[0] + self.path, json.dumps(first).encode()))
        out = urllib.request.urlopen(urllib.request.Request(DECODE[0] + self.path, json.dumps(body).encode())).read()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(out)


if __name__ == "__main__":
    HTTPServer(("0.0.0.0", 8000), Handler).serve_forever()
'''

#: Python that may start vLLM engines without a literal KV connector: whatever it starts is not "nothing to check"
#: by this kind (the values come at run time, or the command line is built when it runs).
MAY_START = {
    "popen-vllm-serve-argv": '''\
import subprocess
import sys


def start(role, port):
    return subprocess.Popen(["vllm", "serve", sys.argv[1], "--port", str(port), "--kv-transfer-config", sys.argv[2]])


procs = [start("prefill", 8100), start("decode", 8200)]
''',
    "os-system-command-string": '''\
import os


def launch(role: str, port: int) -> None:
    os.system(f"CUDA_VISIBLE_DEVICES={port % 2} python3 -m vllm.entrypoints.openai.api_server --port {port} &")


for role, port in (("prefill", 8100), ("decode", 8200)):
    launch(role, port)
''',
    "llm-from-config": '''\
import yaml
from vllm import LLM


def build(path):
    cfg = yaml.safe_load(open(path))
    return LLM(**cfg["engine"])


llm = build("prefill.yaml")
''',
}

#: A Python launcher that names a KV connector in the engines it starts: "not checked" (its values are not literal).
KV_LAUNCHER = '''\
import sys

from vllm import LLM
from vllm.config import KVTransferConfig


def run(role):
    ktc = KVTransferConfig(kv_connector="NixlConnector", kv_role=role)
    return LLM(model=sys.argv[1], kv_transfer_config=ktc)


run(sys.argv[2])
'''


def _check(tmp_path: Path, capsys, text: str, name: str = "proxy.py") -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, name)


@pytest.mark.parametrize("name", ["proxy.py", "disagg_proxy_server.py", "router"])
@pytest.mark.parametrize("text", [QUART, FASTAPI, HTTP_SERVER], ids=["quart", "fastapi-httpx", "http-server"])
def test_a_python_proxy_that_starts_no_engine_is_nothing_to_check(tmp_path, capsys, text, name):
    assert starts_no_engine(text)
    code, out = _check(tmp_path, capsys, text, name)
    assert code == 4 and not out.get("inputErrors") and not out["notChecked"] and not out["results"], out


@pytest.mark.parametrize("text", list(MAY_START.values()), ids=list(MAY_START))
def test_python_that_may_start_vllm_is_not_taken_for_nothing_to_check(tmp_path, capsys, text):
    assert not starts_no_engine(text)
    code, out = _check(tmp_path, capsys, text, "launch.py")
    assert code != 4 and (out.get("inputErrors") or out["notChecked"] or out["results"]), out


def test_a_python_launcher_naming_a_kv_connector_stays_not_checked(tmp_path, capsys):
    assert not starts_no_engine(KV_LAUNCHER)
    code, out = _check(tmp_path, capsys, KV_LAUNCHER, "launch.py")
    assert code == 3 and out["notChecked"], out


def test_source_that_does_not_parse_may_start_anything():
    assert not starts_no_engine("def f(:\n    pass\n")
