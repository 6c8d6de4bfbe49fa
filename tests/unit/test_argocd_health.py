"""The Argo CD health check shipped with the chart (charts/pdd-operator/files/argocd/...), run as
Argo CD runs it: its health_test.yaml cases (Argo's own layout) in a Lua 5.1 VM with only the base,
table and package libraries and a safe os opened (lupa's Lua 5.1 with the rest removed, including the
string metatable, the way gopher-lua leaves strings without the string library)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT

lua51 = pytest.importorskip("lupa.lua51")

CHECK_DIR = ROOT / "charts" / "pdd-operator" / "files" / "argocd" / "pdd-operator.dev" / "PDDeployment"
CASES = yaml.safe_load((CHECK_DIR / "health_test.yaml").read_text())["tests"]

#: Argo CD (util/lua) opens package, base and table, and a safe os; nothing else unless useOpenLibs.
SANDBOX = """
local safe_os = {time = os.time, date = os.date, clock = os.clock}
debug.setmetatable("", nil)
string, io, math, coroutine, debug = nil, nil, nil, nil, nil
os = safe_os
"""


def argo_vm():
    lua = lua51.LuaRuntime(register_eval=False, register_builtins=False, unpack_returned_tuples=True)
    lua.execute(SANDBOX)
    return lua


def run_health(script: str, obj: dict) -> dict:
    lua = argo_vm()
    lua.globals().obj = lua.table_from(obj, recursive=True)
    result = lua.execute(script)
    return {k: result[k] for k in ("status", "message") if result[k] is not None}


def test_the_sandbox_is_as_strict_as_argo():
    with pytest.raises(lua51.LuaError):
        run_health('return {status = string.format("%s", "Healthy")}', {})
    with pytest.raises(lua51.LuaError):
        run_health('local s = "Healthy"; return {status = s:lower()}', {})
    assert run_health('return {status = "Heal" .. tostring("thy")}', {}) == {"status": "Healthy"}


@pytest.mark.parametrize("case", CASES, ids=[Path(c["inputPath"]).stem for c in CASES])
def test_health_check_cases(case):
    obj = yaml.safe_load((CHECK_DIR / case["inputPath"]).read_text())
    got = run_health((CHECK_DIR / "health.lua").read_text(), obj)
    assert got == case["healthStatus"]


def test_every_testdata_file_is_a_case():
    assert {c["inputPath"] for c in CASES} == {f"testdata/{p.name}" for p in (CHECK_DIR / "testdata").glob("*.yaml")}


def test_a_refused_spec_is_degraded_and_a_new_object_progressing():
    """The two cases GitOps users hit first (helm-gitops-facts.md): never Progressing forever, never Healthy
    before the operator spoke."""
    by_input = {c["inputPath"]: c["healthStatus"]["status"] for c in CASES}
    assert by_input["testdata/refused-stalled.yaml"] == by_input["testdata/refused-no-stalled.yaml"] == "Degraded"
    assert by_input["testdata/new.yaml"] == "Progressing"
