"""Variants of what the eighty-third public-report set (tests/unit/data/public_reports_83) taught: serving knobs that
differ between the roles, with negative controls.

- ``vllm-rs serve MODEL [frontend flags] -- [engine flags]`` (vLLM's Rust frontend, 0.27.0 on) starts an engine like
  ``vllm serve`` (:func:`pdd_operator.vllm.script.entry_point`), in a script or a container command;
- ``served-model-name-differs``: roles that answer to no common model name fail every request on one of them (404),
  a warning; equal or overlapping names, names on neither role, ``VLLM_SKIP_MODEL_NAME_VALIDATION`` (0.21.0 on) and
  ``dynamo.vllm`` workers are not warned;
- ``lora-adapters-differ`` also warns for ``--enable-lora`` on one role only (adapters loaded at run time);
- a MooncakeConnector pair of 0.25.0-0.34.0 with equal TP and PP 1 on both roles is judged (ok where no rule fails),
  other shapes there stay "not checked" (:data:`pdd_operator.compat.rules.mooncake.MOONCAKE_JUDGED_NO_PP`).
"""

from __future__ import annotations

import pytest

from pdd_operator.vllm.script import entry_point
from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import check, container, rules, workload

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _script(tmp_path, capsys, text: str, *extra: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "pair.sh", *extra)


def _serve(gpu: int, port: int, side: int, args: str, model: str = "Qwen/Qwen3-0.6B", rust: bool = False,
           kv: str = KV) -> str:
    launch = (f"vllm-rs serve {model} --host 127.0.0.1 --port {port} --grpc-port {50051 + gpu} --max-model-len 4096 "
              f"-- {args}" if rust else f"vllm serve {model} --port {port} {args}")
    return (f"CUDA_VISIBLE_DEVICES={gpu} VLLM_NIXL_SIDE_CHANNEL_PORT={side} {launch} "
            f"--kv-transfer-config '{kv}' &\n")


def _pair(p_args: str, d_args: str, version: str = "0.34.0", **kw) -> str:
    return (f"pip install vllm=={version}\n" + _serve(1, 8110, 20097, p_args, **kw) + _serve(0, 8100, 5600, d_args, **kw)
            + "wait\n")


# --- vllm-rs serve read as an engine launch ---------------------------------------------------------------------


def test_entry_point_reads_a_rust_frontend_launch_as_vllm_serve():
    words = ["exec", "/usr/bin/vllm-rs", "serve", "m", "--port", "8000", "--", "--enforce-eager", "-tp", "2"]
    assert entry_point(words) == ["vllm", "serve", "m", "--port", "8000", "--enforce-eager", "-tp", "2"]
    assert entry_point(["vllm-rs", "serve", "m", "--max-model-len", "4096"]) == [
        "vllm", "serve", "m", "--max-model-len", "4096"]
    assert entry_point(["vllm-rs", "bench", "m"]) == []  # not an engine


@pytest.mark.parametrize("model", ["Qwen/Qwen3-0.6B", "meta-llama/Llama-3.1-8B-Instruct"])
def test_a_rust_frontend_pair_is_checked_not_skipped(tmp_path, capsys, model):
    code, out = _script(tmp_path, capsys, _pair("--enforce-eager", "--enforce-eager", model=model, rust=True))
    assert code == 0 and not out.get("notChecked"), out


def test_a_rust_frontend_pair_is_refused_for_what_breaks_its_engines(tmp_path, capsys):
    # the engine flags after -- are read: a KV dtype on one role breaks the NIXL hash as under vllm serve
    code, out = _script(tmp_path, capsys, _pair("--kv-cache-dtype fp8", "", rust=True))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out


def test_a_rust_frontend_pair_in_kubernetes_containers_is_checked(tmp_path, capsys):
    def role(r):
        c = container(["serve", "Qwen/Qwen3-0.6B", "--port", "8000", "--", "--enforce-eager", "--kv-transfer-config",
                       KV, *(["--dtype", "float16"] if r == "decode" else [])],
                      image="vllm/vllm-openai:v0.34.0", command=["vllm-rs"])
        return workload(f"q-{r}", r, c)
    code, out = check(tmp_path, capsys, role("prefill"), role("decode"))
    assert code == 1 and "dtype-mismatch" in rules(out, "error"), out


# --- served-model-name-differs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("p_args", "d_args", "warned"), [
    ("", "--served-model-name qwen", True),                              # decode only: no common name
    ("--served-model-name a", "--served-model-name b", True),            # both, different
    ("--served-model-name qwen", "--served-model-name qwen", False),     # equal
    ("--served-model-name a qwen", "--served-model-name qwen", False),   # overlapping (nargs="+")
    ("", "--served-model-name Qwen/Qwen3-0.6B", False),                  # the model's own name
    ("", "", False),                                                     # neither
])
def test_served_model_names_without_a_common_name_are_warned(tmp_path, capsys, p_args, d_args, warned):
    code, out = _script(tmp_path, capsys, _pair(f"--enforce-eager {p_args}", f"--enforce-eager {d_args}",
                                                version="0.30.0"))
    assert code == 0, out
    assert ("served-model-name-differs" in rules(out, "warning")) is warned, out


@pytest.mark.parametrize(("version", "warned"), [("0.30.0", False), ("0.20.0", True)])
def test_skipping_the_model_name_check_is_read_from_its_release(tmp_path, capsys, version, warned):
    # VLLM_SKIP_MODEL_NAME_VALIDATION is read from 0.21.0 (envs.py 0.21.0 line 260; absent in 0.20.0)
    text = _pair("", "--served-model-name qwen", version=version).replace(
        "CUDA_VISIBLE_DEVICES=0", "VLLM_SKIP_MODEL_NAME_VALIDATION=1 CUDA_VISIBLE_DEVICES=0")
    code, out = _script(tmp_path, capsys, text)
    assert ("served-model-name-differs" in rules(out, "warning")) is warned, out


def test_served_model_names_in_deployments_and_rust_frontends(tmp_path, capsys):
    docs = [workload(f"l-{r}", r, container(["meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config", KV,
                                             *(["--served-model-name", "llama"] if r == "prefill" else [])]))
            for r in ("prefill", "decode")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and "served-model-name-differs" in rules(out, "warning"), out
    code, out = _script(tmp_path, capsys, _pair("--served-model-name a", "--served-model-name b", rust=True))
    assert code == 0 and "served-model-name-differs" in rules(out, "warning"), out


# --- lora-adapters-differ: adapters loaded at run time on one role ---------------------------------------------------


@pytest.mark.parametrize(("p_args", "d_args", "warned"), [
    ("", "--enable-lora --max-loras 4", True),                                  # decode only
    ("--enable-lora --max-lora-rank 64", "", True),                             # prefill only
    ("--enable-lora --max-loras 4", "--enable-lora --max-loras 1", False),      # both, different capacity
    ("--enable-lora --max-lora-rank 64", "--enable-lora --max-lora-rank 16", False),
    ("", "", False),
])
def test_runtime_lora_on_one_role_only_is_warned(tmp_path, capsys, p_args, d_args, warned):
    # VLLM_ALLOW_RUNTIME_LORA_UPDATING exported for both engines, as Dynamo's disagg_lora.sh does: it takes effect
    # only where --enable-lora builds LoRA support
    for rust, version in ((False, "0.20.0"), (True, "0.34.0")):
        text = "export VLLM_ALLOW_RUNTIME_LORA_UPDATING=true\n" + _pair(p_args, d_args, version=version, rust=rust)
        code, out = _script(tmp_path, capsys, text)
        assert code == 0, out
        assert ("lora-adapters-differ" in rules(out, "warning")) is warned, (rust, out)


def test_lora_on_one_role_without_runtime_loading_serves_no_adapter_by_name(tmp_path, capsys):
    # no --lora-modules and no run-time loading: every request names the base model (set 30's negative control)
    code, out = _script(tmp_path, capsys, _pair("", "--enable-lora --max-loras 4", rust=True))
    assert code == 0 and "lora-adapters-differ" not in rules(out), out


def test_adapter_names_on_one_role_still_name_them(tmp_path, capsys):
    code, out = _script(tmp_path, capsys, _pair("--enable-lora --lora-modules sql=/a/sql", "--enable-lora"))
    msgs = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "lora-adapters-differ"]
    # (a kv_both pair is judged both ways round: one finding per orientation, each naming the adapter)
    assert code == 0 and msgs and all("sql" in m and "(--enable-lora)" not in m for m in msgs), out


# --- MooncakeConnector pairs of 0.25.0-0.34.0 ----------------------------------------------------------------------


def _mooncake(version: str, p_extra: str = "", d_extra: str = "") -> str:
    kv = '{{"kv_connector":"MooncakeConnector","kv_role":"{}"}}'
    return (f"pip install vllm=={version} mooncake-transfer-engine\n"
            f"CUDA_VISIBLE_DEVICES=0 VLLM_MOONCAKE_BOOTSTRAP_PORT=8998 vllm serve Qwen/Qwen3-8B --port 8100 "
            f"--block-size 128 {p_extra} --kv-transfer-config '{kv.format('kv_producer')}' &\n"
            f"CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen3-8B --port 8200 --block-size 128 {d_extra} "
            f"--kv-transfer-config '{kv.format('kv_consumer')}' &\nwait\n")


@pytest.mark.parametrize("version", ["0.25.0", "0.28.0", "0.30.0", "0.34.0"])
def test_an_equal_shape_mooncake_pair_of_a_read_release_is_judged(tmp_path, capsys, version):
    code, out = _script(tmp_path, capsys, _mooncake(version, d_extra="--no-enable-prefix-caching --max-model-len 2048"))
    assert code == 0 and not out.get("notChecked"), out


@pytest.mark.parametrize(("version", "p_extra", "d_extra"), [
    # hetero TP on 0.29.0-0.34.0 is judged since set 96 (tests/unit/test_public_report_kinds_96.py)
    ("0.30.0", "-pp 2", "-pp 2"),                 # pipeline parallel: remote PP handling from 0.30.0 not described
    ("0.34.1", "", ""),                           # a release not read
])
def test_other_mooncake_pairs_after_0_24_stay_not_checked(tmp_path, capsys, version, p_extra, d_extra):
    code, out = _script(tmp_path, capsys, _mooncake(version, p_extra, d_extra).replace(
        "CUDA_VISIBLE_DEVICES=0 ", "CUDA_VISIBLE_DEVICES=0,1 " if "2" in p_extra else "CUDA_VISIBLE_DEVICES=0 "))
    assert code in (1, 3) and code != 0, out


def test_a_mooncake_pair_of_a_read_release_is_still_refused_for_a_kv_dtype(tmp_path, capsys):
    code, out = _script(tmp_path, capsys, _mooncake("0.30.0", d_extra="--kv-cache-dtype fp8"))
    assert code in (1, 3) and code != 0, out


def test_a_model_name_check_an_env_from_source_may_skip_says_so(tmp_path, capsys):
    # VLLM_SKIP_MODEL_NAME_VALIDATION may come from a ConfigMap not in the files (0.30.0 reads it): judged unset, as
    # every variable an envFrom source may set, and env-from-not-in-files names it
    def role(r):
        c = container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV,
                       *(["--served-model-name", "qwen"] if r == "decode" else [])], image="vllm/vllm-openai:v0.30.0",
                      envFrom=[{"configMapRef": {"name": "vllm-env"}}])
        return workload(f"q-{r}", r, c)
    code, out = check(tmp_path, capsys, role("prefill"), role("decode"))
    said = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "env-from-not-in-files"]
    assert code == 0 and "served-model-name-differs" in rules(out, "warning"), out
    assert said and "VLLM_SKIP_MODEL_NAME_VALIDATION" in said[0], out


def test_a_model_name_check_skipped_through_a_secret_is_not_warned(tmp_path, capsys):
    skip = {"name": "VLLM_SKIP_MODEL_NAME_VALIDATION", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    def role(r):
        c = container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV,
                       *(["--served-model-name", "qwen"] if r == "decode" else [])], image="vllm/vllm-openai:v0.30.0",
                      env=[skip] if r == "decode" else [])
        return workload(f"q-{r}", r, c)
    code, out = check(tmp_path, capsys, role("prefill"), role("decode"))
    assert code == 0 and "served-model-name-differs" not in rules(out), out
