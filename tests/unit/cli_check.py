"""Run ``pdd check`` in-process on an input a test writes, the way a user runs it on a file, and read its report.

One definition of "write the input to the test's ``tmp_path``, run ``pdd check <file> -o json``, parse the JSON
report" for the unit tests that check whole inputs (shell scripts, manifests, values files, compose files). The input
format is sniffed from the file's name and text as for a user's file, so the name matters: ``run.sh`` is read as a
shell script, ``*.yaml`` as manifests or values.

The report's shape (:mod:`pdd_operator.cli`): ``{"results": [{"object": ..., "findings": [{"rule", "severity",
"message", ...}, ...]}, ...]}``; the exit code is 0 (no error), 1 (an error), 3 (not checked), 4 (nothing to check)
or 2 (an input error).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from pdd_operator.cli import main


def check_text(tmp_path: Path, capsys, text: str, name: str = "run.sh", *extra: str) -> tuple[int, dict]:
    """Write ``text`` to ``tmp_path / name`` and run ``pdd check`` on it with ``extra`` options.

    Returns ``(exit code, report)``; the report is the parsed JSON ``pdd check -o json`` printed.
    """
    path = tmp_path / name
    path.write_text(text)
    code = main(["check", str(path), "-o", "json", *extra])
    return code, json.loads(capsys.readouterr().out)


def check_docs(tmp_path: Path, capsys, *docs: dict, name: str = "in.yaml", extra: tuple[str, ...] = (),
               sort_keys: bool = True) -> tuple[int, dict]:
    """Write ``docs`` as one multi-document YAML file (keys sorted unless ``sort_keys`` is false) and run
    ``pdd check`` on it with ``extra`` options."""
    return check_text(tmp_path, capsys, yaml.safe_dump_all(list(docs), sort_keys=sort_keys), name, *extra)


def rules(out: dict, severity: str | None = None) -> set[str]:
    """The rule ids of a report's findings, of one ``severity`` (``"error"``, ``"warning"``, ...) or of all."""
    return {f["rule"] for r in out.get("results", []) for f in r["findings"] if severity in (None, f["severity"])}


def rules_by_severity(out: dict) -> dict[str, set[str]]:
    """The rule ids of a report's findings by severity: ``{"error": {...}, "warning": {...}}`` (present ones only)."""
    found: dict[str, set[str]] = {}
    for r in out.get("results", []):
        for f in r["findings"]:
            found.setdefault(f["severity"], set()).add(f["rule"])
    return found
