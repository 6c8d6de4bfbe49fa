"""``--speculative-config`` keys a vLLM release no longer accepts.

``SpeculativeConfig`` is one of vLLM's config classes (``@config`` in vllm/config/utils.py: a pydantic dataclass with
``extra="forbid"``), built from the flag's JSON by ``EngineArgs.create_speculative_config``
(``SpeculativeConfig(**self.speculative_config)``, vllm/engine/arg_utils.py line 2172 of the 0.34.0 sdist) while the
engine config is created, before the engine starts: a key the class no longer has fails the startup (pydantic
"Unexpected keyword argument").
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.versions import Version, fmt

#: ``SpeculativeConfig`` fields vLLM 0.34.0 removed (vllm/config/speculative.py: ``disable_padded_drafter_batch`` line
#: 468 and ``use_heterogeneous_vocab`` line 496 of the 0.33.0 sdist; neither name is anywhere in 0.34.0's ``vllm/``).
REMOVED_IN_0_34: tuple[str, ...] = ("disable_padded_drafter_batch", "use_heterogeneous_vocab")
#: The first release that refuses :data:`REMOVED_IN_0_34`.
REMOVED_SPECULATIVE_SINCE: Version = (0, 34, 0)


@rule(
    id="speculative-config-removed-field", family="engine-args", severity="error",
    fields=("spec.speculative",),
    source=("vllm/config/speculative.py 0.34.0 (disable_padded_drafter_batch, use_heterogeneous_vocab removed; "
            "0.33.0 lines 468, 496) and vllm/config/utils.py config() (pydantic, extra='forbid'); "
            "EngineArgs.create_speculative_config (vllm/engine/arg_utils.py 0.34.0 line 2172)"),
    example='--speculative-config {"method":"eagle3","model":"...","num_speculative_tokens":3,'
    '"disable_padded_drafter_batch":true} on v0.34.0',
    without_connector=True, one_engine=True,
)
def check_removed_speculative_fields(pair: PDPair) -> list[Violation]:
    """No engine's --speculative-config holds a key its vLLM release removed (0.34.0: two EAGLE-era keys).

    An error from 0.34.0, a warning where the version is unknown; earlier releases accept the keys. Not
    version-bounded in the registry, like ``kv-transfer-config-removed-field``: with an unknown version the keys are
    a warning rather than holding the whole pair unchecked."""
    out: list[Violation] = []
    for r in pair.roles:
        written = {str(k).replace("-", "_") for k in r.speculative} if isinstance(r.speculative, dict) else set()
        keys = [k for k in REMOVED_IN_0_34 if k in written]  # vLLM reads dashes as underscores (arg_utils.py)
        if not keys or (r.version is not None and r.version < REMOVED_SPECULATIVE_SINCE):
            continue
        said = ", ".join(keys)
        fix = (f"Remove {said} from the {r.role} engine's --speculative-config (vLLM 0.34.0 dropped them), or run a "
               "release before 0.34.0.")
        if r.version is None:
            out.append((f"{r.role}: --speculative-config sets {said}, which SpeculativeConfig dropped in 0.34.0: "
                        "vLLM 0.34.0 and later refuse it at startup (pydantic 'Unexpected keyword argument'), earlier "
                        "releases accept it; this engine's vLLM version is unknown.", fix, "warning"))
        else:
            out.append((f"{r.role}: --speculative-config sets {said}, which vLLM {fmt(r.version)} no longer accepts: "
                        "SpeculativeConfig dropped it in 0.34.0 and vLLM's config classes refuse unknown keys "
                        "(pydantic 'Unexpected keyword argument') when the engine config is created, so the engine "
                        "never starts.", fix))
    return out
