"""How a finding and a refused field read, the same at every edge.

``pdd check``/``pdd render`` (cli), the admission webhook and the status conditions all print a
:class:`~pdd_operator.api.status.Finding` with :func:`finding_text` and name a field the API models
refuse with :func:`field_path` (through :func:`invalid_spec_findings`), so one bad field or one rule
reads the same wherever a user meets it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import ValidationError

from pdd_operator.api.status import Finding

#: Rule id of a field the API models refuse (pydantic validation of ``spec``). The webhook refuses
#: such a spec, ``pdd check`` reports it as an input error, and the operator reports it in status.
SPEC_INVALID_RULE = "spec-invalid"
#: Where :data:`SPEC_INVALID_RULE` comes from, for ``Finding.source``.
SPEC_INVALID_SOURCE = "PDDeployment API (operator/pdd_operator/api/spec.py)"

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def finding_text(finding: Finding) -> str:
    """One finding as one line: ``[rule-id] message Fix: fix`` (without `` Fix: ...`` when it has no fix).

    When neither the message nor the fix names any of the PDDeployment fields the finding looked at
    (``Finding.fields`` starting ``spec.``), they come first, as a refused field does
    (``[tp-divisibility] spec.prefill.tensorParallelSize, spec.decode.tensorParallelSize: Prefill TP 3 ...``), so
    that every refusal names its fields. Fields of other manifests (``Deployment/x spec.template...``) are left to
    the message and fix, which speak of that manifest.
    """
    said = f"{finding.message} {finding.fix}"
    named = [f for f in finding.fields if f.startswith("spec.")]
    prefix = f"{', '.join(named)}: " if named and not any(f in said for f in named) else ""
    text = f"[{finding.rule}] {prefix}{finding.message}"
    return f"{text} Fix: {finding.fix}" if finding.fix else text


def field_path(loc: Sequence[str | int], root: str = "spec") -> str:
    """The wire path of a field from a pydantic error location (``ValidationError.errors()[i]["loc"]``).

    Names join with dots, list indices are ``[0]``, and a map key that is not a plain name (such as
    ``nvidia.com/gpu``) is ``["nvidia.com/gpu"]``: ``("prefill", "tensorParallelSize")`` ->
    ``spec.prefill.tensorParallelSize``; ``("env", 0, "name")`` -> ``spec.env[0].name``. The
    location must use the wire (camelCase) names, as pydantic reports them for
    :class:`~pdd_operator.api.base.APIModel` input given by alias.
    """
    out = root
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f'["{part}"]'
    return out


def _explain_path(loc: Sequence[str | int], root: str) -> str:
    """The path ``kubectl explain`` takes: dotted names only, no list indices or map keys."""
    names = [str(p) for p in loc if isinstance(p, str) and _PLAIN_KEY.match(p)]
    return ".".join([root, *names]) if root else ".".join(names)


def invalid_spec_findings(exc: ValidationError, root: str = "spec") -> list[Finding]:
    """One :data:`SPEC_INVALID_RULE` error finding per distinct refused field of ``exc``.

    ``exc`` is what ``PDDeploymentSpec.model_validate`` raised for ``obj["spec"]``; each finding's
    message is ``<field path>: <pydantic's reason>.`` and its fix names what to do and where
    ``kubectl explain`` documents the field. Order follows ``exc.errors()``; duplicates (same path
    and reason) are dropped.
    """
    out: dict[str, Finding] = {}
    for err in exc.errors():
        loc = tuple(err["loc"])
        path = field_path(loc, root)
        reason = str(err["msg"]).rstrip()
        message = f"{path}: {reason}" + ("" if reason.endswith((".", "!", "?")) else ".")
        if err["type"] == "extra_forbidden":
            fix = (f"Remove {path} or correct its name; `kubectl explain pdd.{_explain_path(loc[:-1], root)}` "
                   "lists the fields.")
        elif err["type"] == "missing":
            fix = f"Set {path}; `kubectl explain pdd.{_explain_path(loc, root)}` describes it."
        else:
            fix = f"Correct {path}; `kubectl explain pdd.{_explain_path(loc, root)}` describes it."
        out.setdefault(message, Finding(
            rule=SPEC_INVALID_RULE, severity="error", fields=[path], message=message, fix=fix,
            source=SPEC_INVALID_SOURCE,
        ))
    return list(out.values())
