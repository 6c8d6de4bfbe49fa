"""Generate operator/pdd_operator/vllm/attention_backend_names.json: the ``AttentionBackendEnum`` member names of each
vLLM release.

Usage: ``python -m dev.gen_vllm_attention_backends operator/pdd_operator/vllm/attention_backend_names.json
<release>=<vllm dir>...`` (unpacked sdists, as for ``dev/gen_vllm_parser_names.py``; 0.18.0-0.34.0 read).

``--attention-backend`` and ``--attention-config``'s ``backend`` are looked up as ``AttentionBackendEnum[value.upper()]``
(vllm/config/attention.py ``validate_backend_before``: 0.18.0 l.65-75, 0.26.0 l.116-126, 0.34.0 l.280-290; and
vllm/engine/arg_utils.py for the flag), and the enum's metaclass turns a missing name into ``ValueError("Unknown
attention backend: ...")`` (vllm/v1/attention/backends/registry.py ``_AttentionBackendEnumMeta.__getitem__``, 0.26.0
l.18-31); ``register_backend`` only overrides a member's class path, so the member names are fixed per release. The
names are the class-level assignments of ``AttentionBackendEnum`` in that file, read statically.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path


def read(vllm_dir: Path) -> set[str]:
    """The member names of ``AttentionBackendEnum`` in the release at ``vllm_dir``."""
    tree = ast.parse((vllm_dir / "v1/attention/backends/registry.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "AttentionBackendEnum":
            return {a.targets[0].id for a in node.body
                    if isinstance(a, ast.Assign) and isinstance(a.targets[0], ast.Name)}
    raise ValueError(f"no AttentionBackendEnum in {vllm_dir}")


def main(argv: list[str]) -> None:
    out, pairs = Path(argv[0]), [a.split("=", 1) for a in argv[1:]]
    releases = [v for v, _ in pairs]
    per = {v: read(Path(d)) for v, d in pairs}
    names = sorted(set().union(*per.values()))
    out.write_text(json.dumps({
        "source": "AttentionBackendEnum of vllm/v1/attention/backends/registry.py in each release's sdist (PyPI); "
                  "dev/gen_vllm_attention_backends.py",
        "releases": releases, "backend": {n: [v for v in releases if n in per[v]] for n in names}}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
