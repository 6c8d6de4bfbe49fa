"""The ``--all2all-backend`` values each vLLM release's parser accepts.

``ParallelConfig.all2all_backend`` is typed by the ``All2AllBackend`` Literal (vllm/config/parallel.py; an inline
``Literal[...] | None`` in 0.11.1-0.14.0), and vllm/engine/arg_utils.py turns a Literal into argparse ``choices``
(``literal_to_kwargs``: ``choices`` unless the hint also admits ``str``), so any other value stops the server at argument
parsing ("argument --all2all-backend: invalid choice", exit 2). The flag itself came in 0.11.1 (``cli-flag-not-yet``
judges it before). Read per release in the sdists named below; a patch release is taken to accept what the release of
its minor version read here accepts, and a minor version not read (0.15) is not judged.
"""

from __future__ import annotations

from pdd_operator.vllm.versions import Version

_BASE = ("naive", "pplx", "deepep_high_throughput", "deepep_low_latency", "allgather_reducescatter",
         "flashinfer_all2allv")
_R16 = (*_BASE, "mori")
_R18 = (*_R16, "nixl_ep", "flashinfer_nvlink_two_sided", "flashinfer_nvlink_one_sided")
_R23 = (*(b for b in _R18 if b != "mori"), "mori_high_throughput", "mori_low_latency")
_R24 = (*_R23, "deepep_v2")
_R31 = (*_R24, "moonep")
_R32 = (*_R31, "passthrough")
_R34 = (*_R32, "mori")

#: (major, minor) -> the values the parser accepts, read in the 0.11.1, 0.12.0, 0.13.0, 0.14.0, 0.16.0, 0.17.0,
#: 0.17.1, 0.18.0, 0.19.1, 0.20.0, 0.21.0, 0.22.0, ..., 0.34.0 sdists (config/parallel.py ``All2AllBackend``).
ALL2ALL_CHOICES: dict[tuple[int, int], frozenset[str]] = {
    **{(0, m): frozenset(_BASE) for m in (11, 12, 13, 14)},
    **{(0, m): frozenset(_R16) for m in (16, 17)},
    **{(0, m): frozenset(_R18) for m in (18, 19, 20, 21, 22)},
    (0, 23): frozenset(_R23),
    **{(0, m): frozenset(_R24) for m in range(24, 31)},
    (0, 31): frozenset(_R31),
    **{(0, m): frozenset(_R32) for m in (32, 33)},
    (0, 34): frozenset(_R34),
}
#: The first release with ``--all2all-backend``.
FLAG_SINCE: Version = (0, 11, 1)


def accepted_backends(version: Version | None) -> frozenset[str] | None:
    """The ``--all2all-backend`` values release ``version`` accepts, or ``None`` where that is not known here (no
    version, before the flag, a minor version not read)."""
    if version is None or version < FLAG_SINCE:
        return None
    return ALL2ALL_CHOICES.get((version[0], version[1]))

