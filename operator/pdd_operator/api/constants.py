"""Names of the PDDeployment API and of the labels the operator puts on its children."""

GROUP = "pdd-operator.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "PDDeployment"
PLURAL = "pddeployments"
SINGULAR = "pddeployment"
SHORT_NAME = "pdd"

#: Field manager used for every server-side apply the operator makes.
FIELD_MANAGER = "pdd-operator"

#: Roles of a P/D deployment, in the order the operator renders them.
ROLES = ("prefill", "decode")


def other_role(role: str) -> str:
    """``decode`` for ``prefill`` and ``prefill`` for ``decode``."""
    return ROLES[1 - ROLES.index(role)]

# Labels: app.kubernetes.io conventions plus the project's own role and revision labels.
LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_PART_OF = "app.kubernetes.io/part-of"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_VERSION = "app.kubernetes.io/version"
LABEL_ROLE = f"{GROUP}/role"
#: Hash of every setting that must match between prefill and decode; the router pairs only pods
#: whose values are equal, so a rollout never sends KV between incompatible pods.
LABEL_COMPAT_HASH = f"{GROUP}/compat-hash"
#: Which of a role's two revision slots a Deployment and its pods belong to (:data:`SLOTS`). A change
#: of the compat hash is rolled out into the other slot while the serving one keeps serving
#: (pdd_operator.controller.rollout); the inactive slot is scaled to 0, never deleted.
LABEL_SLOT = f"{GROUP}/slot"
#: The two revision slots of a role. Slot ``a``'s Deployment is ``<name>-<role>`` (the name releases
#: before the slots used, so existing deployments keep theirs), slot ``b``'s ``<name>-<role>-b``.
SLOTS = ("a", "b")
#: Generation of the PDDeployment that the child was rendered from.
ANNOTATION_GENERATION = f"{GROUP}/generation"
#: The spec (JSON) a child was rendered from, as releases before ``status.appliedSpec`` wrote it on
#: every child. Only read, to restore children of objects the operator has not reconciled since.
ANNOTATION_APPLIED_SPEC_LEGACY = f"{GROUP}/applied-spec"

# --- The operator-router contract: what the operator renders on engine pods and the router reads
# back (pdd_operator.router.discovery). Change both sides together.

#: Container port names, used by the Services, the probes and the router's discovery.
HTTP_PORT_NAME = "http"
NIXL_PORT_NAME = "nixl"
#: Pod annotations the router reads in push mode: prefill's side-channel port and parallel sizes,
#: which decode must be told in advance (vllm-nixl-facts.md section 6.2). Not its NIXL engine id: each
#: engine process draws its own and the router learns it from the engine (docs/rollouts.md, "An
#: engine restarted").
ANNOTATION_SIDE_CHANNEL_PORT = f"{GROUP}/side-channel-port"
ANNOTATION_TP = f"{GROUP}/tensor-parallel-size"
ANNOTATION_PP = f"{GROUP}/pipeline-parallel-size"

#: The router's defaults for sending a failed request again as a whole (``pdd router --retries`` and
#: ``--retry-deadline``, ``spec.router.retries.attempts`` and ``deadlineSeconds``;
#: pdd_operator.router.retry): one retry, none that would start more than 30 s after the request arrived.
ROUTER_RETRY_ATTEMPTS = 1
ROUTER_RETRY_DEADLINE_SECONDS = 30

#: kubelet waiting reasons of a container that will not run without a change (a missing Secret or
#: ConfigMap key, an image that cannot be pulled or named, a crash loop): Kubernetes
#: pkg/kubelet/container/sync_result.go and images/types.go, kuberuntime_container.go. ``ContainerCreating``
#: and ``PodInitializing`` are progress, not failures, and are not listed.
CONTAINER_FAILURE_REASONS = frozenset({
    "CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull", "InvalidImageName",
    "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "PreCreateHookError",
    "PostStartHookError",
})
