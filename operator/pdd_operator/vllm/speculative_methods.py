"""The ``--speculative-config`` ``method`` values each vLLM release accepts.

``EngineArgs.create_speculative_config`` builds ``SpeculativeConfig(**speculative_config)`` while the engine config is
created (vllm/engine/arg_utils.py 0.26.0 l.1745-1780), before any engine starts. ``method`` is typed by the
``SpeculativeMethod`` Literal (vllm/config/speculative.py 0.18.0 l.51-76, 0.26.0 l.66-94, 0.33.0 l.419; a pydantic
dataclass, so another value fails validation); 0.34.0 types it ``SpeculativeMethod | str | None`` and its
``_validate_method`` (l.1623-1634) raises ``ValueError("Unknown speculative method ...")`` for a value neither in the
Literal nor registered through ``register_speculative_method`` (which nothing in-tree calls; a plugin may).
``speculative_methods.json`` (``dev/gen_vllm_speculative_methods.py``) lists the values per release read
(0.18.0-0.34.0): ``medusa`` and ``mlp_speculator`` end with 0.32.0, ``custom_class`` with 0.33.0, ``dspark`` arrives
in 0.25.0, ``kimi_k3_mtp`` in 0.27.0.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from pdd_operator.vllm.flag_choices import ChoiceRefusal, ChoiceTable, refusal
from pdd_operator.vllm.versions import Version, parse_version

_TABLE = Path(__file__).with_name("speculative_methods.json")


@cache
def method_table() -> ChoiceTable:
    """The ``method`` values of the releases read as a :class:`~pdd_operator.vllm.flag_choices.ChoiceTable` (each
    value from the first to the last release read that lists it; none leaves a gap, a unit test checks it)."""
    data = json.loads(_TABLE.read_text())
    return ChoiceTable(flag="--speculative-config method", literal="SpeculativeMethod",
                       read=tuple(parse_version(v) for v in data["releases"]),  # type: ignore[misc]
                       values={n: (parse_version(f[0]), parse_version(f[-1]))  # type: ignore[misc]
                               for n, f in data["method"].items()})


@cache
def custom_methods_since() -> Version:
    """The first release read whose ``method`` also admits a registered custom name (0.34.0)."""
    return parse_version(json.loads(_TABLE.read_text())["admits_str"][0])  # type: ignore[return-value]


def method_refusal(method: str, version: Version) -> ChoiceRefusal | None:
    """Whether vLLM ``version`` refuses speculative ``method``: ``None`` where it accepts it (or before 0.18.0),
    else a refusal whose verdict is ``"error"`` or ``"warning"`` (:func:`~pdd_operator.vllm.flag_choices.refusal`);
    from 0.34.0 a value no release read lists is a warning only (a plugin may register it). Pure."""
    found = refusal(method_table(), method, version)
    if found is not None and found.verdict == "error" and version[:3] >= custom_methods_since() \
            and method not in method_table().values:
        return ChoiceRefusal(found.flag, found.value, "warning", found.why + "; a plugin may register it")
    return found
