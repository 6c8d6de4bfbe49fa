"""A reconcile whose children are all in place does not render them (controller/render_memo.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client

from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.controller.cache import ClusterCache
from pdd_operator.controller.kube import Kube, with_applied_hash
from pdd_operator.controller.reconcile import apply_all
from pdd_operator.controller.render_memo import RenderMemo
from pdd_operator.render.workloads import Owner, render_children

ROOT = Path(__file__).resolve().parents[2]
SPEC = PDDeploymentSpec.model_validate(yaml.safe_load((ROOT / "examples" / "cpu-tiny-pd.yaml").read_text())["spec"])
OWNER = Owner("p", "ns", "uid-p", 1)


def _live(child: dict, version: int) -> dict:
    applied = with_applied_hash(child)
    return {**applied, "metadata": {**applied["metadata"], "resourceVersion": str(version)}}


def _cluster() -> tuple[ClusterCache, Kube]:
    cache = ClusterCache()
    cache.expect({})
    for child in render_children(OWNER, SPEC):
        cache.observe(child["kind"], _live(child, 5))
    return cache, Kube(client.ApiClient(client.Configuration()), cache=cache)


def test_children_found_in_place_are_not_rendered_again_until_one_changes():
    cache, kube = _cluster()
    memo = RenderMemo()
    render = memo.renderer(kube, None)
    children = render(OWNER, SPEC, None, "a")
    assert [c["metadata"]["name"] for c in children] == [c["metadata"]["name"] for c in render_children(OWNER, SPEC)]
    assert render(OWNER, SPEC, None, "a") != []  # rendered, but never compared yet: rendered again
    assert apply_all(kube, children) == (0, [], None)  # compared: all in place
    assert render(OWNER, SPEC, None, "a") == [] and memo.skipped == 1
    decode = next(c for c in children if c["metadata"]["name"] == "p-decode")
    edited = _live(decode, 6)
    edited["spec"] = {**edited["spec"], "replicas": 7}  # a hand edit: a new resourceVersion
    cache.observe("Deployment", edited)
    again = render(OWNER, SPEC, None, "a")
    assert [c["metadata"]["name"] for c in again] == [c["metadata"]["name"] for c in children]
    sent = []
    kube.send_apply = lambda desired, live, digest=None: sent.append(desired["metadata"]["name"])
    apply_all(kube, again)
    assert sent == ["p-decode"]


@pytest.mark.parametrize("change", ["generation", "slot", "config"])
def test_another_render_key_renders(change):
    _, kube = _cluster()
    memo = RenderMemo()
    children = memo.renderer(kube, None)(OWNER, SPEC, None, "a")
    apply_all(kube, children)
    assert memo.renderer(kube, None)(OWNER, SPEC, None, "a") == []
    owner = Owner("p", "ns", "uid-p", 2) if change == "generation" else OWNER
    slot = "b" if change == "slot" else "a"
    config_key = '{"model_type": "llama"}' if change == "config" else None
    assert memo.renderer(kube, config_key)(owner, SPEC, None, slot) != []


def test_without_a_cache_nothing_counts_as_in_place():
    kube = Kube(client.ApiClient(client.Configuration()), cache=None)
    assert kube.all_in_place("ns", (("Service", "p-prefill", "0123456789abcdef"),)) is False
    with pytest.raises(ValueError):
        RenderMemo(size=0)


def test_the_memo_keeps_at_most_size_keys():
    _, kube = _cluster()
    memo = RenderMemo(size=2)
    for generation in (1, 2, 3):
        memo.renderer(kube, None)(Owner("p", "ns", "uid-p", generation), SPEC, None, "a")
    assert len(memo) == 2
