"""Rule scopes re-read from vLLM's code per release (rules round 30), each with variants that fail without the fix and
negative controls.

- ``multi-connector-params-producers``: vLLM's MultiConnector refuses a second kv_transfer_params producer only up to
  0.24.0 ("Only one connector can produce KV transfer params"); from 0.25.0 it merges the children's params
  (vllm-project/vllm#46777) and LMCacheMPConnector beside NIXL fails nothing.
- ``nixl-backend-unknown``: from 0.11.0 (the first release that reads ``kv_connector_extra_config.backends``) a
  plugin name in another case (``ucx``, ``Mooncake``) makes NIXL skip the backend and vLLM's register_memory raise
  KeyError; 0.9.0-0.10.2 read no list and run UCX, so a one-sided LIBFABRIC there is no backend mismatch.
- ``kv-cache-dtype-unknown``: each release's ``CacheDType`` (turboquant_* and nvfp4 from 0.20.0, octave_* from
  0.33.0, ...); the packed formats have their own width class.
- ``hetero-tp-kv-layout``: a turboquant_* KV cache runs LBNHC from 0.34.0, so heterogeneous TP's head splitting fails.
- ``lora-adapters-differ``: no LoRA setting enters the NIXL hash or the KV layout; an adapter served by one role only
  fails the requests naming it on the other (404), a warning; --enable-lora / --max-lora-rank alone say nothing.
- ``mm-inputs-differ``: --language-model-only or a --limit-mm-per-prompt of 0 on one role changes neither the KV
  cache nor the hash; requests with that modality fail on that role, a warning.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

MULTI = "multi-connector-params-producers"


def _kv(role, connector="NixlConnector", **extra):
    return json.dumps({"kv_connector": connector, "kv_role": role, **extra})


def _multi(role, *children):
    return json.dumps({"kv_connector": "MultiConnector", "kv_role": role, "kv_connector_extra_config": {
        "connectors": [{"kv_connector": c, "kv_role": role if c == "NixlConnector" else "kv_both"} for c in children]}})


def _pair(model, image, kv_p, kv_d, args_p=(), args_d=(), env=(), gpus=(1, 1)):
    docs = []
    for role, kv, args, n in (("prefill", kv_p, args_p, gpus[0]), ("decode", kv_d, args_d, gpus[1])):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [model, *args, "--kv-transfer-config", kv], "env": [POD_IP, *env],
             "resources": {"limits": {"nvidia.com/gpu": str(n)}},
             "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return docs


def _messages(out, rule):
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- MultiConnector: a second kv_transfer_params producer, by release ----------------------------------------------

@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.25.0", "vllm/vllm-openai:v0.28.0",
                                   "vllm/vllm-openai:v0.33.0", "vllm/vllm-openai:v0.34.0"])
def test_lmcache_mp_beside_nixl_is_fine_where_multiconnector_merges_the_params(tmp_path, capsys, image):
    docs = _pair("Qwen/Qwen3-8B", image, _multi("kv_producer", "NixlConnector", "LMCacheMPConnector"),
                 _multi("kv_consumer", "NixlConnector", "LMCacheMPConnector"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and MULTI not in rules(out), image


# 0.18.1 runs vLLM's own LMCacheMPConnector, which returns None (no finding since fixE: test_public_report_kinds_fixE.py);
# 0.22.0-0.24.0 prefer the lmcache package's class, so they still warn
@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.22.0", "vllm/vllm-openai:v0.24.0"])
def test_lmcache_mp_beside_nixl_still_warns_before_the_merge(tmp_path, capsys, image):
    docs = _pair("Qwen/Qwen3-8B", image, _multi("kv_producer", "NixlConnector", "LMCacheMPConnector"),
                 _multi("kv_consumer", "NixlConnector", "LMCacheMPConnector"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and MULTI in rules(out, "warning"), image
    assert all("0.25.0" in m for m in _messages(out, MULTI)) or all(
        "0.25.0" in f["fix"] for r in out["results"] for f in r["findings"] if f["rule"] == MULTI)


# --- NIXL backend names, by release ---------------------------------------------------------------------------------

UNKNOWN, FABRIC = "nixl-backend-unknown", "nixl-backend-fabric-mismatch"


def _backends(role, *names):
    return _kv(role, kv_connector_extra_config={"backends": list(names)})


@pytest.mark.parametrize(("image", "name"), [("vllm/vllm-openai:v0.20.2", "ucx"), ("vllm/vllm-openai:v0.11.0", "ucx"),
                                             ("vllm/vllm-openai:v0.34.0", "Mooncake"),
                                             ("vllm/vllm-openai:v0.28.0", "libfabric")])
def test_a_plugin_name_in_another_case_stops_the_engine(tmp_path, capsys, image, name):
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", image, _backends("kv_producer", name),
                 _backends("kv_consumer", name))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and UNKNOWN in rules(out, "error"), (image, name)
    assert len(_messages(out, UNKNOWN)) == 2 and all(name.upper() in m for m in _messages(out, UNKNOWN))


def test_a_name_no_plugin_has_is_a_warning(tmp_path, capsys):
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.26.0", _backends("kv_producer", "UCX", "RDMA"),
                 _backends("kv_consumer", "UCX", "RDMA"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and UNKNOWN in rules(out, "warning") and UNKNOWN not in rules(out, "error")


@pytest.mark.parametrize("names", [("UCX",), ("LIBFABRIC",), ("UCX", "GDS_MT")])
def test_plugin_names_as_nixl_writes_them_say_nothing(tmp_path, capsys, names):
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.20.2", _backends("kv_producer", *names),
                 _backends("kv_consumer", *names))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and UNKNOWN not in rules(out), names


def test_releases_before_0_11_do_not_read_the_backend_list(tmp_path, capsys):
    # 0.9.0-0.10.2 create the agent with NIXL's default config (UCX): a LIBFABRIC decode is a UCX decode there.
    for image in ("vllm/vllm-openai:v0.10.2", "vllm/vllm-openai:v0.9.2"):
        docs = _pair("meta-llama/Llama-3.1-8B-Instruct", image, _kv("kv_producer"), _backends("kv_consumer", "LIBFABRIC"))
        code, out = check(tmp_path, capsys, *docs)
        assert FABRIC not in rules(out, "error") and code == 0, image
        docs = _pair("meta-llama/Llama-3.1-8B-Instruct", image, _backends("kv_producer", "ucx"),
                     _backends("kv_consumer", "ucx"))
        code, out = check(tmp_path, capsys, *docs)
        assert code == 0 and UNKNOWN not in rules(out), image
    # control: from 0.11.0 the same one-sided LIBFABRIC is read, and the agents share no backend
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.11.0", _kv("kv_producer"),
                 _backends("kv_consumer", "LIBFABRIC"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and FABRIC in rules(out, "error")


# --- --kv-cache-dtype values, by release ----------------------------------------------------------------------------

DTYPE = "kv-cache-dtype-unknown"


@pytest.mark.parametrize(("image", "dtype"), [("vllm/vllm-openai:v0.19.1", "turboquant_k8v4"),
                                              ("vllm/vllm-openai:v0.14.0", "nvfp4"),
                                              ("vllm/vllm-openai:v0.27.1", "nvfp4_4over6"),
                                              ("vllm/vllm-openai:v0.32.0", "octave_k3v4"),
                                              ("vllm/vllm-openai:v0.31.0", "ultraquant_4bit"),
                                              ("vllm/vllm-openai:v0.24.0", "int4_per_token_head"),
                                              ("vllm/vllm-openai:v0.20.2", "FP8")])
def test_a_kv_cache_dtype_the_release_lacks_stops_the_engine(tmp_path, capsys, image, dtype):
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", image, _kv("kv_producer"), _kv("kv_consumer"),
                 args_p=("--kv-cache-dtype", dtype), args_d=("--kv-cache-dtype", dtype))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and DTYPE in rules(out, "error"), (image, dtype)
    assert len(_messages(out, DTYPE)) == 2


@pytest.mark.parametrize(("image", "dtype"), [("vllm/vllm-openai:v0.20.0", "turboquant_k8v4"),
                                              ("vllm/vllm-openai:v0.34.0", "octave_k3v3_compact"),
                                              ("vllm/vllm-openai:v0.28.0", "nvfp4_4over6"),
                                              ("vllm/vllm-openai:v0.11.0", "bfloat16"),
                                              ("vllm/vllm-openai:v0.9.2", "fp8_e5m2"),
                                              ("vllm/vllm-openai:v0.25.0", "int4_per_token_head")])
def test_a_kv_cache_dtype_the_release_has_or_not_read_says_nothing(tmp_path, capsys, image, dtype):
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", image, _kv("kv_producer"), _kv("kv_consumer"),
                 args_p=("--kv-cache-dtype", dtype), args_d=("--kv-cache-dtype", dtype))
    _, out = check(tmp_path, capsys, *docs)
    assert DTYPE not in rules(out), (image, dtype)


def test_a_dtype_no_release_has_is_a_warning_where_plugins_may_register_it(tmp_path, capsys):
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.33.0", _kv("kv_producer"), _kv("kv_consumer"),
                 args_p=("--kv-cache-dtype", "mxfp4_kv"), args_d=("--kv-cache-dtype", "mxfp4_kv"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and DTYPE in rules(out, "warning") and DTYPE not in rules(out, "error")


def test_packed_kv_formats_have_their_own_width():
    from pdd_operator.compat.rules.must_match import _kv_width

    assert _kv_width("turboquant_k8v4") != _kv_width("auto") and _kv_width("nvfp4") != _kv_width("fp8")
    assert _kv_width("fp8_per_token_head") != _kv_width("fp8") and _kv_width("fp8_e4m3") == _kv_width("fp8")
    assert _kv_width("float16") == _kv_width("bfloat16") == _kv_width("auto")


@pytest.mark.parametrize(("version", "refused"), [("0.19.1", True), ("0.20.2", False)])
def test_a_pddeployment_may_name_the_new_dtypes_and_is_judged_on_its_release(version, refused):
    from pdd_operator.api.spec import PDDeploymentSpec
    from pdd_operator.compat import evaluate

    spec = PDDeploymentSpec.model_validate({
        "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"}, "engine": {"vllmVersion": version},
        "kvCache": {"dtype": "turboquant_k8v4"}, "prefill": {"replicas": 1}, "decode": {"replicas": 1}})
    found = [f for f in evaluate(spec).findings if f.rule == DTYPE]
    assert bool(found) == refused and all(f.severity == "error" for f in found)


# --- a TurboQuant KV cache is token-major from 0.34.0: no head splitting for heterogeneous TP -----------------------

LAYOUT = "hetero-tp-kv-layout"


def _tq(image, dtype, tp_p, tp_d, model="meta-llama/Llama-3.1-8B-Instruct", kv_d=None):
    return _pair(model, image, _kv("kv_producer"), kv_d or _kv("kv_consumer"),
                 args_p=("--kv-cache-dtype", dtype, "--tensor-parallel-size", str(tp_p)),
                 args_d=("--kv-cache-dtype", dtype, "--tensor-parallel-size", str(tp_d)), gpus=(tp_p, tp_d))


@pytest.mark.parametrize(("dtype", "tps"), [("turboquant_k8v4", (1, 2)), ("turboquant_3bit_nc", (4, 2))])
def test_turboquant_with_heterogeneous_tp_on_034_is_refused(tmp_path, capsys, dtype, tps):
    code, out = check(tmp_path, capsys, *_tq("vllm/vllm-openai:v0.34.0", dtype, *tps))
    assert code == 1 and LAYOUT in rules(out, "error"), (dtype, tps)
    assert "LBNHC" in _messages(out, LAYOUT)[0]


@pytest.mark.parametrize(("image", "dtype", "tps"), [
    ("vllm/vllm-openai:v0.33.0", "turboquant_k8v4", (1, 2)),  # the 0.33 backend declares no layout: NIXL's LBHNC
    ("vllm/vllm-openai:v0.34.0", "turboquant_k8v4", (2, 2)),  # equal TP splits no heads
    ("vllm/vllm-openai:v0.34.0", "fp8", (1, 2)),              # fp8 takes NIXL's LBHNC
])
def test_turboquant_controls_say_nothing(tmp_path, capsys, image, dtype, tps):
    _, out = check(tmp_path, capsys, *_tq(image, dtype, *tps))
    assert LAYOUT not in rules(out), (image, dtype, tps)


def test_turboquant_with_the_decode_permuting_is_still_refused(tmp_path, capsys):
    # fixX: the handshake turns the permutation on only for a remote LBHNC cache into a local LBNHC one
    # (nixl/base_worker.py 0.34.0 l.864, l.2857-2870); both TurboQuant caches are LBNHC, so the head-split guard runs
    kv_d = _kv("kv_consumer", enable_permute_local_kv=True)
    _, out = check(tmp_path, capsys, *_tq("vllm/vllm-openai:v0.34.0", "turboquant_k8v4", 1, 2, kv_d=kv_d))
    assert LAYOUT in rules(out, "error") and "enable_permute_local_kv does not help" in _messages(out, LAYOUT)[0]


def test_turboquant_with_the_decode_permuting_through_a_host_buffer_is_a_warning(tmp_path, capsys):
    # with kv_buffer_device cpu the decode's host copy is LBHNC (nixl/base_worker.py 0.34.0 l.1371-1380): not judged
    kv_d = _kv("kv_consumer", enable_permute_local_kv=True, kv_buffer_device="cpu")
    _, out = check(tmp_path, capsys, *_tq("vllm/vllm-openai:v0.34.0", "turboquant_k8v4", 1, 2, kv_d=kv_d))
    assert LAYOUT in rules(out, "warning") and LAYOUT not in rules(out, "error")


# --- LoRA on one role only: the request path, not the KV transfer ---------------------------------------------------

LORA = "lora-adapters-differ"
_LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize(("args_p", "args_d"), [
    ((), ("--enable-lora", "--lora-modules", "sql=/adapters/sql")),
    (("--enable-lora", "--lora-modules", "sql=/a/sql", "chat=/a/chat"), ("--enable-lora", "--lora-modules", "sql=/a/sql")),
    (("--enable-lora", "--lora-modules", '{"name": "sql", "path": "/a/sql"}'), ("--enable-lora",)),
])
def test_an_adapter_served_by_one_role_only_is_a_warning(tmp_path, capsys, args_p, args_d):
    docs = _pair(_LLAMA, "vllm/vllm-openai:v0.20.2", _kv("kv_producer"), _kv("kv_consumer"), args_p=args_p,
                 args_d=args_d)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and LORA in rules(out, "warning") and LORA not in rules(out, "error")


@pytest.mark.parametrize(("args_p", "args_d"), [
    (("--enable-lora", "--max-lora-rank", "64"), ()),  # LoRA on, no adapter: every request names the base model
    (("--enable-lora", "--max-lora-rank", "64", "--lora-modules", "sql=/a/sql"),
     ("--enable-lora", "--max-lora-rank", "16", "--lora-modules", "sql=/b/sql")),
])
def test_lora_settings_that_break_no_request_say_nothing(tmp_path, capsys, args_p, args_d):
    docs = _pair(_LLAMA, "vllm/vllm-openai:v0.34.0", _kv("kv_producer"), _kv("kv_consumer"), args_p=args_p,
                 args_d=args_d)
    _, out = check(tmp_path, capsys, *docs)
    assert LORA not in rules(out) and not rules(out, "error")


# --- multimodal inputs one role refuses: the request path, not the KV transfer --------------------------------------

MM = "mm-inputs-differ"
_VL = "Qwen/Qwen2.5-VL-7B-Instruct"


@pytest.mark.parametrize(("args_p", "args_d"), [
    ((), ("--language-model-only",)),
    (("--limit-mm-per-prompt", '{"image": 0, "video": 0}'), ()),
    (("--limit-mm-per-prompt", '{"image": {"count": 0}}'), ("--limit-mm-per-prompt", '{"image": 4}')),
])
def test_multimodal_inputs_one_role_refuses_are_a_warning(tmp_path, capsys, args_p, args_d):
    docs = _pair(_VL, "vllm/vllm-openai:v0.34.0", _kv("kv_producer"), _kv("kv_consumer"), args_p=args_p, args_d=args_d)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and MM in rules(out, "warning") and MM not in rules(out, "error"), (args_p, args_d)


@pytest.mark.parametrize(("args_p", "args_d"), [
    (("--language-model-only",), ("--language-model-only",)),
    (("--limit-mm-per-prompt", '{"image": 2}'), ()),
    (("--limit-mm-per-prompt", '{"image": 0}'), ("--limit-mm-per-prompt", '{"image": 0, "video": 3}')),
])
def test_the_same_multimodal_inputs_on_both_roles_say_nothing(tmp_path, capsys, args_p, args_d):
    docs = _pair(_VL, "vllm/vllm-openai:v0.34.0", _kv("kv_producer"), _kv("kv_consumer"), args_p=args_p, args_d=args_d)
    _, out = check(tmp_path, capsys, *docs)
    assert MM not in rules(out) and not rules(out, "error"), (args_p, args_d)
