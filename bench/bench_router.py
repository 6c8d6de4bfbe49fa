"""The P/D router's added latency, throughput and CPU cost, against decode directly and vLLM's toy proxy.

One run, loopback only, the same load on every path:

- ``direct``: client -> fake decode (no prefill leg at all: the floor);
- ``direct-pd``: the client itself sends the prefill leg, then the decode leg (what any P/D proxy must
  do, without a proxy: isolates the proxy's own cost);
- ``router``: client -> ``pdd router`` (a separate process) -> fake prefill, fake decode;
- ``toy-proxy``: client -> vLLM's ``toy_proxy_server.py`` -> the same fakes.

The fakes (:mod:`pdd_operator.router.fake_engine`, one process per role) speak the vLLM P/D protocol:
configurable prefill delay, tokens and inter-token delay. Each request is a streaming completion read to
its last byte. Per concurrency level (default 1, 16, 64, 256 streams) each path runs for a fixed time
after a warm-up; reported: p50/p99 latency, added latency against ``direct`` (and ``direct-pd``),
requests/s and its ratio to ``direct``, the router's throughput against the toy proxy's, and the CPU
seconds per 1,000 requests of the router process (and of the toy proxy process).

The toy proxy is fetched at run time from the vLLM source distribution on PyPI (file list from the
PyPI simple index, PEP 691; sha256 checked) and cached under ``~/.cache/pdd-operator/bench``, never
committed. ``pip download --no-binary :all: vllm==X`` would fetch the same file but then insists on
building the package's metadata, which needs torch, so the index is read directly. The toy proxy needs
fastapi, uvicorn and httpx: they are installed into a separate virtualenv in that cache (the project's
``.venv`` is not touched), or give ``--toy-python`` an interpreter that has them.

    .venv/bin/python bench/bench_router.py [--duration 3] [--concurrency 1,16,64,256] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import json
import os
import socket
import statistics
import subprocess
import sys
import tarfile
import time
import urllib.request
import venv
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("PDD_CACHE", Path.home() / ".cache" / "pdd-operator")) / "bench"
TOY_PATH = "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py"
TOY_DEPS = ["fastapi", "uvicorn[standard]", "httpx"]  # uvicorn[standard]: uvloop + httptools, as in vLLM
CLK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (and its reaped children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / CLK


def fetch_toy_proxy(version: str) -> Path:
    """``toy_proxy_server.py`` of vLLM ``version`` from its sdist on PyPI (cached)."""
    dest = CACHE / f"vllm-{version}" / "toy_proxy_server.py"
    if dest.exists():
        return dest
    name = f"vllm-{version}.tar.gz"
    req = urllib.request.Request("https://pypi.org/simple/vllm/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        files = [f for f in json.load(r)["files"] if f["filename"] == name]
    if not files:
        raise RuntimeError(f"PyPI has no {name}")
    print(f"fetching {name} from PyPI (toy proxy only, not kept) ...", flush=True)
    with urllib.request.urlopen(files[0]["url"], timeout=300) as r:
        data = r.read()
    want = files[0]["hashes"].get("sha256")
    if want and hashlib.sha256(data).hexdigest() != want:
        raise RuntimeError(f"{name}: sha256 mismatch")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.getmember(f"vllm-{version}/{TOY_PATH}")
        text = tar.extractfile(member).read()
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(text)
    return dest


def toy_python(given: str | None) -> str:
    """An interpreter with fastapi, uvicorn and httpx (a cached virtualenv, created when needed)."""
    if given:
        return given
    env_dir = CACHE / "toy-proxy-venv"
    py = env_dir / "bin" / "python"
    probe = [str(py), "-c", "import fastapi, uvicorn, httpx, uvloop"]
    if py.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return str(py)
    print(f"installing {', '.join(TOY_DEPS)} into {env_dir} (for the toy proxy only) ...", flush=True)
    venv.create(env_dir, with_pip=True, clear=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", *TOY_DEPS], check=True)
    return str(py)


async def wait_http(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as s:
        while True:
            try:
                async with s.get(url) as r:
                    if r.status < 500:
                        return
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not come up")
            await asyncio.sleep(0.05)


class Proc:
    def __init__(self, name: str, cmd: list[str]) -> None:
        self.name = name
        self.p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self) -> None:
        self.p.terminate()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


async def one_request(session: aiohttp.ClientSession, url: str, body: bytes, prefill: str | None) -> None:
    headers = {"Content-Type": "application/json"}
    if prefill is not None:  # direct-pd: the client runs the prefill leg itself
        req = json.loads(body)
        leg = {**req, "stream": False, "max_tokens": 1, "kv_transfer_params": {
            "do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
            "remote_block_ids": None, "remote_host": None, "remote_port": None}}
        async with session.post(prefill, data=json.dumps(leg).encode(), headers=headers) as r:
            kv = (await r.json())["kv_transfer_params"]
        body = json.dumps({**req, "kv_transfer_params": kv}).encode()
    async with session.post(url, data=body, headers=headers) as r:
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {(await r.read())[:200]!r}")
        data = await r.read()
    if not data.endswith(b"data: [DONE]\n\n"):
        raise RuntimeError(f"stream did not end with [DONE]: {data[-80:]!r}")


async def run_level(url: str, prefill: str | None, concurrency: int, duration: float, warmup: float,
                    body: bytes) -> dict:
    """``concurrency`` closed-loop streams: warm-up, then a ``duration`` window. Latency: requests started in
    the window (each waited for to its end); throughput: requests completed in the window."""
    latencies: list[float] = []
    errors = [0]
    done = [0]
    in_window = [0]
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        t_start = time.perf_counter()
        t_measure, t_end = t_start + warmup, t_start + warmup + duration

        async def worker() -> None:
            while True:
                t0 = time.perf_counter()
                if t0 >= t_end:
                    return
                try:
                    await one_request(session, url, body, prefill)
                except Exception as exc:  # noqa: BLE001 - count and keep going
                    errors[0] += 1
                    if errors[0] <= 3:
                        print(f"  error: {exc}", file=sys.stderr)
                    continue
                t1 = time.perf_counter()
                done[0] += 1
                if t_measure <= t1 < t_end:
                    in_window[0] += 1
                if t0 >= t_measure:
                    latencies.append(t1 - t0)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - t_start
    latencies.sort()
    if len(latencies) > 1:
        q = statistics.quantiles(latencies, n=100, method="inclusive")
        p50, p99 = q[49], q[98]
    else:
        p50 = p99 = latencies[0] if latencies else float("nan")
    return {"requests": done[0], "errors": errors[0], "measured": len(latencies),
            "rps": in_window[0] / duration, "p50_ms": p50 * 1e3, "p99_ms": p99 * 1e3, "elapsed": elapsed}


async def bench(args: argparse.Namespace) -> dict:
    levels = [int(x) for x in args.concurrency.split(",")]
    py = sys.executable
    procs: list[Proc] = []
    ports = {k: free_port() for k in ("prefill", "decode", "router", "toy")}
    fake = [py, "-m", "pdd_operator.router.fake_engine", "--tokens", str(args.tokens),
            "--inter-token-delay", str(args.inter_token_ms / 1e3), "--prefill-delay", str(args.prefill_ms / 1e3)]
    toy = None
    if not args.no_toy:
        try:
            toy = (toy_python(args.toy_python), fetch_toy_proxy(args.vllm_version))
        except Exception as exc:  # noqa: BLE001 - the rest of the benchmark still runs
            print(f"toy proxy unavailable, skipped: {exc}", file=sys.stderr)
    try:
        procs.append(Proc("prefill", fake + ["--role", "prefill", "--port", str(ports["prefill"])]))
        procs.append(Proc("decode", fake + ["--role", "decode", "--port", str(ports["decode"])]))
        pdd = str(Path(py).parent / "pdd")
        router = Proc("router", [pdd, "router", "--host", "127.0.0.1", "--port", str(ports["router"]),
                                 "--static-prefill", f"http://127.0.0.1:{ports['prefill']}",
                                 "--static-decode", f"http://127.0.0.1:{ports['decode']}", "--log-level", "WARNING"])
        procs.append(router)
        toy_proc = None
        if toy:
            toy_proc = Proc("toy-proxy", [toy[0], str(toy[1]), "--host", "127.0.0.1", "--port", str(ports["toy"]),
                                          "--prefiller-hosts", "127.0.0.1", "--prefiller-ports", str(ports["prefill"]),
                                          "--decoder-hosts", "127.0.0.1", "--decoder-ports", str(ports["decode"])])
            procs.append(toy_proc)
        await wait_http(f"http://127.0.0.1:{ports['prefill']}/health")
        await wait_http(f"http://127.0.0.1:{ports['decode']}/health")
        await wait_http(f"http://127.0.0.1:{ports['router']}/health")
        if toy_proc:
            await wait_http(f"http://127.0.0.1:{ports['toy']}/healthcheck")
        paths = {
            "direct": (f"http://127.0.0.1:{ports['decode']}/v1/completions", None, None),
            "direct-pd": (f"http://127.0.0.1:{ports['decode']}/v1/completions",
                          f"http://127.0.0.1:{ports['prefill']}/v1/completions", None),
            "router": (f"http://127.0.0.1:{ports['router']}/v1/completions", None, router),
        }
        if toy_proc:
            paths["toy-proxy"] = (f"http://127.0.0.1:{ports['toy']}/v1/completions", None, toy_proc)
        body = json.dumps({"model": "fake", "prompt": "x " * args.prompt_words, "max_tokens": args.tokens,
                           "stream": True}).encode()
        results: dict = {}
        for c in levels:
            results[c] = {}
            for name, (url, prefill, proc) in paths.items():
                cpu0 = cpu_seconds(proc.p.pid) if proc else 0.0
                r = await run_level(url, prefill, c, args.duration, args.warmup, body)
                if proc:
                    r["cpu_s_per_1k"] = (cpu_seconds(proc.p.pid) - cpu0) / max(r["requests"], 1) * 1000
                results[c][name] = r
                print(f"c={c:<4} {name:<10} {r['rps']:8.1f} req/s  p50 {r['p50_ms']:8.2f} ms  p99 {r['p99_ms']:8.2f} ms"
                      f"  errors {r['errors']}" + (f"  cpu {r['cpu_s_per_1k']:.2f} s/1k" if proc else ""), flush=True)
        return results
    finally:
        for p in reversed(procs):
            p.stop()


def report(results: dict, args: argparse.Namespace) -> str:
    lines = [
        f"load: streaming completions, {args.tokens} tokens, inter-token {args.inter_token_ms} ms, prefill delay "
        f"{args.prefill_ms} ms, {args.duration} s per point after {args.warmup} s warm-up; {os.cpu_count()} CPUs",
        "",
        "| streams | path | req/s | x direct | p50 ms | p99 ms | added p50 / p99 vs direct | "
        "added p50 / p99 vs direct-pd | CPU s / 1k req |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c, paths in results.items():
        base, pd = paths["direct"], paths["direct-pd"]
        for name, r in paths.items():
            added = f"{r['p50_ms'] - base['p50_ms']:+.2f} / {r['p99_ms'] - base['p99_ms']:+.2f}"
            added_pd = f"{r['p50_ms'] - pd['p50_ms']:+.2f} / {r['p99_ms'] - pd['p99_ms']:+.2f}"
            cpu = f"{r['cpu_s_per_1k']:.2f}" if "cpu_s_per_1k" in r else ""
            x_direct = r["rps"] / max(base["rps"], 1e-9)
            lines.append(f"| {c} | {name} | {r['rps']:.0f} | {x_direct:.2f} | {r['p50_ms']:.2f} | "
                         f"{r['p99_ms']:.2f} | {added} | {added_pd} | {cpu} |")
        if "toy-proxy" in paths:
            ratio = paths["router"]["rps"] / paths["toy-proxy"]["rps"] if paths["toy-proxy"]["rps"] else float("inf")
            lines.append(f"| {c} | router / toy-proxy throughput | {ratio:.2f}x"
                         " | | | | | | |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--concurrency", default="1,16,64,256", help="comma-separated concurrent streams")
    p.add_argument("--duration", type=float, default=3.0, help="measured seconds per path and level")
    p.add_argument("--warmup", type=float, default=0.5, help="warm-up seconds per path and level")
    p.add_argument("--tokens", type=int, default=16, help="tokens per answer")
    p.add_argument("--inter-token-ms", type=float, default=0.0,
                   help="fake decode's delay between tokens (default 0: tokens as fast as the fake can write them, "
                   "which isolates the proxies' own cost; asyncio sleeps of ~1 ms jitter more than that cost)")
    p.add_argument("--prefill-ms", type=float, default=0.0, help="fake prefill's delay")
    p.add_argument("--prompt-words", type=int, default=64)
    p.add_argument("--vllm-version", default="0.20.2", help="vLLM sdist to take the toy proxy from")
    p.add_argument("--toy-python", help="interpreter with fastapi, uvicorn and httpx for the toy proxy")
    p.add_argument("--no-toy", action="store_true", help="skip vLLM's toy proxy")
    p.add_argument("--json", help="also write the results as JSON to this file")
    args = p.parse_args()
    results = asyncio.run(bench(args))
    text = report(results, args)
    print()
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
