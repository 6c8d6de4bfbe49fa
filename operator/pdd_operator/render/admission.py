"""Will the apiserver accept the objects rendered for a PDDeployment? Pure checks, shared by the
admission webhook, ``pdd check`` and the operator's reconcile (for objects admitted without the webhook).

The compatibility rules (:mod:`pdd_operator.compat`) ask whether vLLM can run a spec; these ask
whether Kubernetes will store what the operator renders from it. A PDDeployment the apiserver admits
can still carry values that are refused once they land in a child (a node selector value that is not
a label value, a resource quantity that does not parse) or make a child too large: then every apply
fails with 422 and nothing runs. Each finding here is an error that names the field and the fix; the
limits are Kubernetes' own (``k8s.io/apimachinery/pkg/util/validation``,
``k8s.io/apimachinery/pkg/api/validation/objectmeta.go``, etcd's request size limit).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from pdd_operator.api.names import DNS1123_SUBDOMAIN, MAX_NAME, is_label_value, is_pddeployment_name
from pdd_operator.api.spec import ENV_NAME_PATTERN, PDDeploymentSpec
from pdd_operator.api.status import Finding, encode_spec
from pdd_operator.render.engine import role_ports
from pdd_operator.render.workloads import Owner, render_children

#: Sum of the keys and values of an object's annotations (``TotalAnnotationSizeLimitB``, 256 KiB).
MAX_ANNOTATIONS_BYTES = 256 * 1024
#: Largest rendered object (or PDDeployment with its status) accepted here, as compact JSON. etcd
#: refuses requests over ``--max-request-bytes`` (1.5 MiB by default); the stored object also holds
#: ``managedFields`` and the apiserver's defaults, so 1 MiB leaves room for both.
MAX_OBJECT_BYTES = 1024 * 1024
#: More than the bytes of a rendered child that do not come from the spec (names, labels, probes, ...).
RENDER_OVERHEAD_BYTES = 64 * 1024
#: Largest TCP port.
MAX_PORT = 65535

SOURCE = "Kubernetes object validation (k8s.io/apimachinery/pkg/util/validation, api/validation/objectmeta.go)"
QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
#: Kubernetes >= 1.34 accepts any printable ASCII except ``=`` in an env var name (RelaxedEnvironmentVariableValidation).
ENV_NAME = re.compile(ENV_NAME_PATTERN)


def _image_reference() -> re.Pattern:
    """The grammar of an image reference, ``[domain[:port]/]path[:tag][@digest]``, as the kubelet
    parses it before any pull (github.com/distribution/reference ``regexp.go``, ``ReferenceRegexp``;
    k8s.io/kubernetes/pkg/kubelet/images/image_manager.go: a reference that does not parse is
    ``InvalidImageName`` and the container never starts)."""
    alnum = r"[a-z0-9]+"
    path = rf"{alnum}(?:(?:[._]|__|-+){alnum})*"
    domain_part = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
    host = rf"(?:{domain_part}(?:\.{domain_part})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
    tag = r"[\w][\w.-]{0,127}"
    digest = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
    return re.compile(rf"(?:{host}/)?{path}(?:/{path})*(?::{tag})?(?:@{digest})?", re.ASCII)


IMAGE_REFERENCE = _image_reference()
#: Longest repository name of a reference (``reference.NameTotalLengthMax``).
MAX_IMAGE_NAME = 255


def is_image_reference(image: str) -> bool:
    """Whether the kubelet can parse ``image`` (:data:`IMAGE_REFERENCE`, name at most 255 characters)."""
    if not IMAGE_REFERENCE.fullmatch(image):
        return False
    name = image.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    return len(name) <= MAX_IMAGE_NAME


def is_qualified_name(value: str) -> bool:
    """``[prefix/]name`` as label keys, resource names and topology keys must be (``IsQualifiedName``)."""
    prefix, slash, name = value.rpartition("/")
    if slash and not (0 < len(prefix) <= MAX_NAME and DNS1123_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME_PART.match(name))


def is_dns_subdomain(value: str) -> bool:
    """A DNS-1123 subdomain (Secret, ConfigMap, ServiceAccount, ResourceClaimTemplate names)."""
    return 0 < len(value) <= MAX_NAME and bool(DNS1123_SUBDOMAIN.match(value))


#: Every id these checks report, with what must hold (registered by ``compat/rules/records.py`` so that
#: ``pdd rules`` and docs/rules.md list them; :func:`_error` refuses an id not listed here).
ADMISSION_RULES: dict[str, str] = {
    "name-invalid": "metadata.name is a DNS-1123 subdomain from which valid child names and label values follow.",
    "label-invalid": "Node selector keys/values and the topology key are valid label keys and values.",
    "resource-invalid": "Resource names and quantities in requests and limits are valid Kubernetes quantities.",
    "reference-invalid": "Names of referenced objects (ConfigMap, Secret, ServiceAccount, claims) are DNS-1123 names.",
    "toleration-invalid": "Tolerations are what the apiserver accepts: label keys and values, Exists for an empty key.",
    "image-invalid": "Image references parse as the kubelet reads them, with no surrounding whitespace.",
    "env-invalid": "Environment variable names are names the apiserver accepts.",
    "port-out-of-range": "Rendered ports (shifted for the host network) stay within 1-65535.",
    "object-too-large": "Every rendered object stays under the apiserver's and etcd's size limits.",
}


def _error(rule: str, field: str, message: str, fix: str) -> Finding:
    if rule not in ADMISSION_RULES:
        raise KeyError(f"admission rule {rule!r} is not in ADMISSION_RULES")
    return Finding(rule=rule, severity="error", fields=[field], message=message, fix=fix, source=SOURCE)


def check_name(name: str) -> list[Finding]:
    """The PDDeployment name itself: a DNS-1123 subdomain (``pdd check`` sees names the apiserver
    would refuse, e.g. ``qwen2.5:32b``). Any valid name yields valid child names
    (:mod:`pdd_operator.api.names`)."""
    if is_pddeployment_name(name):
        return []
    return [_error(
        "name-invalid", "metadata.name",
        f"metadata.name {name!r} is not a DNS-1123 subdomain (at most {MAX_NAME} characters of a-z, 0-9, '-' "
        "and '.', starting and ending with a letter or digit); the apiserver refuses it.",
        "Rename the PDDeployment, e.g. replace ':' and '_' by '-' and use lower case.",
    )]


def _label_map(field: str, labels: dict[str, str]) -> Iterable[Finding]:
    for key, value in labels.items():
        if not is_qualified_name(key):
            yield _error("label-invalid", f"{field}.{key}", f"{field}: key {key!r} is not a valid label key.",
                         f"Use [prefix/]name with a name of at most 63 characters of letters, digits, '-', '_', '.' in {field}.")
        if not is_label_value(str(value)):
            yield _error("label-invalid", f"{field}.{key}",
                         f"{field}.{key}: {value!r} is not a valid label value (at most 63 characters of letters, "
                         "digits, '-', '_', '.', starting and ending with a letter or digit).",
                         f"Correct {field}.{key} to the node label's exact value.")


def _resources(field: str, resources) -> Iterable[Finding]:
    for kind in ("requests", "limits"):
        for key, value in getattr(resources, kind).items():
            path = f"{field}.{kind}.{key}"
            if not is_qualified_name(key):
                yield _error("resource-invalid", path, f"{path}: {key!r} is not a resource name.",
                             "Use a standard resource (cpu, memory, ephemeral-storage, hugepages-<size>) or "
                             "<domain>/<name>.")
            if not QUANTITY.match(str(value)) or str(value).startswith("-"):
                yield _error("resource-invalid", path, f"{path}: {value!r} is not a non-negative Kubernetes quantity.",
                             "Write a quantity such as 16, 500m, 200Gi or 1e3.")


def _tolerations(field: str, tolerations) -> Iterable[Finding]:
    """What the apiserver checks in each pod toleration (``ValidateTolerations`` in
    k8s.io/kubernetes/pkg/apis/core/validation/validation.go): the key a label key, the value a label
    value, no value with ``Exists``, ``Exists`` when the key is empty, ``tolerationSeconds`` only
    with ``NoExecute``."""
    for i, tol in enumerate(tolerations):
        at = f"{field}[{i}]"
        if tol.key and not is_qualified_name(tol.key):
            yield _error("toleration-invalid", f"{at}.key", f"{at}.key {tol.key!r} is not a valid taint key.",
                         "Use the taint's key exactly as `kubectl describe node` shows it.")
        if not tol.key and tol.operator != "Exists":
            yield _error("toleration-invalid", f"{at}.operator", f"{at}: an empty key tolerates every taint only "
                         "with operator Exists; the apiserver refuses it with Equal.",
                         f"Set {at}.key to the taint's key, or {at}.operator to Exists.")
        if tol.value and tol.operator == "Exists":
            yield _error("toleration-invalid", f"{at}.value", f"{at}.value must be empty with operator Exists.",
                         f"Remove {at}.value, or set {at}.operator to Equal.")
        elif tol.value and not is_label_value(tol.value):
            yield _error("toleration-invalid", f"{at}.value",
                         f"{at}.value {tol.value!r} is not a valid taint value (at most 63 characters of letters, "
                         "digits, '-', '_', '.', starting and ending with a letter or digit).",
                         "Use the taint's value exactly as `kubectl describe node` shows it.")
        if tol.toleration_seconds is not None and tol.effect != "NoExecute":
            yield _error("toleration-invalid", f"{at}.tolerationSeconds",
                         f"{at}.tolerationSeconds is allowed only with effect NoExecute.",
                         f"Set {at}.effect to NoExecute, or remove {at}.tolerationSeconds.")


def _ref_name(field: str, value: str | None, what: str) -> Iterable[Finding]:
    if value is not None and not is_dns_subdomain(value):
        yield _error("reference-invalid", field, f"{field}: {value!r} is not a valid {what} name (DNS-1123 subdomain).",
                     f"Set {field} to the {what}'s name: lower case letters, digits, '-' and '.'.")


def check_fields(spec: PDDeploymentSpec) -> list[Finding]:
    """Spec values that end up in fields the apiserver validates more strictly than the CRD schema."""
    out: list[Finding] = []
    for role in ("prefill", "decode"):
        r = spec.role(role)
        out += _label_map(f"spec.{role}.nodeSelector", r.node_selector)
        out += _tolerations(f"spec.{role}.tolerations", r.tolerations)
        out += _resources(f"spec.{role}.resources", r.resources)
        for i, var in enumerate(r.env):
            out += _env_name(f"spec.{role}.env[{i}].name", var.name)
    for i, var in enumerate(spec.engine.env):
        out += _env_name(f"spec.engine.env[{i}].name", var.name)
    out += _resources("spec.router.resources", spec.router.resources)
    out += _label_map("spec.router.nodeSelector", spec.router.node_selector)
    out += _tolerations("spec.router.tolerations", spec.router.tolerations)
    if spec.placement.gpu_product is not None:
        out += _label_map("spec.placement", {"gpuProduct": spec.placement.gpu_product})
    if spec.placement.topology_key is not None and not is_qualified_name(spec.placement.topology_key):
        out.append(_error("label-invalid", "spec.placement.topologyKey",
                          f"spec.placement.topologyKey {spec.placement.topology_key!r} is not a valid label key.",
                          "Use a node label key, e.g. topology.kubernetes.io/zone."))
    for i, secret in enumerate(spec.engine.image_pull_secrets):
        out += _ref_name(f"spec.engine.imagePullSecrets[{i}]", secret, "Secret")
    if spec.model.config_map_ref is not None:
        out += _ref_name("spec.model.configMapRef.name", spec.model.config_map_ref.name, "ConfigMap")
    if spec.model.hf_token_secret_ref is not None:
        out += _ref_name("spec.model.hfTokenSecretRef.name", spec.model.hf_token_secret_ref.name, "Secret")
    out += _ref_name("spec.router.serviceAccountName", spec.router.service_account_name, "ServiceAccount")
    if spec.network.dra is not None:
        out += _ref_name("spec.network.dra.gpuClaimTemplate", spec.network.dra.gpu_claim_template, "ResourceClaimTemplate")
        out += _ref_name("spec.network.dra.nicClaimTemplate", spec.network.dra.nic_claim_template, "ResourceClaimTemplate")
    for field, image in (("spec.engine.image", spec.engine.image), ("spec.router.image", spec.router.image)):
        if image != image.strip():
            out.append(_error("image-invalid", field, f"{field} has leading or trailing whitespace.",
                              f"Remove the whitespace around {field}."))
        elif not is_image_reference(image):
            out.append(_error("image-invalid", field,
                              f"{field} {image!r} is not an image reference the kubelet can parse "
                              "([registry[:port]/]repository[:tag][@digest], lower-case repository, tag of letters, "
                              "digits, '_', '.', '-'): its pods would never start (InvalidImageName).",
                              f"Correct {field}, e.g. vllm/vllm-openai:v0.24.0."))
    return out


def _env_name(field: str, name: str) -> Iterable[Finding]:
    if not ENV_NAME.match(name):
        yield _error("env-invalid", field, f"{field} {name!r} is not a valid environment variable name.",
                     "Use printable ASCII characters other than '=' (portable: letters, digits and '_').")


def check_ports(spec: PDDeploymentSpec) -> list[Finding]:
    """Rendered ports must be TCP ports: with the host network decode's are shifted up
    (:func:`pdd_operator.render.engine.decode_port_shift`)."""
    http, side = role_ports(spec, "decode")
    if max(http, side) <= MAX_PORT:
        return []
    return [_error(
        "port-out-of-range", "spec.port",
        f"With the host network decode listens on spec.port and spec.kvTransfer.sideChannelPort shifted up "
        f"(to {http} and {side}), beyond port {MAX_PORT}.",
        "Lower spec.port and spec.kvTransfer.sideChannelPort.",
    )]


def _size(obj: dict) -> int:
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())


def check_sizes(name: str, namespace: str, spec: PDDeploymentSpec, model_config: dict | None = None) -> list[Finding]:
    """Every rendered object, and the PDDeployment with its ``status.appliedSpec``, within size limits.

    A child holds a spec value at most twice (the engine's env is copied into the preflight init
    container) plus a fixed frame well under :data:`RENDER_OVERHEAD_BYTES`, and the compressed copy
    is at most ~1.4 times the spec; so a spec under a third of the limit (less that frame) needs no
    rendering to be known to fit, and only larger ones are rendered and measured.
    """
    out: list[Finding] = []
    wire = spec.wire()
    if 3 * _size(wire) + RENDER_OVERHEAD_BYTES <= min(MAX_OBJECT_BYTES, MAX_ANNOTATIONS_BYTES * 3):
        return out
    owner = Owner(name=name, namespace=namespace, uid="00000000-0000-0000-0000-000000000000", generation=1)
    for child in render_children(owner, spec, model_config):
        kind, child_name = child["kind"], child["metadata"]["name"]
        annotations = child["metadata"].get("annotations") or {}
        pod_annotations = ((child.get("spec") or {}).get("template") or {}).get("metadata", {}).get("annotations") or {}
        for where, notes in (("metadata", annotations), ("pod template", pod_annotations)):
            total = sum(len(k.encode()) + len(str(v).encode()) for k, v in notes.items())
            if total > MAX_ANNOTATIONS_BYTES:
                out.append(_error("object-too-large", "spec",
                                  f"The {where} annotations of {kind} {child_name} would be {total} bytes, over "
                                  f"Kubernetes' {MAX_ANNOTATIONS_BYTES}.", "Shorten spec.network.networks."))
        size = _size(child)
        if size > MAX_OBJECT_BYTES:
            out.append(_error(
                "object-too-large", "spec",
                f"{kind} {child_name} would be {size} bytes of JSON, over the {MAX_OBJECT_BYTES} this operator allows "
                "(etcd refuses requests over 1.5 MiB by default).",
                "Move large values out of extraArgs and env (e.g. a chat template into a ConfigMap mounted as a "
                "file, passed as a path).",
            ))
    kept = _size(wire) + len(encode_spec(wire, 1)["data"])
    if kept > MAX_OBJECT_BYTES:
        out.append(_error(
            "object-too-large", "spec",
            f"The spec ({_size(wire)} bytes) and its compressed copy in status.appliedSpec would be {kept} bytes, "
            f"over {MAX_OBJECT_BYTES}.",
            "Move large values out of the spec (e.g. a chat template into a ConfigMap mounted as a file).",
        ))
    return out


def admission_findings(name: str, namespace: str, spec: PDDeploymentSpec,
                       model_config: dict | None = None) -> list[Finding]:
    """Every reason the apiserver would refuse the PDDeployment or the objects rendered from it
    (all errors, each naming a field): :func:`check_name`, :func:`check_fields`, :func:`check_ports`,
    :func:`check_sizes`. ``name``: ``metadata.name`` (for ``generateName`` pass the prefix plus five
    characters, as the apiserver appends)."""
    return [*check_name(name), *check_fields(spec), *check_ports(spec),
            *check_sizes(name, namespace, spec, model_config)]


def admission_findings_of(obj: dict, spec: PDDeploymentSpec, model_config: dict | None = None) -> list[Finding]:
    """:func:`admission_findings` for a PDDeployment object (a dict with ``metadata``) and its parsed spec."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or (meta.get("generateName") or "pdd-") + "x" * 5
    return admission_findings(name, meta.get("namespace") or "default", spec, model_config)
