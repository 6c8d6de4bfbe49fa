"""What vLLM accepts in ``--kv-transfer-config``: the fields of its ``KVTransferConfig`` and their types.

vLLM builds ``KVTransferConfig`` (``vllm/config/kv_transfer.py``; ``vllm/config.py`` before 0.10) from
the flag's JSON object. Its ``__post_init__`` refuses a ``kv_role`` other than ``kv_producer``,
``kv_consumer`` and ``kv_both`` ("Unsupported kv_role") and a ``kv_connector`` without a ``kv_role``
("Please specify kv_role when kv_connector is set"; "kv_disagg_role" in 0.9's wording); the class is a
pydantic dataclass (``@config``), so a value of the wrong type fails validation at startup. Read in
0.9.2 (``vllm/config.py``) and 0.32.0 (``vllm/config/kv_transfer.py``, ``vllm/config/utils.py``). So
every problem reported here is one the engine stops on before it serves.

Fields that later releases dropped (:data:`REMOVED_IN_0_32`) are only refused from the release that dropped
them, keys that were never fields (:data:`KV_TRANSFER_FIELDS`) from 0.16.0 (:data:`UNKNOWN_FIELDS_REFUSED_SINCE`);
:func:`refused_fields` finds both and the ``kv-transfer-config-removed-field`` rule judges them by version.
"""

from __future__ import annotations

from typing import Any

#: vLLM's KVRole literal values.
KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")

#: Field -> (Python types accepted, what the message calls it); ``None`` is accepted where the field is
#: optional in vLLM (``str | None``).
FIELD_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "kv_connector": ((str, type(None)), "a connector name (string)"),
    "engine_id": ((str, type(None)), "a string"),
    "kv_buffer_device": ((str,), "a device name (string: cuda, cpu, xpu)"),
    "kv_role": ((str, type(None)), "one of kv_producer, kv_consumer, kv_both"),
    "kv_connector_extra_config": ((dict,), "a JSON object"),
    "kv_connector_module_path": ((str, type(None)), "a module path (string)"),
}


#: ``KVTransferConfig`` fields vLLM 0.32.0 removed: the PyNccl-era ``kv_ip``, ``kv_rank``, ``kv_parallel_size`` and
#: ``kv_buffer_size`` (no NIXL file read them; vllm-nixl-facts.md section 2.1). From 0.32.0 a ``--kv-transfer-config``
#: holding one fails at argument parsing: every vLLM config dataclass is pydantic with ``extra='forbid'``
#: (``vllm/config/utils.py`` ``config()``), so ``KVTransferConfig(kv_rank=0)`` raises ``ValidationError ... kv_rank:
#: Unexpected keyword argument`` (checked on the 0.32.0 wheel). Before 0.32.0 they are accepted and ignored.
REMOVED_IN_0_32: tuple[str, ...] = ("kv_ip", "kv_rank", "kv_parallel_size", "kv_buffer_size")
#: The first release that refuses :data:`REMOVED_IN_0_32`.
REMOVED_FIELDS_REFUSED_SINCE = (0, 32, 0)


def removed_fields(config: dict) -> tuple[str, ...]:
    """The :data:`REMOVED_IN_0_32` keys of one parsed ``--kv-transfer-config`` object or of the configs of the
    connectors it wraps (``MultiConnector``'s ``kv_connector_extra_config.connectors``, each built as a
    ``KVTransferConfig`` of its own), in :data:`REMOVED_IN_0_32` order, each once; ``()`` when none."""
    found: set[str] = set()
    stack = [config]
    while stack:
        current = stack.pop()
        found.update(k for k in REMOVED_IN_0_32 if k in current)
        extra = current.get("kv_connector_extra_config")
        children = extra.get("connectors") if isinstance(extra, dict) else None
        stack.extend(c for c in (children if isinstance(children, list) else []) if isinstance(c, dict))
    return tuple(k for k in REMOVED_IN_0_32 if k in found)


#: ``KVTransferConfig``'s fields in every release from 0.14.0 to 0.31.0 (the 0.14.0, 0.14.1, 0.16.0, 0.17.0, 0.20.0,
#: 0.22.0, 0.24.0, 0.25.0, 0.28.0 and 0.31.0 sdists' ``vllm/config/kv_transfer.py``); 0.32.0-0.34.0 hold these less
#: :data:`REMOVED_IN_0_32`. A key outside them (``backends`` written beside ``kv_connector`` instead of inside
#: ``kv_connector_extra_config``; ``kv_producers_size`` from the PyNccl era) is no field of any of those releases.
KV_TRANSFER_FIELDS: frozenset[str] = frozenset({
    "kv_connector", "engine_id", "kv_buffer_device", "kv_buffer_size", "kv_role", "kv_rank", "kv_parallel_size",
    "kv_ip", "kv_port", "kv_connector_extra_config", "kv_connector_module_path", "enable_permute_local_kv",
    "kv_load_failure_policy"})
#: The first release whose config classes forbid unknown keys: ``config()`` in ``vllm/config/utils.py`` builds each
#: pydantic dataclass with ``ConfigDict(extra="forbid")`` in the 0.16.0 sdist (and every later one read), while the
#: 0.14.0 and 0.14.1 ``config()`` sets no ``extra`` and pydantic ignores the key (there is no 0.15 release).
UNKNOWN_FIELDS_REFUSED_SINCE = (0, 16, 0)
#: The newest release whose ``KVTransferConfig`` fields were read: past it a key may have become a field.
FIELDS_READ_UNTIL = (0, 34, 0)


def refused_fields(config: dict) -> tuple[str, ...]:
    """The keys of one parsed ``--kv-transfer-config`` object, or of the configs of the connectors it wraps (each
    built as a ``KVTransferConfig`` of its own, :func:`removed_fields`), that a release refuses: the
    :data:`REMOVED_IN_0_32` ones first (in that order), then those outside :data:`KV_TRANSFER_FIELDS` (sorted),
    each once; ``()`` when none."""
    unknown: set[str] = set()
    stack = [config]
    while stack:
        current = stack.pop()
        unknown.update(k for k in current if isinstance(k, str) and k not in KV_TRANSFER_FIELDS)
        extra = current.get("kv_connector_extra_config")
        children = extra.get("connectors") if isinstance(extra, dict) else None
        stack.extend(c for c in (children if isinstance(children, list) else []) if isinstance(c, dict))
    return removed_fields(config) + tuple(sorted(unknown))


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def kv_transfer_config_errors(config: dict, *, role_required: bool = True) -> list[str]:
    """Problems vLLM refuses at startup in one ``--kv-transfer-config`` object (a parsed JSON object),
    as messages naming the key; ``[]`` when none. Never raises. ``role_required=False`` leaves out the
    missing ``kv_role`` (a launcher that may set the role itself, such as Dynamo's ``dynamo.vllm``)."""
    errors = []
    for key, (types, want) in FIELD_TYPES.items():
        if key in config and not isinstance(config[key], types):
            errors.append(f"--kv-transfer-config {key} must be {want}, not {_type_name(config[key])}")
    role = config.get("kv_role")
    if isinstance(role, str) and role not in KV_ROLES:
        errors.append(f"--kv-transfer-config kv_role {role!r} is not one of {', '.join(KV_ROLES)} "
                      "(vLLM: 'Unsupported kv_role')")
    if role_required and isinstance(config.get("kv_connector"), str) and config.get("kv_role") is None:
        errors.append("--kv-transfer-config sets kv_connector without kv_role (vLLM: 'Please specify kv_role "
                      "when kv_connector is set')")
    for i, child in enumerate(multi_connector_children(config)):
        errors.extend(e.replace("--kv-transfer-config ", f"--kv-transfer-config MultiConnector connectors[{i}] ", 1)
                      for e in kv_transfer_config_errors(child))
    return errors


def multi_connector_children(config: dict) -> list[dict]:
    """The child connector configs of a ``MultiConnector`` ``--kv-transfer-config`` (its
    ``kv_connector_extra_config.connectors`` objects, in order); ``[]`` for another connector.

    vLLM builds each as a ``KVTransferConfig`` of its own (``KVTransferConfig(**ktc, engine_id=...)`` in
    multi_connector.py: 0.10.1.1 line 53, 0.11.0 line 96, 0.20.0 lines 144 and 198, 0.34.0 lines 149-229), so its
    ``__post_init__`` refuses a child's ``kv_connector`` without ``kv_role`` and an unknown ``kv_role`` as it refuses
    the flag's own (0.10.1.1 config/__init__.py lines 3210-3216, 0.34.0 config/kv_transfer.py lines 135-143), whatever
    launcher set the outer role: from 0.20.0 already while VllmConfig is built (``requires_piecewise_for_cudagraph``,
    ``all_children_support_hma``), before that when the connector is created; either way the engine stops."""
    if config.get("kv_connector") != "MultiConnector":
        return []
    extra = config.get("kv_connector_extra_config")
    children = extra.get("connectors") if isinstance(extra, dict) else None
    return [c for c in children if isinstance(c, dict)] if isinstance(children, list) else []


#: The package of vLLM's own modules: a ``kv_connector_module_path`` under it loads vLLM's code.
VLLM_PACKAGE = "vllm."


def third_party_module(config: dict) -> str | None:
    """The ``kv_connector_module_path`` of a ``--kv-transfer-config`` object (or a MultiConnector child's) where it
    names a module outside vLLM's own package, else ``None`` (unset, empty, or under ``vllm.``).

    vLLM's connector factory imports such a module and takes the class named ``kv_connector`` from it before looking
    in its own registry ("External module path takes priority over internal registry": factory.py 0.26.0, 0.31.0 and
    0.34.0 lines 103-124; 0.20.0 the same branch), so the connector that runs is that package's code whatever its
    name: a ``MooncakeConnector`` from ``mooncake.mooncake_connector_v1`` is the mooncake wheel's, not vLLM's."""
    path = config.get("kv_connector_module_path")
    return path if isinstance(path, str) and path and not path.startswith(VLLM_PACKAGE) else None


def well_typed(config: dict) -> dict:
    """``config`` without the keys whose values have a type vLLM refuses (reported by
    :func:`kv_transfer_config_errors`), so that reading the rest never fails."""
    return {k: v for k, v in config.items() if k not in FIELD_TYPES or isinstance(v, FIELD_TYPES[k][0])}
