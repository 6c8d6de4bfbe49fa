#!/usr/bin/env bash
# Create or refresh the project's virtual environment (.venv) with the operator and its test tools.
# Reinstalls only when pyproject.toml changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  "$PY" -m venv .venv
fi
stamp=".venv/.pdd-installed"
want="$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet -e '.[test,router]'
  # NIXL (with its bundled UCX) for the KV transport preflight tests on the CPU. --no-deps: the wheel
  # declares torch, which the preflight does not need; numpy it does.
  .venv/bin/pip install --quiet numpy
  .venv/bin/pip install --quiet --no-deps nixl-cu12==1.5.1
  echo "$want" > "$stamp"
fi
