"""Variants of what the twenty-eighth public-report set (tests/unit/data/public_reports_28) taught, with negative
controls.

A role whose KV connector is not NIXL although its command line names NIXL (``kv-connector-mixed``):

- ``--kv-offloading-size`` beside a NIXL ``--kv-transfer-config``: vLLM's ``VllmConfig._post_init_kv_transfer_config``
  (vllm/config/vllm.py, 0.18.0 and 0.24.0 sdists, 0.32.0 wheel) overwrites the connector with OffloadingConnector
  (LMCacheMPConnector for ``--kv-offloading-backend lmcache``) and kv_role kv_both. The checker did not know the flag,
  so NeMo Gym's Nemotron pair with a CPU tier on its decode passed as two NIXL roles.
- a second ``--kv-transfer-config`` (the recipe site's CPU offload option appended to a pd_cluster role): argparse
  keeps the last one. The checker applied that, then called the pair out of scope ("not vLLM's NixlConnector").

Both now read as NIXL on one role and another connector on the other: no KV moves between them, an error
(:mod:`pdd_operator.compat.rules.connector_mix`, :mod:`pdd_operator.vllm.kv_offloading`).
"""

from __future__ import annotations

from pdd_operator.compat.pair import role_from_container
from tests.unit.test_turn2_variants import check, container, pd, rules

KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
OFFLOAD = '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":1073741824}}'
LMCACHE = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
MULTI = ('{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":['
         '{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"OffloadingConnector","kv_role":"kv_both",'
         '"kv_connector_extra_config":{"cpu_bytes_to_use":1073741824}}]}}')
RULE = "kv-connector-mixed"


def _pair(p=(), d=(), image="vllm/vllm-openai:v0.24.0", model="meta-llama/Llama-3.1-8B-Instruct", kind="Deployment"):
    docs = pd("llama", ["--kv-transfer-config", KV_P, *p], ["--kv-transfer-config", KV_D, *d], model=model, image=image)
    if kind != "Deployment":
        for doc in docs:
            doc["kind"] = kind
    return docs


def _message(out):
    return next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == RULE)


def test_kv_offloading_size_on_the_prefill_of_statefulsets_on_v024_is_an_error(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(p=["--kv-offloading-size", "64"], kind="StatefulSet"))
    assert code == 1 and RULE in rules(out, "error")
    assert _message(out).startswith("prefill: runs OffloadingConnector (--kv-offloading-size 64")


def test_kv_offloading_with_the_lmcache_backend_on_a_v032_decode_is_an_error(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(d=["--kv-offloading-size=32", "--kv-offloading-backend", "lmcache"],
                                                image="vllm/vllm-openai:v0.32.0", model="Qwen/Qwen3-8B"))
    assert code == 1 and RULE in rules(out, "error")
    assert "LMCacheMPConnector" in _message(out)


def test_a_second_kv_transfer_config_without_nixl_is_an_error_and_says_the_last_wins(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(d=["--kv-transfer-config", LMCACHE], image="vllm/vllm-openai:v0.28.0"))
    assert code == 1 and RULE in rules(out, "error")
    assert "given 2 times (NixlConnector, LMCacheConnectorV1)" in _message(out)


def test_a_repeated_nixl_config_or_a_multiconnector_with_a_nixl_child_is_no_mix(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(d=["--kv-transfer-config", KV_D]))
    assert code == 0 and RULE not in rules(out)
    code, out = check(tmp_path, capsys, *_pair(d=["--kv-transfer-config", MULTI]))
    assert RULE not in rules(out)


def test_before_the_releases_read_the_offloading_rewrite_is_not_claimed(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(d=["--kv-offloading-size", "64"], image="vllm/vllm-openai:v0.17.0"))
    assert RULE not in rules(out)


def test_no_nixl_on_either_role_stays_not_checked(tmp_path, capsys):
    docs = pd("llama", ["--kv-transfer-config", OFFLOAD], ["--kv-transfer-config", LMCACHE],
              model="meta-llama/Llama-3.1-8B-Instruct", image="vllm/vllm-openai:v0.24.0")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and RULE not in rules(out)


def test_the_role_config_records_the_connector_vllm_runs():
    c = container(["m", "--kv-transfer-config", KV_D, "--kv-offloading-size", "8"])
    role = role_from_container("decode", c, {}, version_text="0.30.0")
    assert role.connector == "OffloadingConnector" and role.kv_transfer["kv_role"] == "kv_both" and not role.nixl
    assert "--kv-offloading-size 8" in role.connector_note
    plain = role_from_container("decode", container(["m", "--kv-transfer-config", KV_D]), {}, version_text="0.30.0")
    assert plain.nixl and plain.connector_note == ""


# MTP under a model-type name (``qwen3_next_mtp``, ``deepseek_mtp``): vLLM rewrites every ``*_mtp`` method to ``mtp``
# (vllm/config/speculative.py SpeculativeConfig.__post_init__, 0.32.0), and from 0.28.0 the NIXL compatibility hash
# carries the EAGLE-family settings (nixl/metadata.py _get_speculative_compatibility_factors). The checker did not read
# the alias as mtp: NeMo Gym's Qwen3.5 pair with MTP on the decode only got a warning where every handshake is refused.
SPEC = "spec-decode-mismatch"


def _spec(method, tokens=2):
    return ["--speculative-config", f'{{"method":"{method}","num_speculative_tokens":{tokens}}}']


def test_deepseek_mtp_on_the_decode_only_of_a_v028_pair_is_an_error(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(d=_spec("deepseek_mtp", 1), image="vllm/vllm-openai:v0.28.0",
                                                model="deepseek-ai/DeepSeek-V3-0324", kind="StatefulSet"))
    assert code == 1 and SPEC in rules(out, "error")


def test_qwen3_next_mtp_on_the_prefill_only_of_a_v033_pair_is_an_error(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(p=_spec("qwen3_next_mtp"), image="vllm/vllm-openai:v0.33.0",
                                                model="Qwen/Qwen3-Next-80B-A3B-Instruct"))
    assert code == 1 and SPEC in rules(out, "error")


def test_an_mtp_alias_against_plain_mtp_is_the_same_method(tmp_path, capsys):
    # both become method "mtp" in vLLM, so the speculative hash factors are equal: no refusal
    _, out = check(tmp_path, capsys, *_pair(p=_spec("deepseek_mtp", 1), d=_spec("mtp", 1), image="vllm/vllm-openai:v0.30.0",
                                             model="deepseek-ai/DeepSeek-V3-0324"))
    assert SPEC not in rules(out)


def test_ngram_on_one_side_is_not_hashed(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_pair(d=["--speculative-config", '{"method":"ngram","num_speculative_tokens":3,'
                                                '"prompt_lookup_max":4}'], image="vllm/vllm-openai:v0.30.0"))
    assert SPEC not in rules(out)


# --attention-backend on 0.18-0.25: every sdist read (0.18.0-0.24.0) takes the backend from --attention-backend /
# --attention-config only (engine/arg_utils.py; no VLLM_ATTENTION_BACKEND in envs.py) and hashes attn_backend_name
# (v1/nixl_connector.py 0.18-0.19, nixl/metadata.py 0.20-0.24). The checker had verified it from 0.26.0 only, so the
# InferenceX Kimi-K2.5 pair on 0.21.0 with FLASHMLA on its decode got a warning where every handshake is refused.
BACKEND = "attention-backend-mismatch"


def test_two_named_mla_backends_on_v021_are_an_error(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(p=["--attention-backend", "FLASHINFER_MLA"], d=["--attention-backend", "FLASHMLA"],
                                                image="vllm/vllm-openai:v0.21.0", model="deepseek-ai/DeepSeek-V3-0324"))
    assert code == 1 and BACKEND in rules(out, "error")


def test_two_named_backends_on_v018_statefulsets_are_an_error(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(p=["--attention-backend", "FLASH_ATTN"], d=["--attention-backend", "FLASHINFER"],
                                                image="vllm/vllm-openai:v0.18.0", kind="StatefulSet"))
    assert code == 1 and BACKEND in rules(out, "error")


def test_before_v018_two_named_backends_stay_a_warning(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_pair(p=["--attention-backend", "FLASH_ATTN"], d=["--attention-backend", "FLASHINFER"],
                                             image="vllm/vllm-openai:v0.17.0"))
    assert BACKEND in rules(out, "warning") and BACKEND not in rules(out, "error")


def test_the_same_backend_on_both_roles_is_no_finding(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_pair(p=["--attention-backend", "FLASHMLA"], d=["--attention-backend", "flashmla"],
                                             image="vllm/vllm-openai:v0.21.0", model="deepseek-ai/DeepSeek-V3-0324"))
    assert BACKEND not in rules(out)


# Launch scripts mounted from a ConfigMap (Kthena's DeepSeek-V4-Flash ModelServing: subPath prefill.sh at
# /workspace/prefill.sh, started by "cd /workspace && ./prefill.sh"): where the ConfigMap is in the files, the container
# is read as /bin/bash -c <script> (:mod:`pdd_operator.compat.mounted_scripts`). The checker found no engine at all.
def _script(role, kv, extra=""):
    return (f"export VLLM_NIXL_SIDE_CHANNEL_HOST=$POD_IP\nvllm serve Qwen/Qwen3-8B --port 8000 {extra} \\\n"
            f"  --kv-transfer-config '{kv}'\n")


def _scripted(start, mount, cm_name="pd-scripts", with_cm=True, working_dir=None, d_extra="--kv-cache-dtype fp8"):
    docs = []
    for role in ("prefill", "decode"):
        c = {"name": "vllm", "image": "vllm/vllm-openai:v0.30.0", "command": ["/bin/bash", "-c"],
             "args": [start.replace("{role}", role)], "volumeMounts": [dict(mount, name="scripts") if "subPath" not in mount
                                                                 else dict(mount, name="scripts", subPath=f"{role}.sh",
                                                                           mountPath=mount["mountPath"].replace("{role}", role))],
             "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        if working_dir:
            c["workingDir"] = working_dir
        docs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"qwen-{role}"},
                     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "qwen", "role": role}},
                              "template": {"metadata": {"labels": {"app": "qwen", "role": role}},
                                           "spec": {"containers": [c],
                                                    "volumes": [{"name": "scripts", "configMap": {"name": cm_name}}]}}}})
    if with_cm:
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm_name},
                     "data": {"prefill.sh": _script("prefill", KV_P), "decode.sh": _script("decode", KV_D, d_extra)}})
    return docs


def test_a_subpath_script_started_after_cd_is_read(tmp_path, capsys):
    docs = _scripted("cd /workspace && ./{role}.sh", {"mountPath": "/workspace/{role}.sh", "subPath": True})
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")


def test_a_directory_mount_started_by_its_path_is_read(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_scripted("bash /opt/scripts/{role}.sh", {"mountPath": "/opt/scripts"}))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")
    code, out = check(tmp_path, capsys, *_scripted("bash /opt/scripts/{role}.sh", {"mountPath": "/opt/scripts"}, d_extra=""))
    assert code == 0 and not rules(out, "error")


def test_a_relative_start_in_the_working_directory_is_read(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_scripted("./{role}.sh", {"mountPath": "/work"}, working_dir="/work"))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")


def test_without_the_configmap_or_with_an_unresolved_start_nothing_is_guessed(tmp_path, capsys):
    code, _ = check(tmp_path, capsys, *_scripted("bash /opt/scripts/{role}.sh", {"mountPath": "/opt/scripts"}, with_cm=False))
    assert code == 4
    # "./prefill.sh" with no cd to the mount and no workingDir: which file runs is not known
    code, _ = check(tmp_path, capsys, *_scripted("./{role}.sh", {"mountPath": "/opt/scripts"}))
    assert code == 4


def test_a_mounted_file_that_is_only_read_is_not_taken_for_the_script(tmp_path, capsys):
    # LMCache's config file named in an assignment and a flag: the container's own inline script stays what runs
    docs = _scripted("CFG=/opt/scripts/{role}.sh vllm serve Qwen/Qwen3-8B --kv-transfer-config "
                     + "'" + KV_P + "' --config-file /opt/scripts/{role}.sh", {"mountPath": "/opt/scripts"})
    from pdd_operator.compat.config_refs import config_maps_of
    from pdd_operator.compat.mounted_scripts import inline_mounted_scripts
    assert inline_mounted_scripts(docs[0], config_maps_of(docs)) is docs[0]
