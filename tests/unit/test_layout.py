"""What ships, what is a developer tool, what is a test: the repository layout the README and the
package map describe is the one on disk, moved paths are not referenced any more, and tests that
need the shared material fail (never skip or collect nothing) without it.

The import directions (the package never imports tests/ or dev/; dev/ never imports tests/) are
import-linter contracts in pyproject.toml, run by ``make test`` before the tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pdd_operator
from tests.helpers import ROOT
from tests.unit import test_cases

#: Old locations of things that moved (issue 12, item 6); nothing may point at them any more.
MOVED = {
    "tests/cluster": "dev/cluster",
    "tests.vllm.local": "dev.cpu_example",
    "tests/vllm/local.py": "dev/cpu_example.py",
    "tests/vllm/launcher.py": "dev/vllm_launcher.py",
    "pdd_operator.router.fake_engine": "tests.fakes.fake_engine",
    "pdd_operator/router/fake_engine": "tests/fakes/fake_engine",
}


def tracked_files() -> list[str]:
    """Paths (relative to the repository root) of the files git tracks or would add (not ignored)."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if (ROOT / p).is_file()]


def readme_layout_rows() -> dict[str, str]:
    """``{path: kind}`` of the README's "## Layout" table."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\|\s*`([^`]+)`\s*\|\s*([^|]+?)\s*\|", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_readme_layout_covers_every_top_level_folder():
    top = {p.split("/", 1)[0] + "/" for p in tracked_files() if "/" in p}
    rows = readme_layout_rows()
    assert top <= set(rows), f"top-level folders missing from the README's layout table: {sorted(top - set(rows))}"
    missing = [path for path in rows if not (ROOT / path).exists()]
    assert not missing, f"the README's layout table names paths that do not exist: {missing}"
    kinds = {"ships", "dev tool", "test", "bench", "docs", "images", "examples", "crds", "ci"}
    odd = {path: kind for path, kind in rows.items() if kind not in kinds}
    assert not odd, f"layout rows with a kind outside {sorted(kinds)}: {odd}"


def test_package_map_covers_every_subpackage():
    pkg = ROOT / "operator" / "pdd_operator"
    names = {p.name for p in pkg.iterdir() if (p / "__init__.py").is_file()}
    names |= {p.stem for p in pkg.glob("*.py") if p.stem != "__init__"}
    listed = set(re.findall(r"^- ``(\w+)``", pdd_operator.__doc__, re.MULTILINE))
    assert names == listed, f"package map in pdd_operator/__init__.py: missing {sorted(names - listed)}, " \
                            f"extra {sorted(listed - names)}"


def test_fake_engine_is_not_shipped():
    assert not (ROOT / "operator" / "pdd_operator" / "router" / "fake_engine.py").exists()
    assert (ROOT / "tests" / "fakes" / "fake_engine.py").is_file()


def test_no_reference_to_moved_paths():
    this = os.path.relpath(__file__, ROOT)
    stale = []
    for rel in tracked_files():
        if rel == this:
            continue
        try:
            text = (ROOT / rel).read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for old, new in MOVED.items():
            for n, line in enumerate(text.splitlines(), 1):
                if old in line:
                    stale.append(f"{rel}:{n}: {old} (now {new})")
    assert not stale, "references to moved paths:\n" + "\n".join(stale)


def test_missing_shared_material_fails_the_case_tests(tmp_path):
    """With PDD_SHARED_DIR pointing at nothing, every test that reads the shared cases fails, naming the
    missing file and PDD_SHARED_DIR; none is skipped and the module still collects its tests."""
    absent = tmp_path / "no-shared-here"
    env = {**os.environ, "PDD_SHARED_DIR": str(absent)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfs", "--tb=line",
                           "tests/unit/test_cases.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]  # 1: tests failed (not 5: nothing collected; not 2: interrupted)
    summary = out.strip().splitlines()[-1]
    failed = int(re.search(r"(\d+) failed", summary).group(1))
    reads_cases = 1 + len(test_cases.TRANSLATIONS) + len(test_cases.FOREIGN)  # the coverage test + each case
    assert failed == reads_cases, summary
    assert "skipped" not in summary, summary
    assert f"{absent / test_cases.CASES_FILE} is missing" in out, out[-3000:]
    assert "PDD_SHARED_DIR" in out, out[-3000:]
