"""The leftovers of issue 9 after sets 23-25 (session 26, second round), each as a kind, with variants and controls.

1. Architectures vLLM serves that the checker did not know (``architecture-unknown`` on MiMo-V2-Flash, GLM-5.3-Flash):
   vLLM's own model registry (vllm/model_executor/models/registry.py, 0.18.0-0.34.0) and the model files are read by
   ``dev/gen_vllm_model_registry.py`` into :mod:`pdd_operator.vllm.model_registry` (evidence per architecture:
   its interfaces, ``IsHybrid`` etc., and markers of MLA, cross-attention, sliding-window and SSM layers), classified by
   a pure function; model ids of the newest families map to their ``architectures`` name. An architecture added to the
   registry after 0.18.0 also bounds an unknown version from below: older engines refuse the model at startup
   (registry.py ``_raise_for_unsupported``), so only releases from there on are probed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdd_operator.api.spec import Architecture, SSMKind
from pdd_operator.vllm.architectures import HF_ARCHITECTURES, traits
from pdd_operator.vllm.model_registry import (
    _entries,
    classify,
    registry_family,
    registry_since,
    releases_read,
)
from tests.unit.test_turn2_variants import check, container, rules, workload

KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
DS = {"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}

# --- 1. architectures of vLLM's registry -------------------------------------------------------------------------


def test_the_table_holds_every_architecture_of_the_newest_registry_read():
    """The generated table against a snapshot of 0.34.0's registry keys (text generation + multimodal)."""
    snapshot = Path(__file__).parent / "data/vllm_registry_0.34.0.txt"
    names = {line.strip() for line in snapshot.read_text().splitlines() if line.strip() and not line.startswith("#")}
    current = {name for name, entry in _entries().items() if entry.get("evidence", {}).get("read_from") == "0.34.0"}
    assert releases_read()[-1] == (0, 34, 0)
    assert current == names


@pytest.mark.parametrize(("interfaces", "markers", "family"), [
    (["IsHybrid", "MixtureOfExperts", "SupportsMultiModal"], ["gdn", "mla", "moe"], (Architecture.HYBRID_SSM, SSMKind.GDN)),
    (["IsHybrid"], ["mamba2"], (Architecture.HYBRID_SSM, SSMKind.MAMBA2)),
    (["IsAttentionFree"], ["mamba1"], (Architecture.HYBRID_SSM, SSMKind.MAMBA1)),
    (["IsHybrid"], ["linear", "moe"], (Architecture.HYBRID_SSM, None)),       # lightning attention: no known kind
    (["IsHybrid"], ["gdn", "mamba2"], (Architecture.HYBRID_SSM, None)),       # two kinds: not settled
    (["MixtureOfExperts"], ["mla", "moe"], (Architecture.MLA, None)),
    (["SupportsMultiModal", "SupportsTranscription"], ["cross_attention"], (Architecture.ENCODER_DECODER, None)),
    (["SupportsMultiModal"], [], (Architecture.MULTIMODAL, None)),
    (["MixtureOfExperts"], ["sliding_window"], (Architecture.MOE, None)),
    ([], [], (Architecture.DENSE, None)),
])
def test_classify_evidence(interfaces, markers, family):
    assert classify(interfaces, markers) == family


@pytest.mark.parametrize(("name", "family", "since"), [
    ("MiMoV2FlashForCausalLM", (Architecture.MOE, None), None),                       # mimo_v2.py: MiMoV2MoE, SWA
    ("Glm5NextForCausalLM", (Architecture.HYBRID_SSM, SSMKind.GDN), (0, 30, 0)),      # glm5next: KDA + MLA, IsHybrid
    ("Glm5NextForConditionalGeneration", (Architecture.HYBRID_SSM, SSMKind.GDN), (0, 30, 0)),
    ("NemotronHForCausalLM", (Architecture.HYBRID_SSM, SSMKind.MAMBA2), None),
    ("WhisperForConditionalGeneration", (Architecture.ENCODER_DECODER, None), None),
    ("LlamaForCausalLM", (Architecture.DENSE, None), None),
])
def test_registry_architectures_of_real_models(name, family, since):
    assert registry_family(name) == family and registry_since(name) == since


#: Where the hand table refines the registry's evidence: sparse MLA is config-driven inside the DeepSeek code
#: (index_topk), Kimi-K2.5 composes a DeepSeek-V3 text model (no MLA marker in kimi_k25.py's own base chain).
REFINED = {"KimiK25ForConditionalGeneration", "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM",
           "DeepseekV4ForCausalLM", "DeepseekV4ForConditionalGeneration"}


def test_the_hand_table_agrees_with_the_registry_but_where_it_refines_it():
    differ = {n for n, fam in HF_ARCHITECTURES.items() if registry_family(n) not in (None, fam)}
    assert differ == REFINED


@pytest.mark.parametrize(("model", "hf", "family", "sliding"), [
    ("XiaomiMiMo/MiMo-V2-Flash", None, Architecture.MOE, True),
    ("/models/mimo", "MiMoV2FlashForCausalLM", Architecture.MOE, True),
    ("zai-org/GLM-5.3-Flash", None, Architecture.HYBRID_SSM, False),
    ("JaredforReal/GLM-5.3-Flash-4L", None, Architecture.HYBRID_SSM, False),
    ("zai-org/GLM-5.1-FP8", None, Architecture.SPARSE_MLA, False),
    ("/models/x", "Step3p5ForCausalLM", None, False),          # evidence decides, whatever it is: not unknown
])
def test_model_ids_and_architectures_resolve(model, hf, family, sliding):
    t = traits(None, None, hf, model)
    assert t.architecture is not None
    if family is not None:
        assert t.architecture == family and t.sliding_window == sliding


def test_an_unknown_name_stays_unknown():
    assert traits(None, None, None, "acme/secret-model-7b").architecture is None
    assert traits(None, None, "AcmeForCausalLM", "/models/x").architecture is None


def _pair(model, image, p_env=(), d_env=(), p_args=(), d_args=()):
    def one(role, kv, env, args):
        c = container([model, "--kv-transfer-config", kv, *args], image=image, env=list(env), gpus=8)
        return workload(f"m-{role}", role, c, app="m")
    return [one("prefill", KV_P, p_env, p_args), one("decode", KV_D, d_env, d_args)]


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.33.0", "vllm/vllm-openai:v0.34.0"])
def test_mimo_v2_flash_is_known(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_pair("XiaomiMiMo/MiMo-V2-Flash", image))
    assert code == 0 and "architecture-unknown" not in rules(out)


def test_glm53_flash_with_sd_on_the_decode_is_refused(tmp_path, capsys):
    """GLM-5.3-Flash has KDA (Mamba-style conv state) layers: vLLM >= 0.20 asserts the DS conv layout on every NIXL
    deployment of such a model (nixl base_worker.py), so DS on the prefill only is refused."""
    code, out = check(tmp_path, capsys, *_pair("zai-org/GLM-5.3-Flash", "vllm/vllm-openai:v0.32.0", p_env=[DS]))
    assert code == 1 and "ssm-conv-layout-ds" in rules(out, "error")


def test_glm53_flash_by_config_json_is_refused(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"architectures": ["Glm5NextForConditionalGeneration"], "model_type": "glm5_next"}))
    code, out = check(tmp_path, capsys, *_pair("/models/glm", "vllm/vllm-openai:v0.32.0", p_env=[DS]),
                      extra=["--model-config", str(cfg)])
    assert code == 1 and "ssm-conv-layout-ds" in rules(out, "error")


def test_glm53_flash_of_unknown_version_is_judged_from_the_release_that_has_it(tmp_path, capsys):
    """Unknown version: hybrid rules that refuse only releases before 0.30.0 (prefix caching with SSM, 0.22-0.26)
    cannot apply, since those releases refuse the architecture; the valid pair is not 'not checked'."""
    docs = _pair("zai-org/GLM-5.3-Flash", "vllm/vllm-openai:latest", p_env=[DS], d_env=[DS],
                 p_args=["--enable-prefix-caching"], d_args=["--enable-prefix-caching"])
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and not out.get("notChecked"), out
    message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "vllm-version-unknown")
    assert "from 0.30.0 on" in message


def test_an_old_architecture_of_unknown_version_is_probed_from_the_oldest_release(tmp_path, capsys):
    """Control: an architecture in the oldest registry read gives no floor (it may be older still)."""
    docs = _pair("ibm-granite/granite-4.0-h-small", "vllm/vllm-openai:latest", p_env=[DS], d_env=[DS],
                 p_args=["--enable-prefix-caching"], d_args=["--enable-prefix-caching"])
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and "hybrid-ssm-prefix-caching" in out["notChecked"][0]["reason"]


# --- 2. removed --kv-transfer-config keys whatever the connector ---------------------------------------------------


def _kv(connector, role, **extra):
    return json.dumps({"kv_connector": connector, "kv_role": role, **extra})


@pytest.mark.parametrize("connector", ["P2pNcclConnector", "LMCacheConnectorV1", "MooncakeConnector"])
@pytest.mark.parametrize(("image", "refused"), [
    ("vllm/vllm-openai:v0.32.0", True), ("vllm/vllm-openai:v0.34.0", True), ("vllm/vllm-openai:v0.31.0", False),
])
def test_removed_keys_are_refused_with_any_connector(tmp_path, capsys, connector, image, refused):
    """KVTransferConfig refuses kv_rank / kv_parallel_size from 0.32.0 while the flag is parsed, before the
    connector is looked up: the P2pNccl-era config (kv_rank, kv_parallel_size, kv_ip) fails on any connector."""
    extra = {"kv_rank": 0, "kv_parallel_size": 2, "kv_ip": "10.0.0.1"}
    docs = [workload("m-prefill", "prefill", container(["Qwen/Qwen3-8B", "--kv-transfer-config",
                                                        _kv(connector, "kv_producer", **extra)], image=image), app="m"),
            workload("m-decode", "decode", container(["Qwen/Qwen3-8B", "--kv-transfer-config",
                                                      _kv(connector, "kv_consumer", **extra)], image=image), app="m")]
    code, out = check(tmp_path, capsys, *docs)
    assert ("kv-transfer-config-removed-field" in rules(out, "error")) is refused, out
    # P2pNcclConnector is gone from vLLM's factory from 0.24.0 (p2p-nccl-connector-unavailable); an equal-shape
    # MooncakeConnector pair of 0.25.0-0.34.0 is judged (set 83: rules/mooncake.py MOONCAKE_JUDGED_NO_PP)
    assert code == (1 if refused or connector == "P2pNcclConnector" else 0 if connector == "MooncakeConnector" else 3), out


def test_a_foreign_connector_without_removed_keys_stays_not_checked(tmp_path, capsys):
    docs = [workload(f"m-{r}", r, container(["Qwen/Qwen3-8B", "--kv-transfer-config", _kv("LMCacheConnectorV1", k)],
                                            image="vllm/vllm-openai:v0.32.0"), app="m")
            for r, k in (("prefill", "kv_producer"), ("decode", "kv_consumer"))]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and not out["results"], out


# --- 3. --max-num-batched-tokens below --max-num-seqs -------------------------------------------------------------

SEQS = ["--max-num-batched-tokens", "128", "--max-num-seqs", "256"]


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.9.2", "vllm/vllm-openai:v0.10.1.1", "vllm/vllm-openai:v0.10.2",
                                   "vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.11.1", "vllm/vllm-openai:v0.32.0"])
def test_a_budget_below_max_num_seqs_is_refused_from_09(tmp_path, capsys, image):
    """SchedulerConfig raises 'max_num_batched_tokens (128) must be greater than or equal to max_num_seqs (256)' in
    _verify_args (0.9.0-0.11.0) and verify_max_model_len (0.11.1 on); V1 keeps both explicit values."""
    docs = _pair("Qwen/Qwen3-8B", image, p_args=SEQS)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "max-num-batched-tokens-below-max-model-len" in rules(out, "error"), out


def test_before_0111_chunked_prefill_off_is_overridden_so_only_the_seqs_refusal_holds(tmp_path, capsys):
    docs = _pair("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.10.2",
                 p_args=["--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192", "--max-model-len", "32768"])
    code, out = check(tmp_path, capsys, *docs)
    assert "max-num-batched-tokens-below-max-model-len" not in rules(out), out


@pytest.mark.parametrize("args", [["--max-num-batched-tokens", "256", "--max-num-seqs", "256"],
                                  ["--max-num-batched-tokens", "128"], ["--max-num-seqs", "1024"]])
def test_a_budget_at_or_above_max_num_seqs_or_one_flag_alone_passes(tmp_path, capsys, args):
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.10.2", p_args=args))
    assert "max-num-batched-tokens-below-max-model-len" not in rules(out), out


# --- 4. release candidates are unreleased code before their release ----------------------------------------------


@pytest.mark.parametrize(("text", "candidate", "judged_as"), [
    ("0.33.0rc2", "0.33.0rc2", (0, 32, 0)), ("v0.34.0rc1", "0.34.0rc1", (0, 33, 0)),
    ("v0.34.0rc1-cu129", "0.34.0rc1", (0, 33, 0)), ("0.20.2rc1", "0.20.2rc1", (0, 20, 1)),
    ("0.33.0", None, (0, 33, 0)), ("0.20.2rc1.dev265+gdd6b3a5ef", None, None),   # a dev build stays unknown
])
def test_a_release_candidate_reads_as_the_release_before(text, candidate, judged_as):
    from pdd_operator.vllm.versions import release_candidate, rules_version
    assert release_candidate(text) == candidate and rules_version(text) == judged_as


def test_a_candidate_image_is_judged_with_the_rules_before_and_warned(tmp_path, capsys):
    """kv_rank is refused from 0.32.0: a 0.32.0 candidate is judged with 0.31.0's rules (no refusal), never as the
    release, and says so (vllm-version-unverified)."""
    legacy = {"kv_rank": 0, "kv_parallel_size": 2}
    def docs(image):
        return [workload(f"m-{r}", r, container(["Qwen/Qwen3-8B", "--kv-transfer-config", _kv("NixlConnector", k, **legacy)],
                                                image=image), app="m")
                for r, k in (("prefill", "kv_producer"), ("decode", "kv_consumer"))]
    code, out = check(tmp_path, capsys, *docs("vllm/vllm-openai:v0.32.0rc1"))
    assert code == 0 and "vllm-version-unverified" in rules(out, "warning"), out
    message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "vllm-version-unverified")
    assert "0.32.0rc1 is a release candidate" in message and "rules of 0.31.0" in message
    code, out = check(tmp_path, capsys, *docs("vllm/vllm-openai:v0.32.0"))
    assert code == 1 and "vllm-version-unverified" not in rules(out)


def test_a_candidate_against_its_release_is_a_version_mismatch(tmp_path, capsys):
    """The NIXL handshake hashes vllm.__version__ ("0.33.0rc2" vs "0.33.0", nixl/metadata.py 0.33.0)."""
    p = workload("m-prefill", "prefill", container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV_P],
                                                  image="vllm/vllm-openai:v0.33.0rc2"), app="m")
    d = workload("m-decode", "decode", container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV_D],
                                                image="vllm/vllm-openai:v0.33.0"), app="m")
    code, out = check(tmp_path, capsys, p, d)
    assert code == 1 and "vllm-version-mismatch" in rules(out, "error"), out


# --- 5. VLLM_ADDITIONAL_ARGS is read by launchers that expand it, never by vLLM --------------------------------------

ADDITIONAL = {"name": "VLLM_ADDITIONAL_ARGS", "value": "--kv-cache-dtype fp8"}


@pytest.mark.parametrize(("command", "read"), [
    (None, False),                                                           # vLLM's image entrypoint: vllm serve
    (["vllm", "serve"], False),
    (["python3", "-m", "vllm.entrypoints.openai.api_server"], False),
    (["/bin/sh", "-c", 'exec vllm serve Qwen/Qwen3-8B "$@"', "--"], False),  # a script that does not name it
    (["/bin/sh", "-c", 'exec vllm serve Qwen/Qwen3-8B ${VLLM_ADDITIONAL_ARGS} "$@"', "--"], True),
])
def test_vllm_additional_args_count_only_where_the_launcher_expands_them(tmp_path, capsys, command, read):
    """fp8 on the decode only is refused (kv-cache-dtype-mismatch) only where the decode's launcher puts the variable
    on its command line; a plain vllm serve ignores it (vLLM reads no VLLM_ADDITIONAL_ARGS)."""
    args = [] if command and command[0] == "/bin/sh" else ["Qwen/Qwen3-8B"]
    p = container([*args, "--kv-transfer-config", KV_P], image="vllm/vllm-openai:v0.32.0", command=command,
                  env=[{"name": "VLLM_ADDITIONAL_ARGS", "value": ""}])
    d = container([*args, "--kv-transfer-config", KV_D], image="vllm/vllm-openai:v0.32.0", command=command,
                  env=[ADDITIONAL])
    if command is None:
        p.pop("command"), d.pop("command")
    code, out = check(tmp_path, capsys, workload("m-prefill", "prefill", p, app="m"), workload("m-decode", "decode", d, app="m"))
    assert ("kv-cache-dtype-mismatch" in rules(out, "error")) is read, out


# --- 7. downward-API fields other than the pod/host IP are values not in the files ----------------------------------


def _fr(name, path):
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def test_a_model_from_a_downward_api_field_is_not_read_as_its_path(tmp_path, capsys):
    """--model $(MODEL) with MODEL from metadata.annotations['model']: the kubelet writes each pod's annotation there,
    so the model is unknown (never the string "fieldRef:metadata.annotations['model']", equal on both roles)."""
    env = [_fr("MODEL", "metadata.annotations['model']")]
    docs = [workload(f"m-{r}", r, container(["$(MODEL)", "--kv-transfer-config", kv], image="vllm/vllm-openai:v0.32.0",
                                            env=env), app="m")
            for r, kv in (("prefill", KV_P), ("decode", KV_D))]
    code, out = check(tmp_path, capsys, *docs)
    assert "fieldRef:" not in json.dumps(out), out
    assert code == 3 and "$MODEL" in out["notChecked"][0]["reason"], out


@pytest.mark.parametrize(("path", "kept"), [
    ("status.podIP", "fieldRef:status.podIP"), ("status.hostIP", "fieldRef:status.hostIP"),
    ("metadata.name", None), ("metadata.labels['gpu']", None), ("status.podIPs", None), ("spec.nodeName", None),
])
def test_only_the_side_channel_ips_keep_a_sentinel(path, kept):
    from pdd_operator.vllm.args import container_env
    from pdd_operator.vllm.expansion import unknown
    env = container_env({"env": [_fr("X", path)]})
    assert env.values.get("X") == kept
    assert env.kube("X") == (kept or unknown("X"))


def test_a_tp_from_a_downward_api_label_is_not_checked_rather_than_read(tmp_path, capsys):
    env = [_fr("TP", "metadata.labels['tp']")]
    docs = [workload(f"m-{r}", r, container(["Qwen/Qwen3-8B", "--tensor-parallel-size", "$(TP)", "--kv-transfer-config",
                                             kv], image="vllm/vllm-openai:v0.32.0", env=env), app="m")
            for r, kv in (("prefill", KV_P), ("decode", KV_D))]
    code, out = check(tmp_path, capsys, *docs)
    assert "fieldRef:" not in json.dumps(out) and "engine-args-invalid" not in rules(out), out


# --- 6. the same computed value on both roles: one script setup over one volume --------------------------------------

LOOP = """set -e
model_path=""
for snap in /model-cache/hub/models--Qwen--Qwen3-8B/snapshots/*; do
  if [ -e "$snap/config.json" ]; then model_path="$snap"; break; fi
done
exec vllm serve "$model_path" --kv-transfer-config 'KV'
"""


def _looped(role, kv, volume=None, loop=LOOP, env=()):
    c = container([loop.replace("KV", kv)], image="vllm/vllm-openai:v0.32.0", command=["/bin/bash", "-c"], env=list(env))
    c["volumeMounts"] = [{"name": "cache", "mountPath": "/model-cache", "readOnly": True}]
    pod = {"volumes": [{"name": "cache", **(volume or {"persistentVolumeClaim": {"claimName": "model-cache"}})}]}
    return workload(f"m-{role}", role, c, app="m", pod=pod)


def test_one_loop_over_one_pvc_on_both_roles_computes_one_model(tmp_path, capsys):
    """Both roles run the same lines over the same PVC before vllm serve: the shell computes the same --model, so
    model-mismatch is judged (equal) instead of "not checked"; an engine variable on one role only is not setup."""
    debug = [{"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"}]
    code, out = check(tmp_path, capsys, _looped("prefill", KV_P, env=debug), _looped("decode", KV_D))
    assert code == 0 and not out.get("notChecked"), out


@pytest.mark.parametrize("variant", ["other-claim", "emptydir", "other-loop", "other-env"])
def test_a_different_setup_keeps_the_model_unknown(tmp_path, capsys, variant):
    volume = {"other-claim": {"persistentVolumeClaim": {"claimName": "other"}}, "emptydir": {"emptyDir": {}}}.get(variant)
    loop = LOOP.replace("Qwen3-8B", "Qwen3-32B") if variant == "other-loop" else LOOP
    env = [{"name": "HF_HUB_CACHE", "value": "/elsewhere"}] if variant == "other-env" else []
    decode = _looped("decode", KV_D, volume=volume, loop=loop, env=env)
    prefill = _looped("prefill", KV_P, volume=volume if variant == "emptydir" else None)
    code, out = check(tmp_path, capsys, prefill, decode)
    assert code == 3 and "--model is computed by a command" in out["notChecked"][0]["reason"], out
