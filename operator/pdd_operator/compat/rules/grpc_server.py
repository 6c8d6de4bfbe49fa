"""vLLM's gRPC server judged by its own argument parser, not ``vllm serve``'s.

``python -m vllm.entrypoints.grpc_server`` (from 0.30.0 also ``vllm.entrypoints.launchers.grpc_server``) parses
``--host``, ``--port`` and the engine's arguments only (:mod:`pdd_operator.vllm.grpc_server`); the HTTP front end's
flags (``--api-key``, ``--tool-call-parser``, ``--api-server-count``, ...) are no options of it.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.grpc_server import GRPC_REFUSED, grpc_refused
from pdd_operator.vllm.versions import fmt


@rule(
    id="grpc-server-flag-unrecognised", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"), in_manifest=("args", "command"),
    source=("vllm/entrypoints/grpc_server.py main (0.14.0 l.492-520, 0.18.0 l.140-161, 0.25.0 l.168-189) and "
            "vllm/entrypoints/launchers/grpc_server.py main (0.30.0 l.168-189, 0.34.0 l.289-310): FlexibleArgumentParser "
            "with --host, --port and AsyncEngineArgs.add_cli_args only, no make_arg_parser (the HTTP front end's "
            "FrontendArgs, vllm/entrypoints/openai/cli_args.py 0.14.0-0.28.0, launchers/cli_args.py 0.29.0-0.32.0, "
            "common/cli_args.py 0.33.0-0.34.0): 'unrecognized arguments', exit 2; read per release in "
            "pdd_operator/vllm/grpc_server.py GRPC_REFUSED"),
    without_connector=True, one_engine=True,
    example="python3 -m vllm.entrypoints.grpc_server --model Qwen/Qwen3-8B --tool-call-parser hermes on 0.25.0",
)
def check_grpc_server_flags(pair: PDPair) -> list[Violation]:
    """An engine run by vLLM's gRPC server passes none of the HTTP front end's own flags that its release's gRPC
    parser does not define: an error on a release read whose gRPC parser refuses the flag (the server exits while
    parsing its arguments), a warning on an unknown release where some release read refuses it. Flags both parsers
    define (the engine's, ``--host``, ``--port``) are judged as for ``vllm serve``."""
    out: list[Violation] = []
    for r in pair.roles:
        for flag in r.grpc_flags:
            refused = grpc_refused(flag, r.version)
            if refused is False:
                continue
            first, last = GRPC_REFUSED[flag]
            span = f"{fmt(first)} to {fmt(last)}" if last else f"{fmt(first)} on"
            fix = (f"Remove {flag} from the {r.role} gRPC server's arguments (it is an option of vllm serve's HTTP "
                   "server, which the gRPC server does not run), or serve over HTTP with vllm serve.")
            if refused is None:
                out.append((f"{r.role}: {flag} is an option of vllm serve's HTTP front end that vLLM's gRPC server "
                            f"(python -m vllm.entrypoints.grpc_server) does not define in the releases read "
                            f"({span}): its parser stops with 'unrecognized arguments: {flag}' (exit 2) there. This "
                            "engine's vLLM version is unknown.", fix, "warning"))
                continue
            out.append((f"{r.role}: vLLM {fmt(r.version)}'s gRPC server (python -m vllm.entrypoints.grpc_server) "
                        f"parses --host, --port and the engine's arguments only; {flag} is an option of vllm "
                        f"serve's HTTP front end, so the parser stops with 'unrecognized arguments: {flag}' (exit 2) "
                        f"and the {r.role} server never starts.", fix))
    return out
