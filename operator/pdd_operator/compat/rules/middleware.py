"""An engine's ``--middleware`` must name a module its vLLM release ships (:mod:`pdd_operator.vllm.middleware`)."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.middleware import import_fails, shipped_in
from pdd_operator.vllm.versions import UPSTREAM_REPOSITORIES, fmt, image_repository


@rule(
    id="middleware-module-missing", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm/entrypoints/openai/api_server.py build_app (0.9.0 l.1128-1130, 0.20.0 l.301-303) and "
            "vllm/entrypoints/serve/middleware/register.py (0.34.0 l.65-67): importlib.import_module of each "
            "--middleware's module at startup; the modules under vllm.entrypoints of the sdists 0.9.0-0.34.0 "
            "(pdd_operator/vllm/entrypoint_modules.json, dev/gen_vllm_entrypoint_modules.py)"),
    without_connector=True, one_engine=True,
    example="--middleware vllm.entrypoints.openai.middleware.log_opc_header (OME's vLLM runtimes) on "
            "vllm/vllm-openai:v0.9.0.1",
)
def check_middleware_module(pair: PDPair) -> list[Violation]:
    """Each ``--middleware`` under ``vllm.entrypoints`` names a module the engine's vLLM release ships.

    The server imports every ``--middleware`` before it serves and stops with ``ModuleNotFoundError`` where the module
    is missing. Judged on upstream vLLM images only (a vendor's image, OME's own, may add modules): an error where the
    release lacks the module (for an unknown release: where no release read, 0.9.0-0.34.0, ships it), a warning where
    the release is unknown and only some releases ship it. Paths outside ``vllm.entrypoints`` are not judged.
    """
    out: list[Violation] = []
    for r in pair.roles:
        if image_repository(r.image) not in UPSTREAM_REPOSITORIES:
            continue
        for middleware in r.middleware:
            fails = import_fails(middleware, r.version)
            shipped = shipped_in(middleware) or ()
            if fails is False or (fails is None and (r.version is not None or not shipped)):
                continue
            module = middleware.rsplit(".", 1)[0]
            fix = fix_for(pair, f"Remove --middleware {middleware} from spec.{r.role}.extraArgs, or use an image that "
                                "ships the module.",
                          f"Remove --middleware {middleware} from the {r.role} container's arguments, or run an image "
                          f"that ships {module} (the runtime's vendor image, not {r.image}).")
            if fails is None:
                out.append((f"{r.role}: --middleware {middleware}: vLLM ships {module} only in {fmt(shipped[0])}-"
                            f"{fmt(shipped[-1])} of the releases read; this engine's vLLM version is unknown, so "
                            "whether its server can import it (and start) depends on the release.", fix, "warning"))
                continue
            where = (f"vLLM {fmt(r.version)} ({r.image}) ships no module {module}" if r.version is not None
                     else f"no vLLM release from 0.9.0 to 0.34.0 ships a module {module} ({r.image}; its release is "
                          "not known)")
            out.append((f"{r.role}: --middleware {middleware}: {where}, and the OpenAI server imports every "
                        "--middleware at startup, so it stops with ModuleNotFoundError before serving.", fix))
    return out
