"""The P/D router's added latency, throughput and CPU cost, against decode directly and vLLM's toy proxy.

One run, loopback only, the same load on every path:

- ``direct``: client -> fake decode (no prefill leg at all: the floor);
- ``direct-pd``: the client itself sends the prefill leg, then the decode leg (what any P/D proxy must
  do, without a proxy: isolates the proxy's own cost);
- ``router``: client -> ``pdd router`` (a separate process) -> fake prefill, fake decode;
- ``toy-proxy``: client -> vLLM's ``toy_proxy_server.py`` -> the same fakes.

The fakes (``tests/fakes/fake_engine.py``, the router tests' fake engine, one process per role, on uvloop like vLLM's own
uvicorn server) speak the vLLM P/D protocol: configurable prefill delay, tokens and inter-token delay.
Each request is a streaming completion read to its last byte. Per concurrency level (default 1, 16, 64,
256 streams) every path runs for the same total time, split into interleaved rounds (so that a slow
moment of a shared machine does not land on one path only); reported: p50/p99 latency to the last byte
and to the first chunk (TTFT), added latency against ``direct-pd`` (the goal's baseline) and ``direct``,
requests/s and its ratio to ``direct``, the router's throughput against the toy proxy's, the CPU seconds
per 1,000 requests of the router process (and of the toy proxy process), and a met/missed line per goal.

The toy proxy is fetched at run time from the vLLM source distribution on PyPI (file list from the
PyPI simple index, PEP 691; sha256 checked) and cached under ``~/.cache/pdd-operator/bench``, never
committed. ``pip download --no-binary :all: vllm==X`` would fetch the same file but then insists on
building the package's metadata, which needs torch, so the index is read directly. The toy proxy needs
fastapi, uvicorn and httpx: they are installed into a separate virtualenv in that cache (the project's
``.venv`` is not touched), or give ``--toy-python`` an interpreter that has them.

    .venv/bin/python bench/bench_router.py [--duration 6] [--rounds 6] [--concurrency 1,16,64,256] [--json out.json]
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
    """A server process of the benchmark, optionally pinned to ``cpus``; its stderr goes to ``log``."""

    def __init__(self, name: str, cmd: list[str], cpus: set[int] | None = None) -> None:
        self.name = name
        self.log = CACHE / "logs" / f"{name}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as err:
            self.p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err,
                                      preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)

    def stop(self) -> None:
        self.p.terminate()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def cpu_split(pin: bool) -> tuple[set[int] | None, set[int] | None]:
    """(CPUs of the proxy under test, CPUs of everything else): the proxy gets the last CPU of its own,
    as a router pod has its own CPU in a cluster, so that what it adds is its own work rather than
    queueing behind the load generator and the fake engines. ``(None, None)``: no pinning."""
    cpus = sorted(os.sched_getaffinity(0))
    if not pin or len(cpus) < 2:
        return None, None
    return {cpus[-1]}, set(cpus[:-1])


async def one_request(session: aiohttp.ClientSession, url: str, body: bytes, prefill: str | None) -> tuple[float, float]:
    """One streaming completion read to its last byte; returns (time to first chunk, total) in seconds."""
    t0 = time.perf_counter()
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
        first = await r.content.readany()
        t_first = time.perf_counter()
        data = first + await r.read()
    if not data.endswith(b"data: [DONE]\n\n"):
        raise RuntimeError(f"stream did not end with [DONE]: {data[-80:]!r}")
    return t_first - t0, time.perf_counter() - t0


class PathStats:
    """What one path measured over all rounds of one concurrency level."""

    def __init__(self) -> None:
        self.total: list[float] = []
        self.ttft: list[float] = []
        self.seconds = 0.0
        self.errors = 0
        self.cpu = 0.0

    def summary(self) -> dict:
        def pct(xs: list[float], q: int) -> float:
            if len(xs) < 2:
                return xs[0] * 1e3 if xs else float("nan")
            return statistics.quantiles(xs, n=100, method="inclusive")[q - 1] * 1e3

        n = len(self.total)
        out = {"requests": n, "errors": self.errors, "rps": n / self.seconds if self.seconds else 0.0,
               "p50_ms": pct(self.total, 50), "p99_ms": pct(self.total, 99),
               "ttft_p50_ms": pct(self.ttft, 50), "ttft_p99_ms": pct(self.ttft, 99)}
        if self.cpu:
            out["cpu_s_per_1k"] = self.cpu / max(n, 1) * 1000
        return out


async def run_window(session: aiohttp.ClientSession, url: str, prefill: str | None, concurrency: int,
                     seconds: float, body: bytes, stats: PathStats | None) -> None:
    """``concurrency`` closed-loop streams for ``seconds``; each starts no request after that and the window
    ends when the last one is answered. Every request of the window is counted (``stats`` None: warm-up)."""
    t_end = time.perf_counter() + seconds
    t_start = time.perf_counter()

    async def worker() -> None:
        while time.perf_counter() < t_end:
            try:
                ttft, total = await one_request(session, url, body, prefill)
            except Exception as exc:  # noqa: BLE001 - count and keep going
                if stats is not None:
                    stats.errors += 1
                    if stats.errors <= 3:
                        print(f"  error: {exc}", file=sys.stderr)
                continue
            if stats is not None:
                stats.total.append(total)
                stats.ttft.append(ttft)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    if stats is not None:
        stats.seconds += time.perf_counter() - t_start


async def run_level(paths: dict, concurrency: int, args: argparse.Namespace, body: bytes) -> dict:
    """All paths at one concurrency level, interleaved: ``rounds`` rounds, each running every path for
    ``duration / rounds`` seconds in a rotated order, so that a slow moment of the machine falls on
    every path alike rather than on whichever ran then."""
    names = list(paths)
    stats = {name: PathStats() for name in names}
    sessions = {name: aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                            timeout=aiohttp.ClientTimeout(total=120)) for name in names}
    try:
        for name, (url, prefill, _proc) in paths.items():
            await run_window(sessions[name], url, prefill, concurrency, args.warmup, body, None)
        window = args.duration / args.rounds
        for rnd in range(args.rounds):
            for name in names[rnd % len(names):] + names[:rnd % len(names)]:
                url, prefill, proc = paths[name]
                cpu0 = cpu_seconds(proc.p.pid) if proc else 0.0
                await run_window(sessions[name], url, prefill, concurrency, window, body, stats[name])
                if proc:
                    stats[name].cpu += cpu_seconds(proc.p.pid) - cpu0
    finally:
        for session in sessions.values():
            await session.close()
    return {name: st.summary() for name, st in stats.items()}


async def bench(args: argparse.Namespace) -> dict:
    levels = [int(x) for x in args.concurrency.split(",")]
    py = sys.executable
    procs: list[Proc] = []
    ports = {k: free_port() for k in ("prefill", "decode", "router", "toy")}
    fake = [py, str(ROOT / "tests" / "fakes" / "fake_engine.py"), "--tokens", str(args.tokens),
            "--inter-token-delay", str(args.inter_token_ms / 1e3), "--prefill-delay", str(args.prefill_ms / 1e3)]
    toy = None
    if not args.no_toy:
        try:
            toy = (toy_python(args.toy_python), fetch_toy_proxy(args.vllm_version))
        except Exception as exc:  # noqa: BLE001 - the rest of the benchmark still runs
            print(f"toy proxy unavailable, skipped: {exc}", file=sys.stderr)
    proxy_cpus, load_cpus = cpu_split(args.pin)
    if load_cpus:
        os.sched_setaffinity(0, load_cpus)  # the load generator (this process)
    try:
        procs.append(Proc("prefill", fake + ["--role", "prefill", "--port", str(ports["prefill"])], load_cpus))
        procs.append(Proc("decode", fake + ["--role", "decode", "--port", str(ports["decode"])], load_cpus))
        pdd = str(Path(py).parent / "pdd")
        router = Proc("router", [pdd, "router", "--host", "127.0.0.1", "--port", str(ports["router"]),
                                 "--static-prefill", f"http://127.0.0.1:{ports['prefill']}",
                                 "--static-decode", f"http://127.0.0.1:{ports['decode']}", "--log-level", "WARNING",
                                 *args.router_arg],
                      proxy_cpus)
        procs.append(router)
        toy_proc = None
        if toy:
            toy_proc = Proc("toy-proxy", [toy[0], str(toy[1]), "--host", "127.0.0.1", "--port", str(ports["toy"]),
                                          "--prefiller-hosts", "127.0.0.1", "--prefiller-ports", str(ports["prefill"]),
                                          "--decoder-hosts", "127.0.0.1", "--decoder-ports", str(ports["decode"])],
                            proxy_cpus)
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
            results[c] = await run_level(paths, c, args, body)
            for name, r in results[c].items():
                print(f"c={c:<4} {name:<10} {r['rps']:8.1f} req/s  p50 {r['p50_ms']:8.2f} ms  p99 {r['p99_ms']:8.2f} ms"
                      f"  ttft p50 {r['ttft_p50_ms']:7.2f} ms  errors {r['errors']}"
                      + (f"  cpu {r['cpu_s_per_1k']:.2f} s/1k" if "cpu_s_per_1k" in r else ""), flush=True)
        return results
    finally:
        for p in reversed(procs):
            p.stop()


#: The issue's goals for the router (issue 5): added latency against the P/D protocol run by the client
#: itself (``direct-pd``), and throughput against vLLM's toy proxy.
GOALS = {"added_p50_ms": 1.0, "added_p99_ms": 3.0, "toy_ratio": 2.0}


def verdicts(results: dict) -> list[str]:
    """One line per concurrency level: each goal, what was measured, met or missed."""
    lines = []
    for c, paths in results.items():
        pd, router = paths["direct-pd"], paths["router"]
        a50, a99 = router["p50_ms"] - pd["p50_ms"], router["p99_ms"] - pd["p99_ms"]
        parts = [f"added p50 {a50:+.2f} ms ({'met' if a50 < GOALS['added_p50_ms'] else 'MISSED'}, goal < "
                 f"{GOALS['added_p50_ms']:g})",
                 f"added p99 {a99:+.2f} ms ({'met' if a99 < GOALS['added_p99_ms'] else 'MISSED'}, goal < "
                 f"{GOALS['added_p99_ms']:g})"]
        if "toy-proxy" in paths and paths["toy-proxy"]["rps"]:
            ratio = router["rps"] / paths["toy-proxy"]["rps"]
            parts.append(f"{ratio:.2f}x the toy proxy's req/s ({'met' if ratio >= GOALS['toy_ratio'] else 'MISSED'}, "
                         f"goal >= {GOALS['toy_ratio']:g}x)")
        lines.append(f"- {c} streams: " + "; ".join(parts))
    return lines


def report(results: dict, args: argparse.Namespace) -> str:
    lines = [
        f"load: streaming completions, {args.tokens} tokens, inter-token {args.inter_token_ms} ms, prefill delay "
        f"{args.prefill_ms} ms; per level {args.duration} s per path in {args.rounds} interleaved rounds after "
        f"{args.warmup} s warm-up; {os.cpu_count()} CPUs, "
        + ("the proxy under test pinned to a CPU of its own" if args.pin and os.cpu_count() > 1 else "no pinning"),
        "",
        "| streams | path | req/s | x direct | p50 ms | p99 ms | TTFT p50 ms | added p50 / p99 vs direct-pd | "
        "added TTFT p50 vs direct-pd | added p50 / p99 vs direct | CPU s / 1k req |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c, paths in results.items():
        base, pd = paths["direct"], paths["direct-pd"]
        for name, r in paths.items():
            added = f"{r['p50_ms'] - base['p50_ms']:+.2f} / {r['p99_ms'] - base['p99_ms']:+.2f}"
            added_pd = f"{r['p50_ms'] - pd['p50_ms']:+.2f} / {r['p99_ms'] - pd['p99_ms']:+.2f}"
            ttft_pd = f"{r['ttft_p50_ms'] - pd['ttft_p50_ms']:+.2f}"
            cpu = f"{r['cpu_s_per_1k']:.2f}" if "cpu_s_per_1k" in r else ""
            x_direct = r["rps"] / max(base["rps"], 1e-9)
            lines.append(f"| {c} | {name} | {r['rps']:.0f} | {x_direct:.2f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                         f"{r['ttft_p50_ms']:.2f} | {added_pd} | {ttft_pd} | {added} | {cpu} |")
    lines += ["", "Goals (issue 5; added latency is against direct-pd, the client running both legs itself):",
              *verdicts(results)]
    return "\n".join(lines)


def run_async(coro):
    """Run the client on uvloop when installed (less client CPU per request: more of both cores for the paths)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--concurrency", default="1,16,64,256", help="comma-separated concurrent streams")
    p.add_argument("--duration", type=float, default=6.0, help="measured seconds per path and level")
    p.add_argument("--rounds", type=int, default=6, help="interleaved rounds the duration is split into")
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
    p.add_argument("--router-arg", action="append", default=[],
                   help="an extra `pdd router` argument (repeat it), e.g. --router-arg=--no-resume")
    p.add_argument("--pin", action="store_true",
                   help="give the proxy under test the last CPU of its own, the client and the fake engines the "
                   "others (for machines with cores to spare: on a 2-vCPU VM an idle pinned CPU wakes slowly and "
                   "the router then measured 3x slower)")
    p.add_argument("--json", help="also write the results as JSON to this file")
    args = p.parse_args()
    results = run_async(bench(args))
    text = report(results, args)
    print()
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
