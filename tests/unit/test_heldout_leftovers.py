"""The strict xfails left in the held-out sets, fixed as kinds (branch i9-fixG), and one structural clean-up.

1. ``Rule.one_engine`` (pdd_operator/compat/rules/base.py) is the one definition of "a rule that judges an engine by its
   own argv and image": :func:`pdd_operator.compat.engine.evaluate_alone` selects by it (no hand list of ids in
   compat/engine.py), and each such rule is declared so where it is declared.
"""

from __future__ import annotations

import dataclasses

from pdd_operator.compat import engine
from pdd_operator.compat.manifests import lone_pair, scan
from pdd_operator.compat.rules import CHECKS

#: The rules that judged a lone engine before the attribute (compat/engine.py's former ONE_ENGINE_RULES).
_ONE_ENGINE = {"engine-args-invalid", "cli-flag-removed", "cli-flag-not-yet", "entrypoint-repeated",
               "kv-transfer-config-removed-field", "kv-connector-unregistered", "attention-backend-unsupported",
               "kv-cache-dtype-unknown", "speculative-config-removed-field", "tp-heads-indivisible"}


# --- 1. Rule.one_engine ------------------------------------------------------------------------------------------


def test_one_engine_rules_are_declared_where_the_rules_are():
    marked = {r.id for r in CHECKS if r.one_engine}
    assert marked == _ONE_ENGINE
    assert all(r.without_connector for r in CHECKS if r.one_engine)  # an engine alone has no counterpart either
    assert not hasattr(engine, "ONE_ENGINE_RULES")


def _lone_engine(args):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "m-prefill", "labels": {"role": "prefill"}},
           "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.20.0", "command": ["vllm", "serve"],
                                    "args": ["Qwen/Qwen3-0.6B", *args],
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    engines, _ = scan(pod)
    return engines[0]


def test_evaluate_alone_selects_by_the_attribute():
    e = _lone_engine(["--kv-transfer-config", '{"kv_connector":"NoSuchConnector","kv_role":"kv_producer"}'])
    role = "prefill"
    found = {f.rule for f in engine.evaluate_alone(lone_pair(e), role)}
    assert found == {"kv-connector-unregistered"}
    # the same rule, not marked: no longer run on a lone engine (the selection is the attribute, not an id list)
    unmarked = tuple(dataclasses.replace(r, one_engine=False) if r.id == "kv-connector-unregistered" else r
                     for r in CHECKS)
    assert not engine.evaluate_alone(lone_pair(e), role, unmarked)
    # a rule marked that no list named is run
    marked = tuple(dataclasses.replace(r, one_engine=True) if r.id == "kv-connector-unregistered" else r
                   for r in CHECKS if r.id == "kv-connector-unregistered")
    assert {f.rule for f in engine.evaluate_alone(lone_pair(e), role, marked)} == {"kv-connector-unregistered"}
