"""Generate operator/pdd_operator/vllm/attention_backend_names.json: the ``AttentionBackendEnum`` member names of each
vLLM release.

Usage: ``python -m dev.gen_vllm_attention_backends operator/pdd_operator/vllm/attention_backend_names.json
[<release>=<vllm dir>...]`` (the releases as for :func:`dev.vllm_sdists.release_dirs`; none: the sdists 0.18.0-0.34.0,
downloaded to its cache).

``--attention-backend`` and ``--attention-config``'s ``backend`` are looked up as ``AttentionBackendEnum[value.upper()]``
(vllm/config/attention.py ``validate_backend_before``: 0.18.0 l.65-75, 0.26.0 l.116-126, 0.34.0 l.280-290; and
vllm/engine/arg_utils.py for the flag), and the enum's metaclass turns a missing name into ``ValueError("Unknown
attention backend: ...")`` (vllm/v1/attention/backends/registry.py ``_AttentionBackendEnumMeta.__getitem__``, 0.26.0
l.18-31); ``register_backend`` only overrides a member's class path, so the member names are fixed per release. The
names are the class-level assignments of ``AttentionBackendEnum`` in that file, read statically.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from dev.vllm_sdists import holding, read_member, walk, write_table


def read(vllm_dir: Path) -> set[str]:
    """The member names of ``AttentionBackendEnum`` in the release at ``vllm_dir``."""
    tree = ast.parse(read_member(vllm_dir, "v1/attention/backends/registry.py"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "AttentionBackendEnum":
            return {a.targets[0].id for a in node.body
                    if isinstance(a, ast.Assign) and isinstance(a.targets[0], ast.Name)}
    raise ValueError(f"no AttentionBackendEnum in {vllm_dir}")


def main(argv: list[str]) -> None:
    out, per = Path(argv[0]), walk(argv[1:], read)
    releases = list(per)
    write_table(out, "AttentionBackendEnum of vllm/v1/attention/backends/registry.py in each release's sdist (PyPI); "
                     "dev/gen_vllm_attention_backends.py", releases, backend=holding(per, releases))


if __name__ == "__main__":
    main(sys.argv[1:])
