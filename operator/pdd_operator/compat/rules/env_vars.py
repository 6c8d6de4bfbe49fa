"""``VLLM_*`` variables an engine's vLLM release does not read: a misspelt or retired name has no effect."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.env_vars import PREFIX, closest, last_mentioned, unread
from pdd_operator.vllm.versions import fmt, is_vllm_image

#: First release whose engine logs "Unknown vLLM environment variable detected" for a VLLM_* variable outside
#: envs.environment_variables (envs.validate_environ, 0.17.0 vllm/envs.py l.1704; absent in 0.16.0).
_VALIDATED_SINCE = (0, 17, 0)


def _vllm_alone(r: RoleConfig) -> bool:
    """The engine is vLLM's own server, so only vLLM's code reads its ``VLLM_*`` variables: launched by vLLM itself
    (not through Dynamo's ``dynamo.vllm`` or another wrapper whose own code may read such names) from one of vLLM's
    images or a bare host (a script's ``vllm serve``)."""
    return not r.launcher and (not r.image or is_vllm_image(r.image))


@rule(
    id="vllm-env-unread", family="engine-env", severity="warning",
    fields=("spec.engine.env", "spec.prefill.env", "spec.decode.env"),
    source=("the VLLM_* words of each release's vllm/ package, read in the sdists 0.9.0-0.34.0 "
            "(pdd_operator/vllm/env_vars.json, dev/gen_vllm_env_vars.py): a name none of them mentions is read by no "
            "code of that release; from 0.17.0 envs.validate_environ logs 'Unknown vLLM environment variable detected' "
            "for one outside envs.environment_variables (0.17.0 vllm/envs.py l.1704-1710, called from "
            "EngineArgs.create_engine_config, arg_utils.py l.1459; 0.34.0 vllm/platforms/interface.py l.1494-1502), an "
            "error only with --fail-on-environ-validation"),
    example="env VLLM_NIXL_SIZE_CHANNEL_HOST (for VLLM_NIXL_SIDE_CHANNEL_HOST) on vllm/vllm-openai:v0.10.0",
)
def check_unread_env(pair: PDPair) -> list[Violation]:
    """Every ``VLLM_*`` variable set on a vLLM engine is one its release reads.

    A misspelt or retired name is ignored: the setting it was meant for keeps vLLM's default.

    Judged on engines vLLM starts itself from its own images or a bare host; per release on the table of the
    releases read (a version between two: unread by both; unknown: by every one), silent outside them."""
    out: list[Violation] = []
    for r in pair.roles:
        if not _vllm_alone(r):
            continue
        for name in sorted(n for n in r.env if n.startswith(PREFIX)):
            if not unread(name, r.version):
                continue
            release = f"vLLM {fmt(r.version)}" if r.version is not None else "no vLLM release from 0.9.0 to 0.34.0"
            last = last_mentioned(name)
            why = (f"{release} reads no variable {name} (its source never names it)" if r.version is not None else
                   f"{name} is named by {release} (this engine's version is unknown)")
            if last is not None:
                why += f"; vLLM last read it in {fmt(last)}"
            logged = r.version is not None and r.version >= _VALIDATED_SINCE
            near = closest(name, r.version)
            out.append((
                f"{r.role}: {why}, so it has no effect{' (the engine logs it as an unknown vLLM variable)' if logged else ''}"
                f"{f'; did you mean {near}?' if near else '.'}",
                fix_for(pair, f"Correct or remove {name} in spec.{r.role}.env (or spec.engine.env).",
                        f"Correct or remove {name} in the {r.role} container's env"
                        f"{f' ({near})' if near else ''}."),
                "warning"))
    return out
