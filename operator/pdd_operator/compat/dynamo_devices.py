"""A DynamoGraphDeployment component's ``device`` field, applied to the pod its operator builds.

Dynamo's ``nvidia.com/v1beta1`` components may ask for accelerators through a ``device`` field beside their
``podTemplate`` instead of the main container's resources: ``device.resources`` (``nvidia.com/gpu``, and HAMi's
slicing keys such as ``nvidia.com/gpumem`` in MiB and ``nvidia.com/gpucores`` in percent), ``device.schedulerName``,
``device.nodeSelector`` and ``device.tolerations``. The operator hands these through to the pod spec and merges
``device.resources`` into the main container, ``device.resources`` winning for a key both set (ai-dynamo/dynamo
examples/backends/vllm/deploy/v1beta1/disagg_hami.yaml, "the operator merges device.resources into the main container
at build time. For overlapping keys, device.resources is authoritative", operator change #10716/#10717). Read from the
podTemplate alone, the engine container has no GPU at all, so its parallelism could not be checked against its GPUs.

:func:`resolve_component_devices` applies the field before the walk, in the document itself (as
:func:`~pdd_operator.compat.role_templates.resolve_role_templates` does), so that the engines' pod ids stay those of
live pod specs.
"""

from __future__ import annotations

#: The container a Dynamo component's operator treats as its main one when several are given: the one named so.
MAIN_CONTAINER = "main"


def resolve_component_devices(doc: dict) -> None:
    """Apply each ``spec.components[].device`` of a DynamoGraphDeployment ``doc`` to its ``podTemplate``, in place:
    ``device.resources`` into the main container's ``resources.limits`` (the device's value wins), ``nodeSelector``
    into the pod's (the device's value wins), ``tolerations`` appended to the pod's, ``schedulerName`` set. The
    main container is the one named :data:`MAIN_CONTAINER`, else the first. Other documents, and components without
    a ``device`` map or a pod template with containers, are not touched."""
    if doc.get("kind") != "DynamoGraphDeployment" or not isinstance(doc.get("spec"), dict):
        return
    components = doc["spec"].get("components")
    for component in components if isinstance(components, list) else []:
        if isinstance(component, dict) and isinstance(component.get("device"), dict):
            _apply(component["device"], component.get("podTemplate"))


def _apply(device: dict, pod_template) -> None:
    spec = pod_template.get("spec") if isinstance(pod_template, dict) else None
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not containers or not all(isinstance(c, dict) for c in containers):
        return
    main = next((c for c in containers if c.get("name") == MAIN_CONTAINER), containers[0])
    resources = device.get("resources")
    if isinstance(resources, dict) and resources:
        own = main.get("resources") if isinstance(main.get("resources"), dict) else {}
        limits = own.get("limits") if isinstance(own.get("limits"), dict) else {}
        main["resources"] = {**own, "limits": {**limits, **resources}}
    if isinstance(device.get("nodeSelector"), dict):
        own_selector = spec.get("nodeSelector") if isinstance(spec.get("nodeSelector"), dict) else {}
        spec["nodeSelector"] = {**own_selector, **device["nodeSelector"]}
    if isinstance(device.get("tolerations"), list):
        own_tolerations = spec.get("tolerations") if isinstance(spec.get("tolerations"), list) else []
        spec["tolerations"] = [*own_tolerations, *device["tolerations"]]
    if isinstance(device.get("schedulerName"), str):
        spec["schedulerName"] = device["schedulerName"]
