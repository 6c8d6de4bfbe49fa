"""NixlConnector P/D compatibility rules: rules as data plus small pure check functions.

Entry point: :func:`pdd_operator.compat.engine.evaluate` (spec -> findings for its vLLM version).
"""

from pdd_operator.compat.engine import CompatReport, evaluate

__all__ = ["CompatReport", "evaluate"]
