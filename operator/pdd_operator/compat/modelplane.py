"""Modelplane (modelplaneai/modelplane) ModelDeployment: what its compose function adds to the engines of a
prefill/decode pair before they run, so the rules judge the pods Modelplane renders, not only the fields written.

For ``serving.mode: PrefillDecode`` the compose-model-replica function (functions/compose-model-replica/function/
routing.py at 90ba117, ``_apply_prefill_decode``) does, on the serving pod template of each phase engine (a
Deployment's template, or a LeaderWorkerSet's leader template: ``_serving_pod_templates``, followers never serve):

- ``_inject_nixl_plumbing``: ``VLLM_NIXL_SIDE_CHANNEL_HOST`` from ``status.podIP`` and
  ``VLLM_NIXL_SIDE_CHANNEL_PORT`` ``"5557"`` on the ``engine`` container unless it names them, and a Memory
  ``/dev/shm``;
- GPUs (backends/base.py ``place_pod``, ``engine_resources``, ``resource_claim_template``): the member's
  ``nodeSelector.devices`` become the device requests of a DRA ResourceClaimTemplate the pod claims as a whole
  (``resources.claims: [{name: devices}]``, no ``nvidia.com/gpu`` limit); "A GPU request's count is the GPUs per
  node" (apis/modeldeployments/definition.yaml). The checker counts a container's GPUs from its ``*/gpu``
  resources, so the engine container is given the count of its member's GPU request (:func:`gpu_request`) as
  ``nvidia.com/gpu`` (``amd.com/gpu`` for an AMD selector) where it names no GPU resource itself;
- ``_add_sidecar_to_decode``: a ``pd-sidecar`` container (ghcr.io/llm-d/llm-d-router-disagg-sidecar) on port 8000
  (``base.ENGINE_PORT``) in the decode pod, forwarding to the engine's ``--port`` or, when the args name none, to
  8001 (``_DECODE_ENGINE_PORT``): Modelplane does not add ``--port`` to the engine, which then listens on vLLM's
  default 8000.

The ModelDeployment holds its engines at ``spec.engines`` (the design's shape, design/unopinionated-deployments.md)
or ``spec.template.spec.engines`` (the released API, docs/manifests/examples), each with ``phase`` Prefill or Decode
and ``members`` whose ``role`` is Standalone, Leader or Worker and whose ``template`` is a pod template.
"""

from __future__ import annotations

from pdd_operator.compat.rules.base import MODELPLANE_KIND

#: The API group of Modelplane's resources.
MODELPLANE_GROUP = "modelplane.ai/"
#: routing.py ``_NIXL_SIDE_CHANNEL_PORT``.
SIDE_CHANNEL_PORT = "5557"
#: routing.py ``_SIDECAR_IMAGE`` and ``base.ENGINE_PORT``: the decode pod's pd-sidecar and the port it serves.
SIDECAR_IMAGE = "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0"
SIDECAR_PORT = 8000
#: Members whose pod serves the API (routing.py ``_serving_pod_templates``: a Deployment's or an LWS leader's).
SERVING_MEMBER_ROLES = ("Standalone", "Leader")


def _engines_specs(doc: dict) -> list[dict]:
    """The specs of ``doc`` that hold ``serving`` and ``engines``: ``spec`` and ``spec.template.spec``."""
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    inner = template.get("spec") if isinstance(template.get("spec"), dict) else {}
    return [s for s in (spec, inner) if isinstance(s.get("engines"), list)]


def is_modelplane_pd(doc: dict) -> bool:
    """``doc`` is a Modelplane ModelDeployment whose engines serve as one prefill/decode pair."""
    if not str(doc.get("apiVersion", "")).startswith(MODELPLANE_GROUP) or doc.get("kind") != MODELPLANE_KIND:
        return False
    return any((s.get("serving") or {}).get("mode") == "PrefillDecode" for s in _engines_specs(doc))


def resolve_modelplane_plumbing(doc: dict) -> None:
    """Add, in ``doc`` itself, what Modelplane's compose function adds to a PrefillDecode pair (module docstring):
    the side-channel host and port on each serving ``engine`` container that does not name them, and the decode
    pod's pd-sidecar on port 8000. Any other document is left as it is."""
    if not is_modelplane_pd(doc):
        return
    for spec in _engines_specs(doc):
        if (spec.get("serving") or {}).get("mode") != "PrefillDecode":
            continue
        for engine in spec["engines"]:
            if not isinstance(engine, dict):
                continue
            for member in engine.get("members") or []:
                if not isinstance(member, dict) or member.get("role") not in SERVING_MEMBER_ROLES:
                    continue
                pod = (member.get("template") or {}).get("spec")
                if not isinstance(pod, dict) or not isinstance(pod.get("containers"), list):
                    continue
                _plumb(pod, decode=engine.get("phase") == "Decode", gpus=gpu_request(member))


#: Device drivers of GPU requests (DRA ``device.driver`` / capacity domains) and the extended resource that counts
#: them here.
_GPU_DRIVERS = {"gpu.nvidia.com": "nvidia.com/gpu", "gpu.amd.com": "amd.com/gpu"}


def gpu_request(member: dict) -> tuple[str, int] | None:
    """The GPU request of a Modelplane member (``nodeSelector.devices``): ``(resource, count)`` for the one request
    whose selectors name a GPU driver (``gpu.nvidia.com``, ``gpu.amd.com``) or, failing that, the one named ``gpu``;
    ``count`` defaults to 1 (the XRD's default). ``None`` when there is no such request, more than one, or its count
    is not a literal integer. Pure."""
    selector = member.get("nodeSelector") if isinstance(member.get("nodeSelector"), dict) else {}
    devices = [d for d in selector.get("devices") or [] if isinstance(d, dict)]

    def driver(d: dict) -> str | None:
        cel = " ".join(str(s.get("cel", "")) for s in d.get("selectors") or [] if isinstance(s, dict))
        return next((res for name, res in _GPU_DRIVERS.items() if name in cel), None)

    named = [(d, driver(d)) for d in devices if driver(d)] or [(d, "nvidia.com/gpu") for d in devices
                                                                if str(d.get("name", "")).lower() == "gpu"]
    if len(named) != 1:
        return None
    device, resource = named[0]
    count = device.get("count", 1)
    return (resource, count) if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None


def _plumb(pod: dict, *, decode: bool, gpus: tuple[str, int] | None = None) -> None:
    containers = pod["containers"]
    main = next((c for c in containers if isinstance(c, dict) and c.get("name") == "engine"), None)
    if main is None:
        return
    resources = main.get("resources") if isinstance(main.get("resources"), dict) else {}
    named = [k for part in ("limits", "requests") for k in (resources.get(part) or {}) if str(k).endswith("/gpu")]
    if gpus is not None and not named:
        limits = dict(resources.get("limits") or {})
        limits[gpus[0]] = str(gpus[1])
        main["resources"] = {**resources, "limits": limits}
    env = list(main.get("env") or [])
    names = {e.get("name") for e in env if isinstance(e, dict)}
    if "VLLM_NIXL_SIDE_CHANNEL_HOST" not in names:
        env.append({"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    if "VLLM_NIXL_SIDE_CHANNEL_PORT" not in names:
        env.append({"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": SIDE_CHANNEL_PORT})
    main["env"] = env
    if decode and not any(isinstance(c, dict) and c.get("name") == "pd-sidecar" for c in containers):
        containers.append({"name": "pd-sidecar", "image": SIDECAR_IMAGE,
                           "ports": [{"containerPort": SIDECAR_PORT}]})


__all__ = ["SIDECAR_PORT", "SIDE_CHANNEL_PORT", "gpu_request", "is_modelplane_pd", "resolve_modelplane_plumbing"]
