"""The must-match set is one definition: the compat hash, the rollout warning and the *-mismatch rules
all follow it, and a setting outside it never changes the hash."""

from __future__ import annotations

import pytest

from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.compat.rules import RULES
from pdd_operator.controller.webhook import changed_must_match
from pdd_operator.vllm.must_match import EXTRA_RULES, MUST_MATCH, compat_hash, entry
from tests.helpers import hybrid, make_spec

RULES_BY_ID = {r.id: r for r in RULES}
#: Rules whose id ends in -mismatch but compare one engine with its hardware, or a PDDeployment's stated vLLM release
#: with its image tag (set 58), not prefill with decode; and the P2pNcclConnector and MoRIIOConnector pair rules
#: (``Rule.p2p_nccl``, ``Rule.moriio``): the PDDeployment names NIXL connectors only, so no setting of its (nor its
#: compat hash) is theirs.
NOT_PD = {"nixl-backend-fabric-mismatch", "vllm-version-image-mismatch",
          "ec-connector-pair-mismatch"} | {r.id for r in RULES if r.p2p_nccl or r.moriio}  # EC: encoder vs prefill


def _guards() -> dict[str, str]:
    out = {e.rule: e.name for e in MUST_MATCH if e.rule}
    for name, ids in EXTRA_RULES.items():
        out.update({i: name for i in ids})
    return out


def test_every_entry_names_existing_rules():
    for rule_id in _guards():
        assert rule_id in RULES_BY_ID, f"must-match names unknown rule {rule_id}"


def test_every_mismatch_rule_guards_a_must_match_entry():
    mismatch = {r.id for r in RULES if r.id.endswith("-mismatch")} - NOT_PD
    assert mismatch <= set(_guards()), f"mismatch rules outside must_match.MUST_MATCH: {mismatch - set(_guards())}"


@pytest.mark.parametrize("rule_id, name", sorted(_guards().items()))
def test_a_mismatch_rule_reads_only_fields_of_its_entry(rule_id, name):
    extra = set(RULES_BY_ID[rule_id].fields) - set(entry(name).fields)
    assert not extra, f"{rule_id} reads {sorted(extra)}, which must_match entry {name!r} does not list"


def test_entry_names_and_fields_are_unique_and_spec_paths():
    names = [e.name for e in MUST_MATCH]
    assert len(names) == len(set(names))
    for e in MUST_MATCH:
        assert e.fields and all(f.startswith("spec.") for f in e.fields) and e.source and e.compared_by


# Each change below touches one must-match setting: the hash must change and the webhook must name it.
CHANGES = [
    ("spec.model.name", {"model": {"name": "meta-llama/Llama-3.1-70B-Instruct"}}),
    ("spec.model.revision", {"model": {"revision": "abc123"}}),
    ("spec.model.dtype", {"model": {"dtype": "float16"}}),
    ("spec.model.numKvHeads", {"model": {"numKvHeads": 4}}),
    ("spec.engine.image", {"engine": {"image": "vllm/vllm-openai:v0.20.1"}}),
    ("spec.kvCache.dtype", {"kvCache": {"dtype": "fp8"}}),
    ("spec.kvCache.layout", {"kvCache": {"layout": "LBNHC"}}),
    ("spec.kvTransfer.connector",
     {"kvTransfer": {"connector": "NixlPushConnector"}, "engine": {"image": "vllm/vllm-openai:v0.28.0"}}),
    ("spec.kvTransfer.bufferDevice", {"kvTransfer": {"bufferDevice": "cpu"}}),
    ("spec.engine.env", {"engine": {"env": [{"name": "VLLM_ATTENTION_BACKEND", "value": "FLASHINFER"}]}}),
    ("spec.speculative", {"speculative": {"method": "ngram"}}),
]


@pytest.mark.parametrize("path, patch", CHANGES, ids=[c[0] for c in CHANGES])
def test_must_match_change_changes_the_hash_and_is_named(path, patch):
    old, new = make_spec(), make_spec(**patch)
    assert compat_hash(old) != compat_hash(new)
    assert path in changed_must_match(old, new)


# Settings vLLM never compares between prefill and decode: the router keeps pairing old and new pods.
UNCOMPARED = [
    {"model": {"hfTokenSecretRef": {"name": "hf", "key": "token"}}},
    {"model": {"servedModelName": "llama"}},
    {"model": {"maxModelLen": 4096}},
    {"kvTransfer": {"sideChannelPort": 5601}},
    {"engine": {"env": [{"name": "HF_HUB_OFFLINE", "value": "1"}]}},
    {"decode": {"replicas": 4, "tensorParallelSize": 2, "blockSize": 32}},
    {"prefill": {"gpuMemoryUtilization": 0.8}},
]


@pytest.mark.parametrize("patch", UNCOMPARED, ids=[next(iter(p)) + "." + next(iter(next(iter(p.values())))) for p in UNCOMPARED])
def test_settings_vllm_never_compares_leave_the_hash(patch):
    old, new = make_spec(), make_spec(**patch)
    assert compat_hash(old) == compat_hash(new)
    assert changed_must_match(old, new) == []


def test_hybrid_num_speculative_tokens_is_must_match_but_dense_is_not():
    spec = {"speculative": {"method": "ngram"}, "prefill": {"numSpeculativeTokens": 3}, "decode": {"numSpeculativeTokens": 3}}
    changed = {"speculative": {"method": "ngram"}, "prefill": {"numSpeculativeTokens": 3}, "decode": {"numSpeculativeTokens": 5}}
    assert compat_hash(hybrid(**spec)) != compat_hash(hybrid(**changed))
    assert compat_hash(make_spec(**spec)) == compat_hash(make_spec(**changed))


def test_hash_is_stable_for_equal_specs():
    assert compat_hash(make_spec()) == compat_hash(PDDeploymentSpec.model_validate(make_spec().wire()))
