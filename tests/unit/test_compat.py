"""The compatibility gate: the hard rules for the vLLM version a deployment runs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.compat import evaluate
from pdd_operator.compat.rules import RULES
from pdd_operator.vllm.architectures import traits
from pdd_operator.vllm.versions import parse_version, version_from_image
from tests.helpers import hybrid, load_example, make_spec, spec_of


def rules_fired(spec, severity=None) -> set[str]:
    return {f.rule for f in evaluate(spec).findings if severity is None or f.severity == severity}


@pytest.mark.parametrize(("name", "read_as"), [
    # NVIDIA's FP8 copy is read as its BF16 sibling (set 104): model-read-as-base says so, nothing else is found
    ("nemotron-nano-pd", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"),
    ("llama-dense-pd", None),
])
def test_examples_are_compatible_without_warnings(name, read_as):
    report = evaluate(spec_of(load_example(name)))
    assert report.compatible and report.version == "0.20.2"
    said = [f for f in report.findings if f.rule == "model-read-as-base" and f"read as {read_as}" in f.message]
    assert report.findings == said and len(said) == (1 if read_as else 0), report.findings


@pytest.mark.parametrize(
    "text, want",
    [("0.20.2", (0, 20, 2)), ("v0.33.0", (0, 33, 0)), ("0.20", (0, 20, 0)),
     ("0.20.2rc1.dev265+gdd6b3a5ef", (0, 20, 2)), ("nightly", None), ("", None)],
)
def test_parse_version(text, want):
    assert parse_version(text) == want


@pytest.mark.parametrize(
    "image, want",
    [("vllm/vllm-openai:v0.20.2", (0, 20, 2)), ("registry:5000/team/vllm:0.28.1-cu129", (0, 28, 1)),
     ("registry:5000/team/vllm", None), ("vllm/vllm-openai:latest", None),
     ("vllm/vllm-openai@sha256:" + "a" * 64, None)],
)
def test_version_from_image(image, want):
    assert version_from_image(image) == want


def test_explicit_version_beats_the_image_tag():
    spec = hybrid(engine={"image": "vllm/vllm-openai:v0.20.2", "vllmVersion": "0.19.1"},
                  decode={"tensorParallelSize": 4})
    assert "hybrid-ssm-hetero-tp" in rules_fired(spec, "error")


def test_encoder_decoder_is_refused():
    spec = make_spec(model={"name": "openai/whisper-large-v3", "hfArchitecture": "WhisperForConditionalGeneration"})
    assert rules_fired(spec, "error") == {"architecture-unsupported"}


@pytest.mark.parametrize("where", ["kvCache", "env"])
def test_hybrid_ssm_without_ds_is_refused_from_0_20(where):
    patch = ({"kvCache": {"ssmConvStateLayout": "SD"}} if where == "kvCache"
             else {"decode": {"env": [{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "SD"}]}})
    assert "ssm-conv-layout-ds" in rules_fired(hybrid(**patch), "error")
    old = hybrid(engine={"image": "vllm/vllm-openai:v0.19.1"}, **patch)
    assert "ssm-conv-layout-ds" not in rules_fired(old)


def test_pull_pp_on_a_hybrid_model_is_refused_and_push_named_as_fix():
    spec = hybrid(prefill={"pipelineParallelSize": 2})
    report = evaluate(spec)
    pp = [f for f in report.errors if f.rule == "pp-pull-unsupported"]
    assert pp and "NixlPushConnector" in pp[0].fix
    dense_pull = make_spec(prefill={"pipelineParallelSize": 2}, engine={"image": "vllm/vllm-openai:v0.31.0"})
    assert "pp-pull-unsupported" in rules_fired(dense_pull, "error")
    dense_push = make_spec(prefill={"pipelineParallelSize": 2}, decode={"tensorParallelSize": 2},
                           kvTransfer={"connector": "NixlPushConnector"}, engine={"image": "vllm/vllm-openai:v0.31.0"})
    assert evaluate(dense_push).compatible
    hybrid_push = hybrid(prefill={"pipelineParallelSize": 2}, kvTransfer={"connector": "NixlPushConnector"},
                         engine={"image": "vllm/vllm-openai:v0.31.0"})
    assert "pp-hybrid-ssm" in rules_fired(hybrid_push, "error")


@pytest.mark.parametrize("p, d, ok", [(1, 2, True), (2, 4, True), (8, 2, True), (2, 3, False), (4, 6, False)])
def test_tp_divisibility(p, d, ok):
    spec = make_spec(model={"numKvHeads": 8}, prefill={"tensorParallelSize": p}, decode={"tensorParallelSize": d})
    assert ("tp-divisibility" in rules_fired(spec, "error")) is (not ok)


@pytest.mark.parametrize("version, refused", [("0.19.1", True), ("0.20.0", False), ("0.33.0", False)])
def test_hybrid_hetero_tp_by_version(version, refused):
    spec = hybrid(engine={"image": f"vllm/vllm-openai:v{version}"}, prefill={"tensorParallelSize": 4})
    assert ("hybrid-ssm-hetero-tp" in rules_fired(spec, "error")) is refused


@pytest.mark.parametrize(
    "hf_arch, version, refused",
    [("Qwen3NextForCausalLM", "0.21.0", True), ("Qwen3NextForCausalLM", "0.22.0", False),
     ("JambaForCausalLM", "0.24.0", True), ("JambaForCausalLM", "0.25.0", False),
     ("NemotronHForCausalLM", "0.20.0", False)],
)
def test_ssm_kind_by_version(hf_arch, version, refused):
    spec = hybrid(model={"name": "some/model", "hfArchitecture": hf_arch},
                  engine={"image": f"vllm/vllm-openai:v{version}"})
    assert ("ssm-kind-unsupported" in rules_fired(spec, "error")) is refused


def test_prefill_tp_above_kv_heads_is_refused():
    spec = make_spec(model={"numKvHeads": 2}, prefill={"tensorParallelSize": 4}, decode={"tensorParallelSize": 1})
    assert "tp-exceeds-kv-heads" in rules_fired(spec, "error")
    spec = make_spec(model={"numKvHeads": 8}, prefill={"tensorParallelSize": 4}, decode={"tensorParallelSize": 1})
    assert "tp-exceeds-kv-heads" not in rules_fired(spec)


@pytest.mark.parametrize(
    "patch, rule",
    [
        ({"prefill": {"blockSize": 32}, "decode": {"blockSize": 16}}, "block-size-direction"),
        ({"prefill": {"blockSize": 16, "tensorParallelSize": 2}, "decode": {"blockSize": 32}}, "block-size-tp-shrink"),
        ({"prefill": {"blockSize": 16}, "engine": {"image": "vllm/vllm-openai:v0.30.0"},
          "model": {"name": "NousResearch/Hermes-3-Llama-3.1-8B"}}, "block-size-partial"),  # a head size not known
        ({"decode": {"pipelineParallelSize": 2}}, "pp-decode-unsupported"),
        ({"kvTransfer": {"extraConfig": {"enforce_handshake_compat": False}}}, "handshake-compat-disabled"),
        ({"prefill": {"env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "0.0.0.0"}]}}, "side-channel-host-not-routable"),
        ({"kvTransfer": {"connector": "NixlPushConnector"}}, "push-connector-unavailable"),
        ({"decode": {"tensorParallelSize": 2}, "kvCache": {"layout": "NHD"}}, "hetero-tp-kv-layout"),
    ],
)
def test_rule_fires(patch, rule):
    assert rule in rules_fired(make_spec(**patch))


def test_hybrid_block_sizes_differ_refused_before_0_27_only():
    patch = {"prefill": {"blockSize": 64}, "decode": {"blockSize": 128}}
    assert "block-size-hma" in rules_fired(hybrid(**patch), "error")
    assert not evaluate(hybrid(engine={"image": "vllm/vllm-openai:v0.27.0"}, **patch)).errors


def test_unknown_version_is_unchecked_for_the_rules_that_refuse_on_some_releases():
    spec = hybrid(engine={"image": "vllm/vllm-openai:latest"})
    report = evaluate(spec)
    assert report.compatible
    warning = next(f for f in report.findings if f.rule == "vllm-version-unknown")
    # NixlConnector has no hybrid SSM support before 0.18: refused there, so not checked without the version.
    assert "hybrid-ssm-unsupported" in report.unchecked and "Not checked" in warning.message
    assert "hybrid-ssm-unsupported" in report.not_evaluated
    # The operator sets VLLM_SSM_CONV_STATE_LAYOUT=DS: the rule passes on every release, so it is not named.
    assert "ssm-conv-layout-ds" not in report.not_evaluated and "ssm-conv-layout-ds" not in warning.message


def test_findings_say_what_and_how_to_fix():
    report = evaluate(hybrid(decode={"tensorParallelSize": 3}))
    for f in report.findings:
        assert f.message and f.fix and f.source and f.fields


def test_rules_have_unique_ids_and_sources():
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    assert all(r.source and r.summary and r.fields for r in RULES)


def test_architecture_from_tables_and_name():
    assert traits(None, None, "DeepseekV32ForCausalLM", "x").architecture == "sparse-mla"
    assert traits(None, None, None, "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8").ssm_kind == "Mamba2"
    assert traits("dense", None, "NemotronHForCausalLM", "x").architecture == "dense"
    assert traits(None, None, None, "acme/secret-model").architecture is None


_role = st.fixed_dictionaries({}, optional={
    "replicas": st.integers(0, 4),
    "tensorParallelSize": st.sampled_from([1, 2, 3, 4, 8]),
    "pipelineParallelSize": st.sampled_from([1, 2]),
    "blockSize": st.sampled_from([16, 32, 64, 128]),
    "numSpeculativeTokens": st.integers(1, 5),
})
_specs = st.fixed_dictionaries({
    "model": st.fixed_dictionaries(
        {"name": st.sampled_from(["meta-llama/Llama-3.1-8B", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", "acme/x"])},
        optional={
            "architecture": st.sampled_from(["dense", "mla", "sparse-mla", "hybrid-ssm", "moe", "multimodal", "encoder-decoder"]),
            "ssmKind": st.sampled_from(["Mamba1", "Mamba2", "GDN"]),
            "numKvHeads": st.integers(1, 16),
        },
    ),
    "engine": st.fixed_dictionaries({"image": st.sampled_from(
        ["vllm/vllm-openai:v0.8.5", "vllm/vllm-openai:v0.19.1", "vllm/vllm-openai:v0.20.2",
         "vllm/vllm-openai:v0.27.0", "vllm/vllm-openai:v0.33.0", "vllm/vllm-openai:v0.40.0", "x:latest"])}),
    "kvTransfer": st.fixed_dictionaries({}, optional={
        "connector": st.sampled_from(["NixlConnector", "NixlPushConnector"]),
        "bufferDevice": st.sampled_from(["cuda", "cpu"]),
    }),
    "kvCache": st.fixed_dictionaries({}, optional={"ssmConvStateLayout": st.sampled_from(["DS", "SD"]),
                                                    "layout": st.sampled_from(["HND", "NHD", "LBHNC"])}),
    "prefill": _role,
    "decode": _role,
})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_specs)
def test_checker_never_crashes_and_is_deterministic(raw):
    spec = PDDeploymentSpec.model_validate(raw)
    first, second = evaluate(spec), evaluate(PDDeploymentSpec.model_validate(raw))
    assert first == second
    assert first.compatible == (not any(f.severity == "error" for f in first.findings))


def test_extra_args_cannot_override_rendered_flags():
    spec = hybrid(prefill={"extraArgs": ["--disable-hybrid-kv-cache-manager", "--kv-cache-dtype", "fp8"]})
    fired = rules_fired(spec, "error")
    assert {"extra-args-managed-flag", "hybrid-hma-disabled", "kv-cache-dtype-mismatch"} <= fired


@pytest.mark.parametrize("layout, version, ok", [("LBHNC", "0.20.2", True), ("BLHNC", "0.20.2", False),
                                                 ("BLHNC", "0.29.0", True), ("LHBNC", "0.33.0", True)])
def test_kv_layout_names_by_version(layout, version, ok):
    spec = make_spec(kvCache={"layout": layout}, engine={"image": f"vllm/vllm-openai:v{version}"})
    assert ("kv-layout-version" not in rules_fired(spec)) is ok


@pytest.mark.parametrize("layout, ok", [("LBHNC", True), ("BLHNC", True), ("LHBNC", False), ("BLNHC", False),
                                        ("BHLNC", False), ("LBNHC", False)])
def test_hetero_tp_needs_a_block_contiguous_prefill_layout(layout, ok):
    spec = make_spec(kvCache={"layout": layout}, engine={"image": "vllm/vllm-openai:v0.33.0"},
                     decode={"tensorParallelSize": 2})
    assert ("hetero-tp-kv-layout" not in rules_fired(spec)) is ok


def test_hybrid_hetero_tp_gets_prefix_caching_off_on_decode_and_n_groups_warning():
    from pdd_operator.render.engine import vllm_args
    spec = hybrid(engine={"image": "vllm/vllm-openai:v0.22.0"}, model={"name": "Qwen/Qwen3-Next-80B-A3B",
                  "hfArchitecture": "Qwen3NextForCausalLM"}, prefill={"tensorParallelSize": 4})
    assert "--no-enable-prefix-caching" in vllm_args(spec, "decode")
    assert "--no-enable-prefix-caching" not in vllm_args(spec, "prefill")
    assert evaluate(spec).compatible
    # the decode with the larger TP past the KV heads holds the smaller block: the handshake fails on every kernel
    forced_on = hybrid(engine={"image": "vllm/vllm-openai:v0.22.0"}, prefill={"tensorParallelSize": 1, "blockSize": 16},
                       decode={"tensorParallelSize": 4, "blockSize": 16, "extraArgs": ["--enable-prefix-caching"]},
                       model={"numKvHeads": 2})
    assert "hybrid-prefix-caching" in rules_fired(forced_on, "error")
    # the prefill with the larger TP: whether the page counts differ is the GPU kernel's (FA2/3 never split)
    prefill_larger = hybrid(engine={"image": "vllm/vllm-openai:v0.22.0"}, prefill={"tensorParallelSize": 4},
                            decode={"extraArgs": ["--enable-prefix-caching"]}, model={"numKvHeads": 2})
    assert "hybrid-prefix-caching" in rules_fired(prefill_larger, "warning")
    assert "hybrid-prefix-caching" not in rules_fired(prefill_larger, "error")
    heads_unknown = hybrid(engine={"image": "vllm/vllm-openai:v0.22.0"}, prefill={"tensorParallelSize": 4},
                           decode={"extraArgs": ["--enable-prefix-caching"]})
    assert "hybrid-prefix-caching" in rules_fired(heads_unknown, "warning")
    within_heads = hybrid(engine={"image": "vllm/vllm-openai:v0.22.0"}, prefill={"tensorParallelSize": 4},
                          decode={"extraArgs": ["--enable-prefix-caching"]}, model={"numKvHeads": 8})
    assert "hybrid-prefix-caching" not in rules_fired(within_heads)
    falcon = hybrid(model={"name": "tiiuae/Falcon-H1-0.5B-Instruct", "hfArchitecture": "FalconH1ForCausalLM"},
                    prefill={"tensorParallelSize": 1})
    assert "mamba2-n-groups-unknown" in rules_fired(falcon, "warning")
    # no vLLM release refuses it (wrong conv state, no error raised): a warning (compat/rules/hybrid_ssm.py source)
    assert "mamba2-n-groups-tp" in rules_fired(hybrid(model={"mambaNGroups": 1}, prefill={"tensorParallelSize": 1}),
                                               "warning")


def test_missing_rdma_is_a_warning_for_gpu_engines_only():
    no_rdma = make_spec(network={"rdma": None})
    assert "rdma-missing" in rules_fired(no_rdma, "warning")
    cpu = make_spec(network={"rdma": None}, engine={"gpuResourceName": ""}, kvTransfer={"bufferDevice": "cpu"})
    assert "rdma-missing" not in rules_fired(cpu)


@pytest.mark.parametrize(
    "hf_arch, version, patch, rule",
    [
        ("Gemma3ForCausalLM", "0.30.0", {"kvTransfer": {"connector": "NixlPushConnector"},
                                         "prefill": {"pipelineParallelSize": 2}}, "pp-push-hma-version"),
        ("GptOssForCausalLM", "0.24.0", {"prefill": {"blockSize": 16}, "decode": {"blockSize": 32}}, "block-size-hma"),
    ],
)
def test_sliding_window_models_use_hma_from_0_22(hf_arch, version, patch, rule):
    spec = make_spec(model={"name": "x", "hfArchitecture": hf_arch, "numKvHeads": 8},
                     engine={"image": f"vllm/vllm-openai:v{version}"}, **patch)
    assert rule in rules_fired(spec, "error")
    before = make_spec(model={"name": "x", "hfArchitecture": hf_arch, "numKvHeads": 8},
                       engine={"image": "vllm/vllm-openai:v0.21.0"}, **patch)
    assert "block-size-hma" not in rules_fired(before)  # HMA is off with a kv-transfer-config before 0.22


def test_conv_layout_env_only_where_vllm_has_it():
    from pdd_operator.render.engine import engine_env
    env = engine_env(hybrid(engine={"image": "vllm/vllm-openai:v0.19.1"}), "decode")
    assert "VLLM_SSM_CONV_STATE_LAYOUT" not in {e["name"] for e in env}
    assert "VLLM_SSM_CONV_STATE_LAYOUT" in {e["name"] for e in engine_env(hybrid(), "decode")}
