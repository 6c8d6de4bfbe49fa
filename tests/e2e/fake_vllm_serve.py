"""TEST SUPPORT: ``vllm serve <rendered args>`` answered by the router tests' fake engine
(:mod:`tests.fakes.fake_engine`), for pods of the dev node agent that should start in a second.

The role comes from the rendered ``--kv-transfer-config`` (``kv_role`` kv_producer: prefill,
kv_consumer: decode), the address from ``--host``/``--port``, the advertised side-channel port from
``VLLM_NIXL_SIDE_CHANNEL_PORT``, the engine id from ``kv_transfer_config.engine_id``, else a new one per process (as vLLM
draws one). Pull mode only: a push-mode fake decode needs prefill's fake in the same process. Every
other flag is accepted and ignored: this is not vLLM and proves nothing about vLLM's arguments.
``FAKE_TOKENS``, ``FAKE_INTER_TOKEN_DELAY`` and ``FAKE_FIRST_TOKEN_DELAY`` (seconds) set the decode answer,
``FAKE_PREFILL_DELAY`` (seconds) the prefill leg; ``FAKE_REVISION``
(e.g. the pod's compat-hash label through the downward API) makes a decode refuse KV of another
revision (:attr:`tests.fakes.fake_engine.FakeEngine.revision`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid

from tests.fakes.fake_engine import FakeEngine, serve


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("command")
    p.add_argument("model")
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--kv-transfer-config", default="{}")
    args, _ = p.parse_known_args(argv)
    kv = json.loads(args.kv_transfer_config)
    role = {"kv_producer": "prefill", "kv_consumer": "decode"}[kv["kv_role"]]
    engine = FakeEngine(role=role, engine_id=kv.get("engine_id") or f"fake-{uuid.uuid4()}",
                        kv_port=int(os.environ.get("VLLM_NIXL_SIDE_CHANNEL_PORT", "5600")),
                        tokens=int(os.environ.get("FAKE_TOKENS", "16")),
                        inter_token_delay=float(os.environ.get("FAKE_INTER_TOKEN_DELAY", "0.01")),
                        first_token_delay=float(os.environ.get("FAKE_FIRST_TOKEN_DELAY", "0")),
                        prefill_delay=float(os.environ.get("FAKE_PREFILL_DELAY", "0")), record=False,
                        revision=os.environ.get("FAKE_REVISION", ""))

    async def run() -> None:
        await serve(engine, args.host, args.port)
        print(f"fake {role} engine on {args.host}:{args.port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


if __name__ == "__main__":
    main(sys.argv[1:])
