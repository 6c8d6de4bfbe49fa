"""One definition per concept (issue 9 item 3, fixN): each concept the rules share is asked of one function, and the
rules that disagreed are re-derived from vLLM's source."""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat import evaluate
from pdd_operator.compat.pair import PDPair, role_from_container
from pdd_operator.vllm.architectures import traits
from pdd_operator.vllm.attention_backends import BACKEND_ENV, backend_env_read, selected_backend
from pdd_operator.vllm.versions import parse_version

POD_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def engine(*args: str, env: dict | None = None, tp: int = 1, extra: dict | None = None) -> dict:
    kv = {"kv_connector": "NixlConnector", "kv_role": "kv_both", **({"kv_connector_extra_config": extra} if extra else {})}
    return {"name": "vllm", "command": ["vllm", "serve", LLAMA, "--tensor-parallel-size", str(tp), *args,
                                        "--kv-transfer-config", json.dumps(kv)],
            "env": [POD_IP, *({"name": k, "value": v} for k, v in (env or {}).items())],
            "resources": {"limits": {"nvidia.com/gpu": str(tp)}}}


def pair(p: dict, d: dict, version: str, pod: dict | None = None, model: str = LLAMA) -> PDPair:
    return PDPair("test", role_from_container("prefill", p, pod or {}, version_text=version),
                  role_from_container("decode", d, pod or {}, version_text=version), traits(None, None, None, model))


def found(target, rule: str) -> set[str]:
    """The severities of ``rule``'s findings on ``target``."""
    return {f.severity for f in evaluate(target).findings if f.rule == rule}


# --- 1. VLLM_ATTENTION_BACKEND: read 0.9.0-0.14.1, ignored from 0.16.0, 0.15.x unknown --------------------------


@pytest.mark.parametrize(("version", "read"), [
    ("0.9.0", True), ("0.12.0", True), ("0.13.0", True), ("0.14.1", True),
    ("0.15.0", None), ("0.15.1", None),                                  # no sdist read: between read and ignored
    ("0.16.0", False), ("0.17.0", False), ("0.17.1", False), ("0.18.0", False), ("0.26.0", False),
    ("0.34.0", False), (None, None),
])
def test_backend_env_read_per_release(version, read):
    assert backend_env_read(parse_version(version) if version else None) is read


def test_selected_backend_takes_the_flag_then_the_variable_where_read():
    env = {BACKEND_ENV: "TRITON_ATTN"}
    assert selected_backend("FLASH_ATTN", env, (0, 14, 1)) == "FLASH_ATTN"
    assert selected_backend(None, env, (0, 14, 1)) == "TRITON_ATTN"
    assert selected_backend(None, env, (0, 17, 0)) is None
    assert selected_backend(None, env, None) == "TRITON_ATTN"
    assert selected_backend(None, env, None, unknown_reads=False) is None


@pytest.mark.parametrize(("version", "expected"), [
    ("0.14.1", {"warning"}), ("0.15.0", {"warning"}),                   # read / perhaps read
    ("0.16.0", set()), ("0.17.0", set()), ("0.17.1", set()),            # ignored: vLLM picks its own default
])
def test_triton_layout_reads_the_variable_only_where_vllm_does(version, expected):
    env = {BACKEND_ENV: "TRITON_ATTN"}
    p = pair(engine(env=env, tp=1), engine(env=env, tp=2), version)
    assert found(p, "triton-attn-hetero-tp-layout") == expected


@pytest.mark.parametrize(("version", "expected"), [
    ("0.14.1", {"error"}), ("0.15.0", {"warning"}),
    ("0.16.0", set()), ("0.18.0", set()), ("0.26.0", set()),            # a difference vLLM never sees
])
def test_backend_variable_difference_per_release(version, expected):
    p = pair(engine(env={BACKEND_ENV: "FLASHINFER"}), engine(env={BACKEND_ENV: "FLASH_ATTN"}), version)
    assert found(p, "attention-backend-mismatch") == expected


def test_cross_layer_blocks_ignore_the_variable_where_vllm_ignores_it():
    extra = {"enable_cross_layers_blocks": "True"}
    ignored = pair(engine(env={BACKEND_ENV: "FLEX_ATTENTION"}, extra=extra), engine(extra=extra), "0.18.0")
    assert "error" not in found(ignored, "cross-layers-blocks-mismatch")
    flag = pair(engine("--attention-backend", "FLEX_ATTENTION", extra=extra), engine(extra=extra), "0.18.0")
    assert "error" in found(flag, "cross-layers-blocks-mismatch")


def test_one_sided_backend_is_judged_when_the_other_role_sets_an_ignored_variable():
    h100 = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}
    p = pair(engine("--attention-backend", "TRITON_ATTN"), engine(env={BACKEND_ENV: "TRITON_ATTN"}), "0.18.0", h100)
    assert found(p, "attention-backend-mismatch") == {"error"}


# --- 2. UCX_TLS: one reader (pdd_operator.vllm.ucx_tls), used by the rules and the preflight ----------------------


from pdd_operator.compat.rules.ucx_tls import host_only_transports, no_rdma_transport  # noqa: E402
from pdd_operator.preflight import ucx_allows_rdma  # noqa: E402
from pdd_operator.vllm.ucx_tls import VERBS_TRANSPORTS, allows_rdma, parse  # noqa: E402


@pytest.mark.parametrize(("value", "transport", "state"), [
    (None, "rc_mlx5", "primary"), ("all", "tcp", "primary"),
    ("rc", "rc_mlx5", "primary"), ("rc", "ud_mlx5", "aux"), ("rc", "tcp", "off"),
    ("rc:aux", "rc_mlx5", "aux"), ("\\rc", "rc_mlx5", "off"),            # a strict name is never an alias
    ("^rc", "rc_verbs", "off"), ("^rc", "ud_mlx5", "primary"),           # ud only auxiliary in rc: kept
    ("^ud", "ud_mlx5", "aux"), ("^ud,ud:aux", "ud_mlx5", "off"),
    ("^ib", "ud_verbs", "off"), ("^ib", "tcp", "primary"),               # ib lists ud and ud:aux (UCX 1.19+)
    ("sm,cuda", "cma", "primary"), ("sm,cuda", "gdr_copy", "primary"), ("sm,cuda", "tcp", "off"),
])
def test_ucx_reads_each_transport_as_ucp_context_does(value, transport, state):
    assert parse(value).state(transport) == state


@pytest.mark.parametrize(("value", "allowed"), [
    (None, True), ("all", True), ("rc,cuda_copy", True), ("ud_x,cuda", True), ("^cuda_ipc", True), ("srd", True),
    ("^rc,dc,ud", True),                                                 # EFA's srd stays: only ib names it
    ("tcp,cuda_copy", False), ("^ib", False), ("rc:aux,cuda_copy", False),
    ("^rc,dc,ud,ib,rc_mlx5,dc_mlx5,ud_mlx5,rc_verbs,ud_verbs", False),
    ("all,tcp", None), ("rdma_typo,cuda", None),                          # UCX refuses / a name not known
])
def test_allows_rdma(value, allowed):
    assert allows_rdma(value) is allowed


def test_allows_verbs_rdma():
    assert allows_rdma("^rc,dc,ud", VERBS_TRANSPORTS) is False and allows_rdma("srd", VERBS_TRANSPORTS) is False
    assert allows_rdma("^rc,dc", VERBS_TRANSPORTS) is True              # ud stays a data transport


@pytest.mark.parametrize(("value", "ok"), [
    ("", True), ("^cuda_ipc", True), ("srd,cuda_copy", True), ("rdma_typo", True),  # unsure: no TCP verdict
    ("^ib", False), ("^rc,dc,ud,srd", False), ("rc:aux,tcp", False),     # the old prefix test let these through
])
def test_the_preflight_asks_the_same_reader(value, ok):
    assert ucx_allows_rdma({"UCX_TLS": value} if value else {}) is ok
    assert ucx_allows_rdma({"UCX_TLS": value} if value else {}) is (allows_rdma(value or None) is not False)


@pytest.mark.parametrize(("value", "expected"), [
    ("rc:aux,cuda_copy", ["rc", "cuda_copy"]),                          # rc only for connection set-up
    ("gga,cuda", ["gga", "cuda"]),                                      # BlueField DMA, no RDMA between nodes
    ("srd,cuda_copy", ["srd", "cuda_copy"]),                            # EFA's transport on an InfiniBand pod
    ("^rc,dc,ud", ["all but rc,dc,ud"]),
    ("rc,cuda", None), ("^rc", None), ("ib", None),
])
def test_no_verbs_transport(value, expected):
    assert no_rdma_transport(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("^cuda,rocm,ze,gaudi,ib", ["all but cuda,rocm,ze,gaudi,ib"]),       # deny lists are read too
    ("^cuda,ib", None),                                                  # ROCm's and Intel's transports stay
    ("mm,self", ["mm", "self"]),
    ("^cuda", None), ("tcp,cuda:aux", ["tcp", "cuda"]),
])
def test_host_only_transports_read_as_ucx_does(value, expected):
    assert host_only_transports(value) == expected


def test_verbs_transports_are_the_ib_alias_data_transports():
    from pdd_operator.vllm.ucx_tls import ALIASES
    assert VERBS_TRANSPORTS <= set(ALIASES["ib"])


# --- 3. block-size-kernel-split asks ModelTraits.kv_family, as the block-size rules do ---------------------------


def _kernel_pair(model: str, image: str = "vllm/vllm-openai:v0.11.1", block: str = "128") -> list[dict]:
    from tests.unit.test_turn2_variants import workload

    kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
    return [workload(f"m-{role}", role, {
        "name": "vllm", "image": image, "command": ["vllm", "serve"],
        "args": [model, "--block-size", block, "--kv-transfer-config", kv], "env": [POD_IP],
        "resources": {"limits": {"nvidia.com/gpu": "1"}}}, app="m") for role in ("prefill", "decode")]


@pytest.mark.parametrize(("model", "split"), [
    ("meta-llama/Llama-3.1-8B-Instruct", True),                          # plain
    ("Qwen/Qwen2.5-VL-3B-Instruct", True),                               # VLM: its language model is plain
    ("Qwen/Qwen3-VL-8B-Instruct", True),
    ("deepseek-ai/DeepSeek-V2-Lite", False),                             # MLA: sizes forced by the platform
    ("nvidia/NVIDIA-Nemotron-Nano-9B-v2", False),                        # hybrid SSM
])
def test_kernel_block_split_per_kv_family(tmp_path, capsys, model, split):
    from tests.unit.test_turn2_variants import check, rules

    _, out = check(tmp_path, capsys, *_kernel_pair(model))
    assert ("block-size-kernel-split" in rules(out)) is split, out   # unpinned GPU: a warning
    _, out = check(tmp_path, capsys, *_kernel_pair(model, block="64"))   # a size the kernels take: no split
    assert "block-size-kernel-split" not in rules(out)


# --- 4. mooncake-tp-indivisible: re-derived per release (0.16.0-0.34.0 read) --------------------------------------


def _mooncake_findings(tmp_path, capsys, image: str) -> dict[str, tuple[str, str]]:
    from tests.unit.test_mooncake_v0_pairs import _deployments
    from tests.unit.test_script_inputs import _check

    _, out = _check(tmp_path, capsys, _deployments(image, p_flags="--tensor-parallel-size 2",
                                                   d_flags="--tensor-parallel-size 3"))
    return {f["rule"]: (f["severity"], f["message"]) for r in out["results"] for f in r["findings"]}


@pytest.mark.parametrize(("version", "topology"), [
    ("0.16.0", "TpKVTopology.tp_ratio"), ("0.19.1", "TpKVTopology.tp_ratio"),
    ("0.20.0", "TransferTopology.tp_ratio"), ("0.30.0", "TransferTopology.tp_ratio"),
    ("0.32.0", "TransferTopology.tp_ratio"), ("0.34.0", "TransferTopology.tp_ratio"),
])
def test_mooncake_indivisible_tp_fails_in_the_decodes_receive_kv(tmp_path, capsys, version, topology):
    severity, message = _mooncake_findings(tmp_path, capsys, f"vllm/vllm-openai:v{version}")["mooncake-tp-indivisible"]
    assert severity == "error" and topology in message and "receive_kv" in message


def test_mooncake_indivisible_tp_after_the_newest_release_read_is_no_error(tmp_path, capsys):
    assert "mooncake-tp-indivisible" not in _mooncake_findings(tmp_path, capsys, "vllm/vllm-openai:v0.35.0")


# --- 5. vllm-rs serve on a release without the Rust frontend --------------------------------------------------------


def _rust_pair(image: str, program: str = "vllm-rs") -> list[dict]:
    from tests.unit.test_turn2_variants import container, workload

    kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
    return [workload(f"q-{r}", r, container(["serve", "Qwen/Qwen3-0.6B", "--port", "8000", "--", "--enforce-eager",
                                             "--kv-transfer-config", kv], image=image, command=[program]))
            for r in ("prefill", "decode")]


@pytest.mark.parametrize(("image", "program", "severity"), [
    ("vllm/vllm-openai:v0.20.0", "vllm-rs", "error"),                    # no vllm-rs before 0.22.0
    ("vllm/vllm-openai:v0.21.0", "vllm-rs", "error"),
    ("vllm/vllm-openai:v0.14.1", "/usr/local/bin/vllm-rs", "error"),
    ("vllm/vllm-openai:v0.22.0", "vllm-rs", "warning"),                  # in the package, not on PATH
    ("vllm/vllm-openai:v0.30.0", "vllm-rs", "warning"),
    ("vllm/vllm-openai:v0.30.0", "/usr/local/lib/python3.12/dist-packages/vllm/vllm-rs", None),
    ("vllm/vllm-openai:v0.31.0", "vllm-rs", None),                       # linked onto PATH
    ("vllm/vllm-openai:v0.34.0", "vllm-rs", None),
    ("registry.example/vllm:v0.20.0", "vllm-rs", "warning"),             # another image may bring its own
])
def test_rust_frontend_per_release(tmp_path, capsys, image, program, severity):
    from tests.unit.test_turn2_variants import check

    _, out = check(tmp_path, capsys, *_rust_pair(image, program))
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "rust-frontend-unavailable"}
    assert found == ({severity} if severity else set()), out


def test_rust_frontend_in_a_script_of_an_old_pip_install_is_a_warning(tmp_path, capsys):
    from tests.unit.test_public_report_kinds_83 import _pair, _script

    _, out = _script(tmp_path, capsys, _pair("--enforce-eager", "--enforce-eager", version="0.20.0", rust=True))
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "rust-frontend-unavailable"}
    assert found == {"warning"}, out
    _, out = _script(tmp_path, capsys, _pair("--enforce-eager", "--enforce-eager", version="0.20.0"))  # vllm serve
    assert not any(f["rule"] == "rust-frontend-unavailable" for r in out["results"] for f in r["findings"]), out


# --- 6. attention-backend-mismatch judges the unnamed role's default per compute capability -------------------------


from pdd_operator.compat.gpu_product import pinned_gpu_capability  # noqa: E402
from pdd_operator.vllm.attention_backends import default_backend_at  # noqa: E402


def pinned_compute_capability(products):
    return pinned_gpu_capability(((("nvidia.com/gpu.product", "In", tuple(products)),),))


@pytest.mark.parametrize(("cc", "head", "version", "expected"), [
    ((7, 0), 128, (0, 20, 0), "TRITON_ATTN"),                           # V100: FA needs 8.0, FlashInfer 7.5
    ((7, 5), 128, (0, 20, 0), "FLASHINFER"),                            # T4 before FlashInfer's 8.0 floor
    ((7, 5), 128, (0, 24, 0), "TRITON_ATTN"), ((7, 5), 128, (0, 34, 0), "TRITON_ATTN"),
    ((7, 5), 80, (0, 20, 0), "TRITON_ATTN"),                            # FlashInfer takes 64/128/256 only
    ((7, 5), 128, None, None),
    ((8, 0), 128, (0, 20, 0), "FLASH_ATTN"), ((9, 0), None, (0, 20, 0), "FLASH_ATTN"),
    ((10, 0), 128, (0, 20, 0), "FLASHINFER"), ((10, 0), 80, (0, 20, 0), "FLASH_ATTN"),
    ((12, 0), 128, (0, 26, 0), "FLASH_ATTN"),
    ((7, 0), None, (0, 20, 0), None), ((8, 0), 512, (0, 20, 0), None),
])
def test_default_backend_per_compute_capability(cc, head, version, expected):
    assert default_backend_at(cc, head, version) == expected


def test_gpu_products_name_their_compute_capability():
    assert pinned_compute_capability(["Tesla-V100-SXM2-16GB"]) == (7, 0)
    assert pinned_compute_capability(["Tesla-T4"]) == (7, 5)
    assert pinned_compute_capability(["NVIDIA-A10G"]) == (8, 6)
    assert pinned_compute_capability(["NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"]) == (9, 0)
    assert pinned_compute_capability(["Tesla-V100-SXM2-16GB", "NVIDIA-A100-SXM4-80GB"]) is None


@pytest.mark.parametrize(("image", "d_args", "product", "severity"), [
    ("v0.20.0", ["--attention-backend", "TRITON_ATTN"], None, "warning"),             # V100 would match
    ("v0.20.0", ["--attention-backend", "FLEX_ATTENTION"], None, "error"),            # no GPU picks FLEX
    ("v0.20.0", ["--attention-backend", "TRITON_ATTN"], "Tesla-V100-SXM2-32GB", None),  # V100: TRITON_ATTN itself
    ("v0.20.0", ["--attention-backend", "FLASH_ATTN"], "Tesla-V100-SXM2-32GB", "error"),
    ("v0.20.0", ["--attention-backend", "FLASHINFER"], "Tesla-T4", None),              # T4's own before 0.24
    ("v0.26.0", ["--attention-backend", "FLASHINFER"], "Tesla-T4", "error"),           # TRITON_ATTN there
    ("v0.26.0", ["--attention-backend", "TRITON_ATTN"], "Tesla-T4", None),
    ("v0.20.0", ["--attention-backend", "TRITON_ATTN"], "NVIDIA-H100-80GB-HBM3", "error"),
])
def test_one_sided_backend_per_gpu(tmp_path, capsys, image, d_args, product, severity):
    from tests.unit.test_public_report_kinds_80 import _pair, _pinned, _severities
    from tests.unit.test_turn2_variants import check

    pod = _pinned(product) if product else None
    _, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-0.6B", f"vllm/vllm-openai:{image}", [], d_args,
                                            p_pod=pod, d_pod=pod))
    assert _severities(out, "attention-backend-mismatch") == ({severity} if severity else set()), out
