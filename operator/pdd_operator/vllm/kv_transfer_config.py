"""What vLLM accepts in ``--kv-transfer-config``: the fields of its ``KVTransferConfig`` and their types.

vLLM builds ``KVTransferConfig`` (``vllm/config/kv_transfer.py``; ``vllm/config.py`` before 0.10) from
the flag's JSON object. Its ``__post_init__`` refuses a ``kv_role`` other than ``kv_producer``,
``kv_consumer`` and ``kv_both`` ("Unsupported kv_role") and a ``kv_connector`` without a ``kv_role``
("Please specify kv_role when kv_connector is set"; "kv_disagg_role" in 0.9's wording); the class is a
pydantic dataclass (``@config``), so a value of the wrong type fails validation at startup. Read in
0.9.2 (``vllm/config.py``) and 0.32.0 (``vllm/config/kv_transfer.py``, ``vllm/config/utils.py``). So
every problem reported here is one the engine stops on before it serves.

Fields that later releases dropped (:data:`REMOVED_IN_0_32`) are only refused from the release that dropped
them; :func:`removed_fields` finds them and the ``kv-transfer-config-removed-field`` rule judges them by version.
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


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


#: The first release whose connector factory reads ``kv_connector_extra_config.transfer_mode`` for ``NixlConnector``
#: (``KVConnectorFactory.get_connector_class``, vllm/distributed/kv_transfer/kv_connector/factory.py lines 125-130 of
#: the 0.34.0 sdist: ``"push"`` selects NixlPushConnector, ``"pull"`` (the default) NixlPullConnector, any other value
#: raises "Invalid NixlConnector transfer_mode"); 0.33.0's factory does not read it (NixlConnector is pull).
TRANSFER_MODE_READ_SINCE = (0, 34, 0)
#: The values that factory accepts.
TRANSFER_MODES = ("pull", "push")


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
    return errors


def well_typed(config: dict) -> dict:
    """``config`` without the keys whose values have a type vLLM refuses (reported by
    :func:`kv_transfer_config_errors`), so that reading the rest never fails."""
    return {k: v for k, v in config.items() if k not in FIELD_TYPES or isinstance(v, FIELD_TYPES[k][0])}
