"""vLLM's Rust frontend (``vllm-rs serve MODEL [frontend flags] -- [engine flags]``) on a release that has it.

The readers take a ``vllm-rs serve`` launch as the ``vllm serve`` whose engine it starts
(:func:`pdd_operator.vllm.script.entry_point`) and keep the program word (``RoleConfig.frontend``); whether the
release ships that program is :data:`pdd_operator.vllm.entrypoint.RUST_FRONTEND_SINCE` and
:data:`~pdd_operator.vllm.entrypoint.RUST_FRONTEND_ON_PATH_SINCE`.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import SCRIPT_KIND, Violation, rule
from pdd_operator.vllm.entrypoint import RUST_FRONTEND_ON_PATH_SINCE, RUST_FRONTEND_SINCE
from pdd_operator.vllm.versions import UPSTREAM_REPOSITORIES, fmt, image_repository


@rule(
    id="rust-frontend-unavailable", family="engine-args", severity="error",
    fields=("spec.engine.image",), in_manifest=("command", "args"),
    source=("vllm rust/src/cmd (the vllm-rs binary, Cargo.toml [[bin]] name = \"vllm-rs\", main.rs Command::Serve) and "
            "setup.py / docker/Dockerfile shipping it as vllm/vllm-rs, first in the 0.22.0 sdist (setup.py lines 38, "
            "1142-1156; Dockerfile line 511); none of it in 0.9.0-0.21.0; /usr/local/bin/vllm-rs linked from 0.31.0 "
            "(docker/Dockerfile line 1090)"),
    without_connector=True, one_engine=True,
    example="command: [vllm-rs, serve, Qwen/Qwen3-0.6B, --, --kv-transfer-config, ...] on vllm/vllm-openai:v0.20.0",
)
def check_rust_frontend(pair: PDPair) -> list[Violation]:
    """An engine started by ``vllm-rs serve`` runs a vLLM release that ships the ``vllm-rs`` program.

    Before 0.22.0 no vLLM release has it: on vLLM's own images (whose release is the tag) the shell finds no such
    command and the engine never starts, an error; elsewhere (a script's ``pip install vllm==X``, another image) a
    program of that name may come from somewhere else, a warning. On vllm/vllm-openai 0.22.0-0.30.x the binary is
    only in the package directory, not on ``PATH``: ``vllm-rs`` written as a bare name is not found there unless the
    image adds it (a warning); a path to it runs."""
    out: list[Violation] = []
    for r in pair.roles:
        if r.frontend is None or r.version is None:
            continue
        upstream = image_repository(r.image) in UPSTREAM_REPOSITORIES and r.workload_kind != SCRIPT_KIND
        fix = (f"Start the engine with `vllm serve` (the engine flags after `--` go on the same line), or use vLLM >= "
               f"{fmt(RUST_FRONTEND_SINCE)} ({fmt(RUST_FRONTEND_ON_PATH_SINCE)} for vllm-rs on the image's PATH).")
        if r.version < RUST_FRONTEND_SINCE:
            message = (f"{r.role}: `{r.frontend} serve` starts vLLM's Rust frontend, which vLLM {fmt(r.version)} does "
                       f"not have (the vllm-rs binary ships from {fmt(RUST_FRONTEND_SINCE)}): ")
            if upstream:
                out.append((message + f"{r.image} has no such command, so the container exits (command not found) "
                                      "and the engine never starts.", fix))
            else:
                out.append((message + "unless another program of that name is on PATH, the command is not found and "
                                      "the engine never starts.", fix, "warning"))
        elif (r.version < RUST_FRONTEND_ON_PATH_SINCE and "/" not in r.frontend and upstream
              and image_repository(r.image) == "vllm/vllm-openai"):
            out.append((f"{r.role}: `vllm-rs serve` on {r.image}: vLLM {fmt(r.version)}'s image keeps the vllm-rs "
                        f"binary in the package directory (<site-packages>/vllm/vllm-rs) and links it onto PATH only "
                        f"from {fmt(RUST_FRONTEND_ON_PATH_SINCE)}, so the bare name is not found unless the image "
                        "adds it.", "Call the binary by its path (python3 -c 'import vllm, os; print(os.path.dirname("
                        "vllm.__file__))'/vllm-rs), or use `vllm serve`.", "warning"))
    return out
