"""``memlock-insufficient`` and a script that raises the memlock limit itself (issue 9, a gap of the seventh held-out
round: Dynamo's A.X-K2 B200 recipe runs ``ulimit -l unlimited`` with SYS_RESOURCE before the engine): the warning goes
where the ulimit surely works (it sets the hard limit, which needs CAP_SYS_RESOURCE, setrlimit(2)) and says why the
ulimit may not work everywhere else."""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.script import memlock_ulimit
from tests.unit.test_turn2_variants import check, container, workload

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


#: An image whose default user is not known to be root (llm-d's), so an added IPC_LOCK may not be effective and the
#: script's ulimit decides (on vllm/vllm-openai, root by default, IPC_LOCK alone lets NIXL pin: memory.py
#: ``_ipc_lock_effective``).
IMAGE = "ghcr.io/llm-d/llm-d-cuda:v0.9.0"


def _pair(prelude, caps=("IPC_LOCK", "SYS_RESOURCE"), non_root=False, shell="bash"):
    script = f"set -e\n{prelude}\nexec vllm serve Qwen/Qwen3-8B --kv-transfer-config '{KV}'\n"
    sc = {"capabilities": {"add": list(caps)}, **({"runAsNonRoot": True, "runAsUser": 1000} if non_root else {})}
    return [workload(f"m-{role}", role, container([script], image=IMAGE,
                                                  command=[shell, "-lc"], securityContext=sc))
            for role in ("prefill", "decode")]


def _memlock(out):
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "memlock-insufficient"]


@pytest.mark.parametrize("prelude, caps", [
    ("ulimit -l unlimited", ("IPC_LOCK", "SYS_RESOURCE")),
    ("ulimit -n 1048576; ulimit -l unlimited", ("IPC_LOCK", "CAP_SYS_RESOURCE")),
    ("ulimit -Hl unlimited && ulimit -Sl unlimited", ("SYS_RESOURCE",)),  # unlimited: no IPC_LOCK needed either
])
def test_a_script_that_surely_raises_memlock_gets_no_memlock_warning(tmp_path, capsys, prelude, caps):
    code, out = check(tmp_path, capsys, *_pair(prelude, caps))
    assert code == 0 and not _memlock(out), out


@pytest.mark.parametrize("prelude, caps, non_root, why", [
    ("ulimit -l unlimited", ("IPC_LOCK",), False, "lacks SYS_RESOURCE"),
    ("ulimit -l unlimited", ("IPC_LOCK", "SYS_RESOURCE"), True, "non-root"),
    ("ulimit -S -l unlimited", ("IPC_LOCK", "SYS_RESOURCE"), False, "soft limit only"),
    ("ulimit -l 65536", ("IPC_LOCK", "SYS_RESOURCE"), False, "finite limit"),
    ("# ulimit -l unlimited", ("IPC_LOCK", "SYS_RESOURCE"), False, None),  # a comment raises nothing
    ("", ("IPC_LOCK", "SYS_RESOURCE"), False, None),
])
def test_a_ulimit_that_may_not_work_still_warns_and_says_why(tmp_path, capsys, prelude, caps, non_root, why):
    code, out = check(tmp_path, capsys, *_pair(prelude, caps, non_root))
    messages = _memlock(out)
    assert len(messages) == 2, out
    assert all((why in m) if why else ("script's ulimit" not in m) for m in messages), out


def test_a_ulimit_after_the_engine_starts_does_not_count(tmp_path, capsys):
    script = f"vllm serve Qwen/Qwen3-8B --kv-transfer-config '{KV}' &\nulimit -l unlimited\nwait\n"
    sc = {"capabilities": {"add": ["IPC_LOCK", "SYS_RESOURCE"]}}
    docs = [workload(f"m-{role}", role, container([script], image=IMAGE, command=["sh", "-c"],
                                                  securityContext=sc)) for role in ("prefill", "decode")]
    code, out = check(tmp_path, capsys, *docs)
    assert len(_memlock(out)) == 2, out


@pytest.mark.parametrize("command, line, want", [
    (["bash", "-lc", "ulimit -l unlimited\nvllm serve m"], 2, ("unlimited", "unlimited")),
    (["sh", "-c", "ulimit -Sl 100\nvllm serve m"], 2, ("100", None)),
    (["sh", "-c", "ulimit -H -l unlimited; ulimit -S -l 64\nvllm serve m"], 2, ("64", "unlimited")),
    (["sh", "-c", "vllm serve m\nulimit -l unlimited"], 1, None),
    (["vllm", "serve", "m"], 0, None),
])
def test_memlock_ulimit(command, line, want):
    assert memlock_ulimit(command, line) == want


def test_the_axk2_b200_recipe_gets_no_memlock_warning(tmp_path, capsys):
    # public_reports_7: bash -lc with set -Eeuo pipefail, ulimit -l unlimited, IPC_LOCK + SYS_RESOURCE, as root
    import yaml

    from tests.unit.test_public_reports import SETS
    docs = list(yaml.safe_load_all((SETS / "public_reports_7/inputs/dynamo-axk2-nvfp4-b200-1p1d-tp4-bash-script.yaml")
                                   .read_text()))
    code, out = check(tmp_path, capsys, *docs)
    assert out["results"] and not _memlock(out), out
