"""The one table of vLLM's model registry per release (pdd_operator/vllm/model_registry.json, its reader
:mod:`pdd_operator.vllm.model_registry` and its generator ``dev/gen_vllm_model_registry.py``).

The table replaced two that the same registry.py fed (the names per release for ``architecture-not-in-release`` and the
evidence per architecture with its first and last release); the reader answers both questions from one set of
per-release spans. Table-driven over names added, removed and re-added between the releases read, names with and
without evidence, and the generator over synthetic release trees.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dev.gen_vllm_model_registry import build, dump
from dev.vllm_sdists import index_ranges, release_dirs, release_spans
from pdd_operator.api.spec import Architecture
from pdd_operator.vllm.model_registry import (
    _entries,
    first_release_holding,
    known_name,
    previously_supported,
    registry_family,
    registry_holds,
    registry_since,
    releases_holding,
    releases_read,
)

# name, release, whether that release's registry holds it (None: the releases read do not settle it)
HOLDS = [
    ("ExaoneMoEForCausalLM", (0, 26, 0), True),     # in 0.18.0-0.26.0 ...
    ("ExaoneMoEForCausalLM", (0, 27, 0), False),    # ... removed in 0.27.0 ...
    ("ExaoneMoEForCausalLM", (0, 31, 0), False),
    ("ExaoneMoEForCausalLM", (0, 32, 0), True),     # ... and back from 0.32.0
    ("ExaoneMoEForCausalLM", (0, 35, 0), True),     # after the newest read, which holds it
    ("AquilaForCausalLM", (0, 24, 0), True),        # removed after 0.24.0
    ("AquilaForCausalLM", (0, 25, 0), False),
    ("AquilaForCausalLM", (0, 35, 0), None),        # after the newest read, which lacks it
    ("KimiK3ForConditionalGeneration", (0, 26, 0), False),  # added in 0.27.0
    ("KimiK3ForConditionalGeneration", (0, 27, 0), True),
    ("KimiK3ForConditionalGeneration", (0, 27, 1), None),   # a release not read
    ("KimiK3ForCausalLM", (0, 27, 0), True),        # through _normalize_arch's suffix swap
    ("EagleLlamaForCausalLM", (0, 18, 0), True),    # a draft model: names only, no evidence
    ("MadeUpForCausalLM", (0, 30, 0), False),
    ("MadeUpForCausalLM", (0, 17, 0), None),        # before the oldest read
]


@pytest.mark.parametrize(("name", "release", "holds"), HOLDS)
def test_registry_holds_per_release(name, release, holds):
    assert registry_holds(name, release) is holds


# name, the releases holding it in words, the first release after 0.26.0 holding it, registry_since
SPANS = [
    ("ExaoneMoEForCausalLM", "0.18.0 to 0.26.0, 0.32.0 to 0.34.0", (0, 32, 0), None),
    ("AquilaForCausalLM", "0.18.0 to 0.24.0", None, None),
    ("KimiK3ForConditionalGeneration", "0.27.0 to 0.34.0", (0, 27, 0), (0, 27, 0)),
    ("EagleLlamaForCausalLM", "0.18.0 to 0.34.0", (0, 27, 0), None),
    ("MadeUpForCausalLM", "no release read (0.18.0 to 0.34.0)", None, None),
]


@pytest.mark.parametrize(("name", "words", "after_026", "since"), SPANS)
def test_spans_first_release_and_since(name, words, after_026, since):
    assert releases_holding(name) == words
    assert first_release_holding(name, (0, 26, 0)) == after_026
    assert registry_since(name) == since


def test_names_only_entries_have_no_family_and_no_since():
    """Draft, pooling and Transformers-backend names are in ``_VLLM_MODELS`` but carry no model-file evidence."""
    assert known_name("EagleLlamaForCausalLM") and registry_family("EagleLlamaForCausalLM") is None
    assert registry_since("EagleLlamaForCausalLM") is None
    assert registry_family("ExaoneMoEForCausalLM") == (Architecture.MOE, None)


def test_previously_supported_and_unknown_names():
    assert previously_supported("AquilaForCausalLM") == "0.24.0"
    assert previously_supported("LlamaForCausalLM") is None
    assert not known_name("MadeUpForCausalLM") and not known_name(None)
    assert registry_family(None) is None and registry_since("MadeUpForCausalLM") is None


def test_since_derives_from_the_spans_for_every_architecture_with_evidence():
    oldest = releases_read()[0]
    for name, entry in _entries().items():
        first = tuple(int(p) for p in entry["releases"][0].split("-")[0].split("."))
        expected = None if "evidence" not in entry or first == oldest[:3] else first
        assert registry_since(name) == expected, name
        if "evidence" in entry:  # the evidence comes from a release that holds the name
            assert registry_holds(name, tuple(int(p) for p in entry["evidence"]["read_from"].split("."))), name


@pytest.mark.parametrize(("held", "spans"), [
    (["a", "b", "c", "d"], ["a-d"]),
    (["a", "b", "d"], ["a-b", "d-d"]),    # removed in c, back in d
    (["c"], ["c-c"]),
    ([], []),
])
def test_release_spans(held, spans):
    assert release_spans(["a", "b", "c", "d"], held) == spans


def test_index_ranges():
    assert index_ranges([0, 1, 2, 5, 6, 9]) == "0-2,5-6,9-9"


_REGISTRY = '''
_TEXT_GENERATION_MODELS = {{{text}}}
_MULTIMODAL_MODELS = {{}}
_EMBEDDING_MODELS = {{"DraftModel": ("draft", "Draft")}}
_VLLM_MODELS = {{**_TEXT_GENERATION_MODELS, **_MULTIMODAL_MODELS, **_EMBEDDING_MODELS}}
_PREVIOUSLY_SUPPORTED_MODELS = {{{previous}}}
'''


def _release(root: Path, version: str, text: str, previous: str = "") -> None:
    models = root / version / "vllm/model_executor/models"
    models.mkdir(parents=True)
    (models / "registry.py").write_text(_REGISTRY.format(text=text, previous=previous))
    (models / "moe.py").write_text("class MoeForCausalLM(nn.Module, MixtureOfExperts):\n    x = FusedMoE(1)\n")
    (models / "dense.py").write_text("class DenseForCausalLM(nn.Module):\n    pass\n")
    (models / "hybrid.py").write_text("class HybridForCausalLM(nn.Module, IsHybrid):\n    y = MambaMixer2(1)\n")


def test_the_generator_keeps_a_removed_and_readded_name_and_reads_evidence_from_the_newest(tmp_path):
    moe, dense, hybrid = ('"MoeForCausalLM": ("moe", "MoeForCausalLM")', '"DenseForCausalLM": ("dense", '
                          '"DenseForCausalLM")', '"HybridForCausalLM": ("hybrid", "HybridForCausalLM")')
    _release(tmp_path, "0.1.0", f"{moe}, {dense}")
    _release(tmp_path, "0.2.0", dense, previous='"MoeForCausalLM": "0.1.0"')
    _release(tmp_path, "0.10.0", f"{moe}, {hybrid}")
    doc = build(release_dirs([str(tmp_path)]))
    assert doc["releases"] == ["0.1.0", "0.2.0", "0.10.0"]  # sorted as versions, not as text
    table = doc["architectures"]
    assert table["MoeForCausalLM"]["releases"] == ["0.1.0-0.1.0", "0.10.0-0.10.0"]
    assert table["DenseForCausalLM"]["releases"] == ["0.1.0-0.2.0"]
    assert table["DraftModel"] == {"releases": ["0.1.0-0.10.0"]}  # in _VLLM_MODELS, no evidence
    assert table["DenseForCausalLM"]["evidence"]["read_from"] == "0.2.0"
    assert table["MoeForCausalLM"]["evidence"] == {
        "files": ["vllm/model_executor/models/moe.py"], "interfaces": ["MixtureOfExperts"], "markers": ["moe"],
        "read_from": "0.10.0", "section": "text_generation_models"}
    assert table["HybridForCausalLM"]["evidence"]["markers"] == ["mamba2"]
    assert doc["previously_supported"] == {"MoeForCausalLM": "0.1.0"}
    assert dump(doc) == dump(build(release_dirs([f"{v}={tmp_path / v / 'vllm'}" for v in doc["releases"]])))
