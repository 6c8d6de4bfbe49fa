"""What the helpers of session 28 noticed (third round), fixed as kinds, with negative controls.

1. The engines of a shell or Slurm script that names no image and no GPU resource had no platform
   (:func:`pdd_operator.vllm.block_size.gpu_platform`), so CUDA-only rules stayed silent. A script that runs
   ``nvidia-smi`` (NVML, which vLLM's ``cuda_platform_plugin`` reads) or installs vLLM from PyPI, and shows nothing
   of ROCm, is a likely CUDA host (:func:`~pdd_operator.vllm.block_size.script_platform_hint`): what holds on CUDA
   (``block-size-kernel-split``) is then a warning, never an error. ``CUDA_VISIBLE_DEVICES`` alone is no sign (ROCm
   honours it), nor is ``which nvidia-smi || which rocm-smi`` (set 41's run-accuracy-test-nixl-bs128-debug).

2. A vLLM connector name in another case (``NIXLConnector``) on an engine whose vLLM release is unknown was read as
   a connector without NIXL (``kv-connector-mixed``: "no KV moves") while vLLM's factory looks names up exactly in
   every release: ``kv-connector-unregistered`` is judged on any release (``Rule.any_release``).
3. Fixes on llm-d values inside a Flux HelmRelease or an Argo CD Application named the values keys without the
   wrapper's prefix (``in prefill.containers[]``) while the findings' fields carry it (``spec.values.``):
   :func:`pdd_operator.compat.llmd_values.in_values_terms` now takes the prefix of each role's container key.
4. Pair rules compared a prefill with a decode only: two prefill (or two decode) engines that one script or one pod
   starts in one network namespace on the same port were never compared. ``same-role-port-conflict`` compares each
   pair's engines with the other engines of their role there (:attr:`pdd_operator.compat.pair.PDPair.neighbours`).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from pdd_operator.compat.llmd_values import in_values_terms
from pdd_operator.vllm.block_size import script_platform_hint
from tests.unit.test_llmd_values import _values
from tests.unit.test_turn2_variants import KV, POD_IP, check, container, pd, rules, workload
from tests.unit.test_wrapped_values_28 import LLM_D, _argo, _argo_source, _check, _errors, _flux

# --- 1. a script's likely CUDA host ---------------------------------------------------------------------------------

_STEP = ("VLLM_NIXL_SIDE_CHANNEL_PORT={sc} CUDA_VISIBLE_DEVICES={gpu} vllm serve $MODEL --port {port} --block-size 128"
         "{extra} --kv-transfer-config '{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"{role}\"}}' &\n")


def _script(head: str, gpus=("$GPU_A", "$GPU_B"), extra: str = "") -> str:
    return ("#!/bin/bash\n" + head + "\nMODEL=Qwen/Qwen3-8B\n"
            + _STEP.format(sc=5559, gpu=gpus[0], port=8100, extra=extra, role="kv_producer")
            + _STEP.format(sc=5659, gpu=gpus[1], port=8200, extra=extra, role="kv_consumer") + "wait\n")


def _script_findings(tmp_path, capsys, text: str, version: str | None = "0.11.1") -> tuple[int, dict[str, str]]:
    path = tmp_path / "run.sh"
    path.write_text(text)
    code = main(["check", str(path), "-o", "json", *(["--vllm-version", version] if version else [])])
    out = json.loads(capsys.readouterr().out)
    return code, {f["rule"]: f["severity"] for r in out["results"] for f in r["findings"]}


@pytest.mark.parametrize("head", [
    "nvidia-smi", "nvidia-smi -L > gpus.txt", "NUM_GPUS=$(nvidia-smi --list-gpus | wc -l)", "pip install -U vllm",
    "uv pip install vllm --torch-backend=auto"])
@pytest.mark.parametrize("extra", ["", " --attention-backend FLASH_ATTN"])
def test_a_script_on_a_likely_cuda_host_warns_of_the_kernel_split(tmp_path, capsys, head, extra):
    code, found = _script_findings(tmp_path, capsys, _script(head, extra=extra))
    assert found.get("block-size-kernel-split") == "warning", found
    # --attention-backend is a flag from 0.13.0 (vllm/engine/arg_utils.py; no parser of 0.11.1 or 0.12.0 defines it):
    # on 0.11.1 the parser refuses it as well (set 46's read additions)
    assert (code, found.get("cli-flag-not-yet")) == ((1, "error") if extra else (0, None)), found


@pytest.mark.parametrize("head", [
    "", "SMI_BIN=$(which nvidia-smi || which rocm-smi)", "nvidia-smi; export HIP_VISIBLE_DEVICES=0,1",
    "nvidia-smi || amd-smi list", "pip install vllm --extra-index-url https://wheels.vllm.ai/rocm/",
    "export CUDA_VISIBLE_DEVICES=0,1"])
def test_a_script_without_a_cuda_only_sign_stays_silent(tmp_path, capsys, head):
    """Controls: no sign, a sign of ROCm beside nvidia-smi, CUDA_VISIBLE_DEVICES alone (ROCm honours it)."""
    _, found = _script_findings(tmp_path, capsys, _script(head))
    assert "block-size-kernel-split" not in found, found


def test_a_likely_cuda_script_on_a_fixed_release_passes(tmp_path, capsys):
    """Control: 0.12.0 fixed the topology (vllm#28925)."""
    code, found = _script_findings(tmp_path, capsys, _script("nvidia-smi"), "0.12.0")
    assert code == 0 and "block-size-kernel-split" not in found, found


def test_a_script_whose_gpus_say_cuda_is_still_an_error(tmp_path, capsys):
    """Control: a pinned PyPI install reads as vLLM's CUDA image, certain, so the named backend's split is an error."""
    text = _script("pip install vllm==0.11.1", extra=" --attention-backend FLASH_ATTN")
    code, found = _script_findings(tmp_path, capsys, text, None)
    assert code == 1 and found.get("block-size-kernel-split") == "error", found


@pytest.mark.parametrize(("text", "likely"), [
    ("nvidia-smi", True), ("pip3 install vllm==0.11.0", True), ("pip install vllm-ascend", False),
    ("echo see nvidia-smi-docs", False), ("nvidia-smi && ls /opt/rocm", False),
    ("VLLM_TARGET_DEVICE=cpu pip install vllm", False),
    ("pip install vllm-0.11.0+cpu-cp312-linux_x86_64.whl", False), ("CUDA_VISIBLE_DEVICES=0 vllm serve m", False)])
def test_script_platform_hint(text, likely):
    assert bool(script_platform_hint(text)) is likely


# --- 2. a miscased connector name on an unknown release --------------------------------------------------------------

UNKNOWN_IMAGES = ("registry.example.com/team/vllm:latest", "ghcr.io/acme/serving:2025-06", "vllm/vllm-openai:latest")


@pytest.mark.parametrize("image", UNKNOWN_IMAGES)
@pytest.mark.parametrize(("role", "name"), [("decode", "NIXLConnector"), ("prefill", "nixlconnector")])
def test_a_miscased_name_is_unregistered_on_an_unknown_release(tmp_path, capsys, image, role, name):
    bad = KV.replace("NixlConnector", name)
    p_kv, d_kv = (bad, KV) if role == "prefill" else (KV, bad)
    docs = pd("case", ["--kv-transfer-config", p_kv], ["--kv-transfer-config", d_kv], image=image, env=[POD_IP])
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-connector-unregistered" in rules(out, "error"), out
    assert "kv-connector-mixed" not in rules(out), out


@pytest.mark.parametrize("image", UNKNOWN_IMAGES[:2])
def test_both_roles_miscased_on_an_unknown_release_are_refused(tmp_path, capsys, image):
    bad = KV.replace("NixlConnector", "NIXLConnector")
    docs = pd("case", ["--kv-transfer-config", bad], ["--kv-transfer-config", bad], image=image, env=[POD_IP])
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-connector-unregistered" in rules(out, "error"), out


def test_a_connector_without_nixl_on_an_unknown_release_is_still_mixed(tmp_path, capsys):
    """Control: a real connector without NIXL beside NIXL is kv-connector-mixed, not a registry finding."""
    other = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
    docs = pd("case", ["--kv-transfer-config", KV], ["--kv-transfer-config", other], image=UNKNOWN_IMAGES[0],
              env=[POD_IP])
    code, out = check(tmp_path, capsys, *docs)
    assert "kv-connector-mixed" in rules(out, "error") and "kv-connector-unregistered" not in rules(out), out


@pytest.mark.parametrize("image", UNKNOWN_IMAGES[:2])
def test_the_renamed_storage_connector_is_not_judged_on_an_unknown_release(tmp_path, capsys, image):
    """Control: SharedStorageConnector vs ExampleConnector depends on the release; unknown, it is not an error."""
    kv = '{"kv_connector":"SharedStorageConnector","kv_role":"kv_both"}'
    docs = pd("case", ["--kv-transfer-config", kv], ["--kv-transfer-config", kv], image=image, env=[POD_IP])
    code, out = check(tmp_path, capsys, *docs)
    assert "kv-connector-unregistered" not in rules(out, "error"), out


def test_vllms_spelling_on_an_unknown_release_is_not_refused(tmp_path, capsys):
    docs = pd("case", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV], image=UNKNOWN_IMAGES[0],
              env=[POD_IP])
    code, out = check(tmp_path, capsys, *docs)
    assert "kv-connector-unregistered" not in rules(out), out


# --- 3. fixes on wrapped llm-d values name the wrapper's keys ---------------------------------------------------------

_FP8 = ("--kv-cache-dtype", "fp8")


@pytest.mark.parametrize(("wrap", "prefix"), [
    (lambda v: _flux(v), "spec.values."),
    (lambda v: _argo(_argo_source(v)), "spec.source.helm.valuesObject."),
    (lambda v: _argo(_argo_source(v, as_text=True)), "spec.source.helm.values."),
    (lambda v: _argo(sources=[{"repoURL": "https://github.com/acme/gitops", "targetRevision": "main", "ref": "values"},
                              _argo_source(v)]), "spec.sources[1].helm.valuesObject."),
])
def test_a_wrapped_release_s_fix_names_the_wrapper_s_keys(tmp_path, capsys, wrap, prefix):
    code, out = _check(tmp_path, capsys, wrap(_values(LLM_D, prefill_args=_FP8)))
    assert code == 1, out
    finding = _errors(out)["kv-cache-dtype-mismatch"]
    fields_prefix = {f.split("prefill.")[0] for f in finding["fields"] if "prefill." in f}
    assert fields_prefix == {prefix}, finding
    assert f"{prefix}prefill.containers[] and {prefix}decode.containers[]" in finding["fix"], finding


def test_a_values_file_s_fix_keeps_the_bare_keys(tmp_path, capsys):
    """Control: a values file (no wrapper) names prefill.containers[] with no prefix."""
    from tests.unit.test_llmd_values import _check as check_values
    code, out = check_values(tmp_path, capsys, _values(LLM_D, prefill_args=_FP8))
    fix = {f["rule"]: f for r in out["results"] for f in r["findings"]}["kv-cache-dtype-mismatch"]["fix"]
    assert " prefill.containers[] and decode.containers[]" in fix and "spec." not in fix, fix


def test_in_values_terms_prefixes_each_role():
    containers = [("spec.values.prefill.containers[0]", None), ("spec.values.decode.containers[0]", None)]
    assert in_values_terms("Set X in each container's env.", containers) == (
        "Set X in spec.values.prefill.containers[].env and spec.values.decode.containers[].env.")
    assert in_values_terms("Set X on the decode container.", containers) == "Set X in spec.values.decode.containers[]."
    assert in_values_terms("Set X on the decode container.") == "Set X in decode.containers[]."
    assert in_values_terms("Set X in each container's env.", [("decode.containers[0]", None)]) == (
        "Set X in each role's containers[].env.")


# --- 4. engines of one role in one network namespace --------------------------------------------------------------

_SAME = "same-role-port-conflict"
_KVP = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
_KVC = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'


def _line(gpu: int, port: str, kv: str, side: str | None = None, prefix: str = "") -> str:
    env = f"VLLM_NIXL_SIDE_CHANNEL_PORT={side} " if side else ""
    return f"{prefix}CUDA_VISIBLE_DEVICES={gpu} {env}vllm serve Qwen/Qwen3-8B --port {port} --kv-transfer-config '{kv}' &\n"


def _engines(*lines: str) -> str:
    return "#!/bin/bash\n" + "".join(lines) + "wait\n"


@pytest.mark.parametrize("text", [
    _engines(_line(0, "8100", _KVP, "5600"), _line(1, "8101", _KVP, "5600"), _line(2, "8200", _KVC, "5700")),
    _engines(_line(0, "8100", _KVP), _line(1, "8101", _KVP), _line(2, "8200", _KVC, "5700")),  # both on 5600
    "#!/bin/bash\nfor i in 0 1; do\n  " + _line(0, "8100", _KVP, "5600").replace("=0 ", "=$i ")
    + "done\n" + _line(2, "8200", _KVC, "5700") + "wait\n",
])
def test_engines_of_one_role_on_one_host_on_one_port_are_refused(tmp_path, capsys, text):
    code, found = _script_findings(tmp_path, capsys, text, "0.20.0")
    assert code == 1 and found.get(_SAME) == "error", found


#: Only the HTTP --port is shared: vLLM's HTTP socket sets SO_REUSEPORT through 0.24.x, so both engines listen
#: (pdd_operator.vllm.http_socket); from 0.25.0 a single API server does not set it and the second fails.
@pytest.mark.parametrize("text", [
    _engines(_line(0, "8100", _KVP, "5600"), _line(1, "8100", _KVP, "5610"), _line(2, "8200", _KVC, "5700")),
    _engines(_line(0, "8100", _KVP, "5600"), _line(1, "8200", _KVC, "5700"), _line(2, "8200", _KVC, "5710")),
])
@pytest.mark.parametrize("version, severity", [("0.20.0", "warning"), ("0.25.0", "error")])
def test_engines_of_one_role_on_one_http_port_per_release(tmp_path, capsys, text, version, severity):
    code, found = _script_findings(tmp_path, capsys, text, version)
    assert found.get(_SAME) == severity, found


@pytest.mark.parametrize("text", [
    _engines(_line(0, "8100", _KVP, "5600"), _line(1, "8101", _KVP, "5610"), _line(2, "8200", _KVC, "5700")),
    _engines(_line(0, "8100", _KVP, "5600"), _line(1, "$P", _KVP, "5610"), _line(2, "8200", _KVC, "5700")),
    _engines(_line(0, "8100", _KVP, "5600"), _line(1, "8100", _KVP, "5600", "srun --nodelist=n2 -N1 "),
             _line(2, "8200", _KVC, "5700")),
    # two external-LB ranks of one DP group: vLLM binds base + rank (set 25's Kimi-K2.5 prefill, nixl/base_scheduler.py)
    _engines(*(_line(i, f"810{i}", _KVP, "5600").replace(" --port", f" --data-parallel-size 2 --data-parallel-rank {i}"
                                                          " --port") for i in (0, 1)), _line(2, "8200", _KVC, "5700")),
])
def test_engines_of_one_role_apart_or_on_their_own_ports_pass(tmp_path, capsys, text):
    """Controls: distinct ports; a port not in the script; the same ports on another node (srun --nodelist); data-parallel
    ranks sharing VLLM_NIXL_SIDE_CHANNEL_PORT (each binds base + its rank)."""
    _, found = _script_findings(tmp_path, capsys, text, "0.20.0")
    assert _SAME not in found, found


def _pod(name: str, role: str, *containers: dict) -> dict:
    doc = workload(name, role, containers[0])
    doc["spec"]["template"]["spec"]["containers"] = [dict(c, name=f"vllm-{i}") for i, c in enumerate(containers)]
    return doc


#: 5600 is the first prefill's side channel (a ZeroMQ listener: an error); 8100 is its HTTP port, which vLLM 0.24.0 (the
#: image) binds with SO_REUSEPORT, so both listen behind one port (a warning).
@pytest.mark.parametrize(("p2_port", "severity"), [("5600", "error"), ("8100", "warning"), ("8101", None)])
def test_two_prefill_containers_of_one_pod(tmp_path, capsys, p2_port, severity):
    side = [{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "5610"}]
    p1 = container(["Qwen/Qwen3-8B", "--port", "8100", "--kv-transfer-config", _KVP])
    p2 = container(["Qwen/Qwen3-8B", "--port", p2_port, "--kv-transfer-config", _KVP], env=side)
    d = container(["Qwen/Qwen3-8B", "--port", "8200", "--kv-transfer-config", _KVC])
    code, out = check(tmp_path, capsys, _pod("m-prefill", "prefill", p1, p2), _pod("m-decode", "decode", d))
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == _SAME}
    assert found == ({severity} if severity else set()), out
    assert code == (1 if severity == "error" else 0), out
