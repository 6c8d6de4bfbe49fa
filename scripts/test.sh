#!/usr/bin/env bash
# The whole test suite: ruff and the import contract, then unit tests (no cluster), then end-to-end tests on the real local control
# plane, which is built (first run) or reused, started, and stopped again at the end.
# pytest exit code 5 ("no tests collected") counts as a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh || exit 1
# Lint and the import contract (pyproject.toml [tool.importlinter]) before any test: a new import cycle,
# a forbidden dependency or a lint error fails the run.
.venv/bin/ruff check operator tests bench dev || exit 1
.venv/bin/lint-imports --no-cache || exit 1
started_here=0
if ! bash tests/cluster/cluster.sh status >/dev/null 2>&1; then started_here=1; fi
.venv/bin/pytest -p no:cacheprovider -q -rs tests "$@"
rc=$?
if [[ $started_here == 1 && -z "${PDD_KEEP_CLUSTER:-}" ]]; then bash tests/cluster/cluster.sh down >/dev/null 2>&1 || true; fi
if [[ $rc == 5 ]]; then echo "pytest collected no tests: failing" >&2; exit 1; fi
exit $rc
