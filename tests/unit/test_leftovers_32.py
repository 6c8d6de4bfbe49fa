"""Issue 9 (helper E, entry 32): kinds the last round left.

1. A container without ``command`` whose ``args`` (a model, flags) go to a vLLM image whose ENTRYPOINT was not read
   (AMD's ``rocm/vllm``, ``vllm/vllm-tpu``, any ``<org>/vllm``): the checker read it as ``vllm serve
   ARGS`` and judged the engine. vLLM's Dockerfile.rocm ``final`` stage and Dockerfile.tpu set ``CMD ["/bin/bash"]``
   and no ENTRYPOINT of their own (a base image's, not read), so the engine may never start: it is now "not checked:
   entrypoint of IMAGE unknown, give command" (pdd_operator/vllm/entrypoint.py entrypoint_unread).
2. A Dynamo vLLM worker (DynamoGraphDeployment v1alpha1 and v1beta1, Compose) without ``--kv-transfer-config``: the
   checker gave it NixlConnector whatever its ``--connector`` said and whatever its release. dynamo.vllm builds the
   connector from ``--connector`` (default nixl) before 1.0 (args.py 0.9.1) and adds none from 1.0 (1.1.0-1.6.1);
   ``--disaggregation-mode`` (the 1.x role flag) tells a worker without a default; a worker of unknown release is
   judged with the pre-1.0 default and says so (``dynamo-connector-assumed``): a warning where the file is written
   with the pre-1.0 flags (``--connector``, ``--is-prefill-worker``) or an error is found either way, else "not
   checked" (pdd_operator/compat/dynamo_engine_defaults.py added_connector).
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.dynamo_engine_defaults import added_connector
from pdd_operator.vllm.entrypoint import entrypoint_unread
from tests.unit.test_entrypoint_29 import _compose, _compose_check, _pair
from tests.unit.test_turn2_variants import check, rules

UNREAD_IMAGES = ["rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909", "rocm/vllm:rocm7.0.0_vllm_0.11.1_20251103",
                 "vllm/vllm-tpu:nightly", "my.io/team/vllm:0.11.0",
                 "vllm/vllm-openai-rocm:v0.32.0-base"]


def _not_checked(out: dict) -> list[str]:
    return [n["reason"] for n in out.get("notChecked", [])]


# --- 1. args only on a vLLM image whose ENTRYPOINT was not read ---------------------------------------------------


@pytest.mark.parametrize("image", UNREAD_IMAGES)
def test_args_only_on_an_unread_vllm_entrypoint_are_not_checked(tmp_path, capsys, image):
    # Before: read as 'vllm serve MODEL ...' and judged (rocm/vllm 0.10.1: INCOMPATIBLE, exit 1).
    code, out = check(tmp_path, capsys, *_pair([], image))
    reasons = _not_checked(out)
    assert code != 0 and not out["results"], out
    assert len(reasons) == 2 and all(f"entrypoint of {image} unknown, give command" in r for r in reasons), out


@pytest.mark.parametrize("image", ["rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909", "vllm/vllm-tpu:nightly"])
def test_compose_command_on_an_unread_vllm_entrypoint_is_not_checked(tmp_path, capsys, image):
    doc = _compose({"image": image, "command": ["Qwen/Qwen3-8B", "--kv-transfer-config", "KV"]})
    code, out = _compose_check(tmp_path, capsys, doc)
    assert code != 0 and not out["results"], out
    assert any(f"entrypoint of {image} unknown" in r for r in _not_checked(out)), out


@pytest.mark.parametrize(("lead", "command", "image"), [
    ([], None, "vllm/vllm-openai:v0.11.0"), ([], None, "vllm/vllm-openai-rocm:v0.32.0"),
    ([], None, "lmcache/vllm-openai:v0.3.3"),  # named as vLLM's OpenAI image: read as it
    ([], ["vllm", "serve"], "rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909"),  # a command: read
    (["vllm", "serve"], None, "rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909"),  # args that start the engine themselves
])
def test_controls_are_read(tmp_path, capsys, lead, command, image):
    code, out = check(tmp_path, capsys, *_pair(lead, image, command))
    assert out["results"] and not any("give command" in r for r in _not_checked(out)), out


@pytest.mark.parametrize(("image", "unread"), [
    *((i, True) for i in UNREAD_IMAGES),
    ("vllm/vllm-openai:v0.32.0", False), ("vllm/vllm-openai-rocm:v0.32.0", False), ("aibrix/vllm-openai:v0.9.2", False),
    ("my.io/team/engine:1", False),  # not a vLLM image: its own 'not checked' when the args carry P/D settings
])
def test_entrypoint_unread(image, unread):
    assert entrypoint_unread(image) is unread


# --- 2. the default connector of Dynamo's vLLM worker, per release -------------------------------------------------

ASSUMED = "dynamo-connector-assumed"
RUNTIME = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:"
POD_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def _graph(image: str, api: str, extra: tuple[str, ...] = (), prefill_extra: tuple[str, ...] = ()) -> dict:
    def args(flag: list[str], more: tuple[str, ...]) -> list[str]:
        return ["-m", "dynamo.vllm", "--model", "Qwen/Qwen3-8B", *flag, *extra, *more]
    if api == "v1beta1":
        def component(name: str, more: tuple[str, ...]) -> dict:
            return {"name": name, "type": name, "podTemplate": {"spec": {"containers": [
                {"name": "main", "image": image, "command": ["python3"], "env": [POD_IP],
                 "args": args(["--disaggregation-mode", name], more),
                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
        return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
                "spec": {"components": [component("prefill", prefill_extra), component("decode", ())]}}

    def service(kind: str, flag: list[str], more: tuple[str, ...]) -> dict:
        return {"componentType": "worker", "subComponentType": kind, "replicas": 1,
                "resources": {"limits": {"gpu": "1"}},
                "extraPodSpec": {"mainContainer": {"image": image, "command": ["python3"], "env": [POD_IP],
                                                   "args": args(flag, more)}}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"services": {"VllmPrefillWorker": service("prefill", ["--is-prefill-worker"], prefill_extra),
                                  "VllmDecodeWorker": service("decode", [], ())}}}


UNKNOWN_RELEASES = ["my.io/team/dynamo-vllm:custom", f"{RUNTIME}latest"]


def _without_role_flags(graph: dict) -> dict:
    """The v1alpha1 graph with its roles told by subComponentType alone (no --is-prefill-worker)."""
    for service in graph["spec"]["services"].values():
        args = service["extraPodSpec"]["mainContainer"]["args"]
        service["extraPodSpec"]["mainContainer"]["args"] = [a for a in args if a != "--is-prefill-worker"]
    return graph


@pytest.mark.parametrize("image", UNKNOWN_RELEASES)
def test_an_unknown_dynamo_release_is_not_checked_where_the_default_decides(tmp_path, capsys, image):
    # Before: NixlConnector assumed silently, "compatible", exit 0. Nothing in the graph tells the era.
    code, out = check(tmp_path, capsys, _without_role_flags(_graph(image, "v1alpha1")))
    assert code == 3 and not rules(out, "error"), out
    assert any(f"{ASSUMED} cannot be decided" in n["reason"] and "judged with NixlConnector" in n["reason"]
               for n in out["notChecked"]), out


@pytest.mark.parametrize("image", UNKNOWN_RELEASES)
def test_pre_1_0_role_flags_keep_the_assumption_a_warning(tmp_path, capsys, image):
    # --is-prefill-worker: the only spelling before Dynamo 1.0 (gone in 1.4.0)
    code, out = check(tmp_path, capsys, _graph(image, "v1alpha1"))
    assert code == 0 and ASSUMED in rules(out, "warning") and not out["notChecked"], out


@pytest.mark.parametrize("image", UNKNOWN_RELEASES)
def test_the_1_x_role_flag_tells_a_worker_without_a_default_connector(tmp_path, capsys, image):
    # --disaggregation-mode: the 1.x flag (absent from 0.9.1's parser); from 1.0 the worker adds no connector
    code, out = check(tmp_path, capsys, _graph(image, "v1beta1"))
    assert code == 1 and "kv-connector-missing" in rules(out, "error") and ASSUMED not in rules(out), out


@pytest.mark.parametrize("api", ["v1alpha1"])  # v1beta1 graphs write the 1.x --disaggregation-mode
def test_an_unknown_dynamo_release_with_an_error_either_way_says_the_assumption(tmp_path, capsys, api):
    graph = _graph("my.io/team/dynamo-vllm:custom", api, ("--tensor-parallel-size", "3", "--connector", "nixl"))
    code, out = check(tmp_path, capsys, graph)
    assert code == 1 and "tp-heads-indivisible" in rules(out, "error") and ASSUMED in rules(out, "warning"), out


@pytest.mark.parametrize("api", ["v1alpha1"])  # v1beta1 graphs write --disaggregation-mode, which 0.6.1 refuses
@pytest.mark.parametrize("connector", ["kvbm", "lmcache"])
def test_a_pre_1_0_worker_gets_the_connector_its_connector_flag_names(tmp_path, capsys, api, connector):
    # Before: NixlConnector whatever --connector said, judged by the NIXL rules ("compatible").
    code, out = check(tmp_path, capsys, _graph(f"{RUNTIME}0.6.1", api, ("--connector", connector)))
    assert code == 3 and not rules(out, "error"), out
    assert any("not vLLM's NixlConnector" in n["reason"] for n in out["notChecked"]), out


@pytest.mark.parametrize("api", ["v1alpha1"])  # v1beta1 graphs write the 1.x --disaggregation-mode
def test_kvbm_and_nixl_on_prefill_is_dynamos_pd_connector_around_nixl(tmp_path, capsys, api):
    # Dynamo's KVBM example: prefill --connector kvbm nixl (PdConnector[DynamoConnector, NixlConnector]), decode the
    # default; an unknown release named --connector, the flag of the releases that build the connector: a warning.
    for image, assumed in ((f"{RUNTIME}0.6.1", False), ("my.io/team/dynamo-vllm:custom", True)):
        code, out = check(tmp_path, capsys, _graph(image, api, prefill_extra=("--connector", "kvbm", "nixl")))
        assert not rules(out, "error") and "multi-connector-child-not-checked" in rules(out, "warning"), out
        assert (ASSUMED in rules(out, "warning")) is assumed, out
        assert not any(ASSUMED in n["reason"] for n in out["notChecked"]), out


@pytest.mark.parametrize("api", ["v1alpha1", "v1beta1"])
def test_a_pre_1_0_worker_with_connector_none_has_no_connector(tmp_path, capsys, api):
    code, out = check(tmp_path, capsys, _graph(f"{RUNTIME}0.6.1", api, ("--connector", "none")))
    assert code == 1 and "kv-connector-missing" in rules(out, "error"), out


@pytest.mark.parametrize(("image", "missing"), [(f"{RUNTIME}0.6.1", False), (f"{RUNTIME}1.0.1", True)])
def test_a_known_release_says_nothing_assumed(tmp_path, capsys, image, missing):
    code, out = check(tmp_path, capsys, _graph(image, "v1alpha1"))
    assert ASSUMED not in rules(out) and not out["notChecked"], out
    assert ("kv-connector-missing" in rules(out, "error")) is missing, out


@pytest.mark.parametrize(("argv", "release", "connector", "noted"), [
    ([], (0, 9, 1), "NixlConnector", False), ([], None, "NixlConnector", True), ([], (1, 1, 0), None, False),
    (["--connector", "kvbm"], (0, 9, 1), "DynamoConnector", False), (["--connector=lmcache"], None, "LMCacheConnectorV1", True),
    (["--connector", "nixl", "kvbm", "--tensor-parallel-size", "2"], (0, 9, 1), "PdConnector", False),
    (["--connector", "none"], None, None, True), (["--connector"], (0, 9, 1), None, False),
    (["--disaggregation-mode", "prefill"], None, None, False), (["--disaggregation-mode=decode"], None, None, False),
    (["--is-prefill-worker"], None, "NixlConnector", True),
])
def test_added_connector(argv, release, connector, noted):
    config, note = added_connector(["dynamo.vllm", "--model", "M", *argv], release, "img")
    assert config.get("kv_connector") == connector and bool(note) is noted


# --- 4. render/engine.py resolves the vLLM version once per engine's args ------------------------------------------


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.23.0", "vllm/vllm-openai:v0.28.0"])
def test_vllm_args_resolve_the_version_once(monkeypatch, image):
    # Before: a hybrid model's decode args resolved it twice (prefix caching, then async scheduling).
    import pdd_operator.render.engine as engine
    from tests.unit.test_leftovers_31 import _nemotron_spec
    calls = []
    real = engine.resolve_version

    def counted(*a, **k):
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(engine, "resolve_version", counted)
    engine.vllm_args(_nemotron_spec(image), "decode")
    assert len(calls) == 1, calls


# --- 4. rule sources cite vLLM before the seed ---------------------------------------------------------------------


def test_rule_sources_cite_vllm_first_and_the_seed_as_secondary():
    from pdd_operator.compat.rules import CHECKS
    seeded = {r.id: r.source for r in CHECKS if "seed 000" in r.source}
    assert seeded, "the seed stays as a secondary reference"
    bad = {i: s for i, s in seeded.items() if s.startswith("seed 000") or "secondary: seed 000" not in s}
    assert not bad, bad


# --- 3. hybrid MLA models (Kimi Linear: KDA + MLA) -----------------------------------------------------------------

GEOMETRY = "hybrid-hetero-tp-block-geometry"
KIMI_LINEAR = "moonshotai/Kimi-Linear-48B-A3B-Instruct"


def _kimi_pair(tmp_path, image: str, p_tp: int, d_tp: int, model: str = KIMI_LINEAR,
               config: dict | None = None) -> tuple[list[dict], tuple[str, ...]]:
    import json

    def engine(role: str, tp: int, kv: str) -> dict:
        labels = {"app": "k", "llm-d.ai/role": role}
        container = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
                     "args": [model, "--tensor-parallel-size", str(tp), "--no-enable-prefix-caching",
                              "--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": kv})],
                     "env": [POD_IP, {"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}],
                     "resources": {"limits": {"nvidia.com/gpu": str(tp)}}}
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": role, "labels": labels},
                "spec": {"selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}
    extra: tuple[str, ...] = ()
    if config is not None:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config))
        extra = ("--model-config", str(path))
    return [engine("prefill", p_tp, "kv_producer"), engine("decode", d_tp, "kv_consumer")], extra


#: Kimi Linear's attention shape as config.json gives it: MLA (kv_lora_rank) with 32 heads, KDA linear attention.
KIMI_CONFIG = {"architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear", "kv_lora_rank": 512,
               "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128, "num_hidden_layers": 27,
               "hidden_size": 2304, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize(("p_tp", "d_tp"), [(2, 4), (4, 2), (1, 8)])
def test_hybrid_mla_blocks_differ_at_any_heterogeneous_tp(tmp_path, capsys, p_tp, d_tp):
    # Before: TP within the 32 heads read as an unshrunk GQA page, both roles the same block: silent.
    docs, extra = _kimi_pair(tmp_path, "vllm/vllm-openai:v0.32.0", p_tp, d_tp, config=KIMI_CONFIG)
    _, out = check(tmp_path, capsys, *docs, extra=extra)
    found = [f for r in out["results"] for f in r["findings"] if f["rule"] == GEOMETRY]
    assert found and "MLA page per token does not shrink" in found[0]["message"], out


def test_hybrid_mla_geometry_before_0_27_is_not_checked(tmp_path, capsys):
    docs, extra = _kimi_pair(tmp_path, "vllm/vllm-openai:v0.26.0", 2, 4, config=KIMI_CONFIG)
    code, out = check(tmp_path, capsys, *docs, extra=extra)
    assert code == 3 and GEOMETRY not in rules(out), out
    assert any(f"{GEOMETRY} cannot be decided" in n["reason"] and "hybrid MLA" in n["reason"]
               for n in out["notChecked"]), out


@pytest.mark.parametrize(("model", "config", "tps"), [
    (KIMI_LINEAR, KIMI_CONFIG, (4, 4)),  # equal TP: one geometry
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", None, (1, 2)),  # GDN with GQA attention: within its KV heads
])
def test_hybrid_geometry_controls(tmp_path, capsys, model, config, tps):
    docs, extra = _kimi_pair(tmp_path, "vllm/vllm-openai:v0.32.0", *tps, model=model, config=config)
    _, out = check(tmp_path, capsys, *docs, extra=extra)
    assert out["results"] and GEOMETRY not in rules(out), out


@pytest.mark.parametrize(("model", "hf", "mla"), [
    (KIMI_LINEAR, None, True), ("x/y", "KimiLinearForCausalLM", True), ("x/y", "Glm5NextForConditionalGeneration", True),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", None, False), ("deepseek-ai/DeepSeek-V3.2", None, False),
])
def test_the_model_table_knows_hybrid_mla(model, hf, mla):
    from pdd_operator.vllm.architectures import traits
    t = traits(None, None, hf, model)
    assert t.mla_attention is mla, t
    if mla:
        assert t.architecture == "hybrid-ssm", t
