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

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
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


# --- A --kv-transfer-config some of whose values are not in the files -------------------------------------------------
#
# A script or manifest often writes one value of the JSON from a variable or a command (LMCache's k8s xP1D example:
# ``"lmcache_rpc_port": "producer-${POD_ID}"`` with ``POD_ID=$(hostname | awk ...)``; a NIXL engine's ``kv_port`` from
# a ConfigMap). The shell puts that value inside the JSON vLLM parses; everything else is written in the file. vLLM
# builds the connector and the engine's side from ``kv_connector``, ``kv_connector_module_path`` and ``kv_role`` alone
# (kv_connector/factory.py ``create_connector`` looks the class up by name or module path; ``KVTransferConfig.
# is_kv_producer`` / ``is_kv_consumer`` read ``kv_role``: 0.10.1.1 and 0.34.0), and a MultiConnector builds each child
# from its own object the same way (v1/multi_connector.py, 0.26.0 line 146), so where those are written the engine is
# judged, and only the values that are not (:class:`PartlyKnown`) hold back the rules that read them.

#: The keys whose value decides which connector an engine builds and which side it plays (see above), and the object
#: that holds a connector's own settings (unknown as a whole, any of them may be anything): where one of these, or a
#: MultiConnector's ``connectors`` list, is not in the files, the engine's KV transfer settings are not known at all.
DECIDING_FIELDS: tuple[str, ...] = ("kv_connector", "kv_connector_module_path", "kv_role", "kv_connector_extra_config")


class UnknownField(Exception):  # noqa: N818 - not an error of the input: a value the files do not hold was read
    """Raised by :class:`PartlyKnown` while :func:`reading_fields` is on, where a rule reads a value of a
    ``--kv-transfer-config`` that is not in the files. ``field``: its path in the config (``kv_connector_extra_config.
    kv_port``); ``why``: why it is not known (:func:`pdd_operator.vllm.expansion.opaque_value`'s words)."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field
        self.why = why


_READING: ContextVar[bool] = ContextVar("pdd_reading_kv_fields", default=False)


@contextmanager
def reading_fields() -> Iterator[None]:
    """While on, reading a value of a :class:`PartlyKnown` object that is not in the files raises
    :class:`UnknownField` (``compat.rules.base.run_check`` runs each rule so: the rule is then "not checked" for that
    field, never judged on a value nobody can read). Off, such a value reads as the text it expanded to."""
    token = _READING.set(True)
    try:
        yield
    finally:
        _READING.reset(token)


class PartlyKnown(dict):
    """A parsed JSON object of ``--kv-transfer-config`` (or one nested in it) with values that are not in the files.

    ``unknown``: key -> ``(path, why)`` for each key whose value is not known (its text holds ``<unknown:NAME>``, a
    command substitution or a placeholder). Reading such a key (``get``, ``[]``; ``items``/``values`` read them all)
    raises :class:`UnknownField` while :func:`reading_fields` is on; otherwise this is a plain ``dict`` holding the
    expanded text. Whether a key is there (``in``, iteration over keys) is known and never raises. Nested objects
    that hold unknown values are :class:`PartlyKnown` themselves, so only the unknown leaves are unknown."""

    def __init__(self, items: dict, unknown: dict[str, tuple[str, str]]) -> None:
        super().__init__(items)
        self.unknown = unknown

    def _trap(self, key: object) -> None:
        if _READING.get() and key in self.unknown:
            raise UnknownField(*self.unknown[key])  # type: ignore[index]

    def get(self, key: object, default: Any = None) -> Any:
        self._trap(key)
        return super().get(key, default)

    def __getitem__(self, key: object) -> Any:
        self._trap(key)
        return super().__getitem__(key)

    def items(self):  # type: ignore[override]
        for key in self.unknown:
            self._trap(key)
        return super().items()

    def values(self):  # type: ignore[override]
        for key in self.unknown:
            self._trap(key)
        return super().values()


#: ``<unknown:NAME>`` (:func:`pdd_operator.vllm.expansion.unknown`) written where a JSON value stands, outside quotes
#: (``"kv_port": ${PORT}`` expanded), with what the shell glued to it.
_BARE_UNKNOWN = re.compile(r"<unknown:[A-Za-z_][A-Za-z0-9_]*>[A-Za-z0-9_.:/<>-]*")


def _quote_bare_unknowns(raw: str) -> str:
    """``raw`` with each :data:`_BARE_UNKNOWN` outside a JSON string put in quotes, so that the object parses and the
    value reads as the unknown text it is (``{"kv_port": <unknown:PORT>}`` -> ``{"kv_port": "<unknown:PORT>"}``)."""
    out: list[str] = []
    i, in_string = 0, False
    while i < len(raw):
        ch = raw[i]
        if in_string:
            out.append(raw[i:i + 2] if ch == "\\" else ch)
            i += 2 if ch == "\\" else 1
            in_string = ch != '"'
            continue
        if ch == '"':
            in_string = True
        elif (m := _BARE_UNKNOWN.match(raw, i)) is not None:
            out.append(json.dumps(m.group(0)))
            i = m.end()
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _leaf_text(value: object) -> str:
    """The text of a JSON value that is not an object (a list's items joined), for :func:`partly_known`."""
    if isinstance(value, list):
        return " ".join(_leaf_text(v) for v in value)
    return value if isinstance(value, str) else ""


def partly_known(config: object, why_of: Callable[[str], str | None], path: str = "") -> Any:
    """``config`` (a parsed JSON value) with each object that holds a value not in the files made a
    :class:`PartlyKnown` naming it. ``why_of(text)``: why a string value is not known, or ``None`` (the engine's
    :func:`~pdd_operator.vllm.expansion.opaque_value`). An object's key is unknown where its value is a string, or a
    list not all of objects, whose text ``why_of`` finds unknown; objects and lists of objects are looked into
    instead (``connectors`` of a MultiConnector: only the unknown values inside a child are unknown). ``path``: where
    ``config`` sits, for the names. Returns plain values unchanged; pure."""
    if isinstance(config, list):
        return [partly_known(v, why_of, f"{path}[{i}]") for i, v in enumerate(config)]
    if not isinstance(config, dict):
        return config
    items: dict = {}
    unknown: dict[str, tuple[str, str]] = {}
    for key, value in config.items():
        where = f"{path}.{key}" if path else str(key)
        if isinstance(value, dict) or (isinstance(value, list) and value and all(isinstance(v, dict) for v in value)):
            items[key] = partly_known(value, why_of, where)
            continue
        items[key] = value
        if (why := why_of(_leaf_text(value))) is not None:
            unknown[key] = (where, why)
    return PartlyKnown(items, unknown) if unknown else items


def unknown_fields(config: object) -> list[tuple[str, str]]:
    """Every ``(path, why)`` of a value not in the files inside ``config`` (:func:`partly_known`'s result), outer
    objects first; ``[]`` when all are known."""
    if isinstance(config, list):
        return [f for v in config for f in unknown_fields(v)]
    if not isinstance(config, dict):
        return []
    own = list(config.unknown.values()) if isinstance(config, PartlyKnown) else []
    return own + [f for v in dict.values(config) for f in unknown_fields(v)]


def _deciding_unknown(config: dict) -> str | None:
    """The path of the first :data:`DECIDING_FIELDS` value (or MultiConnector ``connectors`` list) of ``config`` or
    of a connector it wraps that is not in the files, or ``None``."""
    if not isinstance(config, PartlyKnown | dict):
        return None
    unknown = config.unknown if isinstance(config, PartlyKnown) else {}
    for key in DECIDING_FIELDS:
        if key in unknown:
            return unknown[key][0]
    extra = dict.get(config, "kv_connector_extra_config")
    if isinstance(extra, PartlyKnown) and "connectors" in extra.unknown:
        return extra.unknown["connectors"][0]
    children = dict.get(extra, "connectors") if isinstance(extra, dict) else None
    for child in children if isinstance(children, list) else []:
        if isinstance(child, dict) and (found := _deciding_unknown(child)) is not None:
            return found
    return None


def read_partly(raw: str, why_of: Callable[[str], str | None]) -> tuple[dict, tuple[tuple[str, str], ...]] | None:
    """A ``--kv-transfer-config`` value some of whose values are not in the files, read as far as it is known:
    ``(config, unknown fields)``, ``config`` a :func:`partly_known` object (``(path, why)`` per unknown value:
    :func:`unknown_fields`). ``None`` where it cannot be read so: it is not a JSON object (also once bare
    ``<unknown:NAME>`` values are quoted), no value is unknown, or one that decides the connector or the engine's side
    is (:data:`DECIDING_FIELDS`: the engine's KV settings are then unknown as a whole). ``why_of``: as for
    :func:`partly_known`. Never raises."""
    try:
        value = json.loads(_quote_bare_unknowns(raw))
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    config = partly_known(value, why_of)
    fields = unknown_fields(config)
    if not fields or _deciding_unknown(config) is not None:
        return None
    return config, tuple(fields)
