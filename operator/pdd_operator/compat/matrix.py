"""The NixlConnector architecture x capability matrix (vLLM docs/features/nixl_connector_compatibility.md, the
'Model Architecture x Capability' table, 0.20.0-0.34.0; seed 000 section 1 is its 0.31-0.32 text), as data.

Cells: ``yes``, ``partial`` (a footnote's condition applies; the dedicated rules check it),
``no``, ``unknown`` (not verified) and ``in-progress``. ``CODE_OVERRIDES`` records where vLLM's code
of a given version does something else than the matrix says (compat-rules.md section 9); for those
cells the version-aware rules in :mod:`pdd_operator.compat.rules` decide instead of the matrix.
"""

from __future__ import annotations

from enum import StrEnum

from pdd_operator.api.spec import Architecture
from pdd_operator.vllm.versions import Version

#: The vLLM page the matrix and its footnotes are read from (first in 0.20.0; absent in 0.19.0).
DOC = "vLLM docs/features/nixl_connector_compatibility.md"


class Capability(StrEnum):
    """Columns of the matrix: P/D features a deployment may use."""

    BASIC = "basic P/D"
    SPEC_DECODE = "speculative decoding"
    HETERO_TP = "heterogeneous TP"
    CROSS_LAYER = "cross-layer blocks"
    SLIDING_WINDOW = "sliding window"
    HOST_BUFFER = "host buffer"
    HETERO_BLOCK = "heterogeneous block size"


class Cell(StrEnum):
    """A matrix cell's verdict."""

    YES = "yes"
    PARTIAL = "partial"
    NO = "no"
    UNKNOWN = "unknown"
    IN_PROGRESS = "in-progress"


_C, _A = Capability, Architecture
_ORDER = [_C.BASIC, _C.SPEC_DECODE, _C.HETERO_TP, _C.CROSS_LAYER, _C.SLIDING_WINDOW, _C.HOST_BUFFER, _C.HETERO_BLOCK]


def _row(*cells: str) -> dict[Capability, Cell]:
    return {cap: Cell(cell) for cap, cell in zip(_ORDER, cells, strict=True)}


#: Seed 000, section 1, row by row (footnote letters in compat-rules.md).
MATRIX: dict[Architecture, dict[Capability, Cell]] = {
    _A.DENSE: _row("yes", "yes", "yes", "yes", "yes", "yes", "partial"),
    _A.MLA: _row("yes", "yes", "partial", "yes", "yes", "yes", "partial"),
    _A.SPARSE_MLA: _row("yes", "yes", "partial", "yes", "yes", "yes", "partial"),
    _A.HYBRID_SSM: _row("yes", "unknown", "in-progress", "no", "yes", "yes", "no"),
    _A.MOE: _row("yes", "yes", "yes", "yes", "yes", "yes", "partial"),
    _A.MULTIMODAL: _row("unknown", "unknown", "unknown", "unknown", "unknown", "unknown", "unknown"),
    _A.ENCODER_DECODER: _row("no", "no", "no", "no", "no", "no", "no"),
}

#: (architecture, capability) -> first vLLM version whose code decides that cell itself.
#: Hybrid SSM heterogeneous TP: 3-read conv transfer from 0.20.0 (vllm-nixl-facts.md section 4.2);
#: hybrid SSM heterogeneous block size: HMA restriction removed in 0.27.0 (section 4.3).
CODE_OVERRIDES: dict[tuple[Architecture, Capability], Version] = {
    (_A.HYBRID_SSM, _C.HETERO_TP): (0, 18, 0),
    (_A.HYBRID_SSM, _C.HETERO_BLOCK): (0, 0, 0),
}


def cell(architecture: Architecture, capability: Capability) -> Cell:
    """Return the matrix cell for an architecture and capability."""
    return MATRIX[architecture][capability]


def overridden(architecture: Architecture, capability: Capability, version: Version | None) -> bool:
    """True when vLLM's code (of ``version``) rather than the matrix decides this cell.

    With an unknown version the override still holds: the dedicated rules then report that they
    could not be evaluated, which is more precise than the matrix's cell.
    """
    since = CODE_OVERRIDES.get((architecture, capability))
    return since is not None and (version is None or version >= since)
