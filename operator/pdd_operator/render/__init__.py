"""Spec -> child objects, pure and deterministic: ``pdd render`` and the operator share this path."""

from pdd_operator.render.workloads import Owner, render_children

__all__ = ["Owner", "render_children"]
