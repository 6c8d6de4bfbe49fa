"""``VLLM_*`` variables an engine's vLLM release does not read (a misspelt or retired name has no effect) or refuses
at startup."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.env_vars import PREFIX, closest, last_mentioned, refuses, refusing_releases, unread
from pdd_operator.vllm.expansion import unknown_names
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


def _spans(releases: tuple) -> str:
    """``((0, 34, 0),)`` -> ``"0.34.0"``; the first and last release of a longer run."""
    return fmt(releases[0]) if len(releases) == 1 else f"{fmt(releases[0])}-{fmt(releases[-1])}"


@rule(
    id="vllm-env-refused", family="engine-env", severity="error",
    fields=("spec.engine.env", "spec.prefill.env", "spec.decode.env"),
    source=("validate_environ, called on every engine from EngineArgs.create_engine_config (0.34.0 "
            "vllm/engine/arg_utils.py l.2294), raises ValueError before the engine is built: for a key of "
            "envs.removed_environment_variables (0.34.0 vllm/envs.py l.654-660: VLLM_MARLIN_INPUT_DTYPE, 'has been "
            "removed') and for VLLM_USE_V2_MODEL_RUNNER set to anything but 1 ('Model Runner V1 has been removed', "
            "0.34.0 vllm/platforms/interface.py l.1481-1493); 0.17.0-0.33.0's validate_environ (vllm/envs.py, from "
            "0.31.0 vllm/platforms/interface.py) only logs unknown names; table: pdd_operator/vllm/env_vars.json "
            "'refused', dev/gen_vllm_env_vars.py"),
    example="env VLLM_USE_V2_MODEL_RUNNER=0 on vllm/vllm-openai:v0.34.0",
)
def check_refused_env(pair: PDPair) -> list[Violation]:
    """No ``VLLM_*`` variable set on an engine is one its vLLM release refuses at startup.

    An error where the engine's release (or both releases read around it) refuses the value; a warning, naming the
    releases that refuse it, where the version is unknown, past the newest read, or between a release that refuses
    it and one that does not, or where the value is not in the files for a variable only some values stop."""
    out: list[Violation] = []
    for r in pair.roles:
        for name in sorted(n for n in r.env if n.startswith(PREFIX)):
            raw = r.env[name]
            value = None if unknown_names(raw) else raw
            releases = refusing_releases(name, value) or refusing_releases(name, "\0")
            verdict = refuses(name, value, r.version)
            if verdict is False or not releases:
                continue
            what = f"{name}={value}" if value is not None else f"{name} (its value is not in these files)"
            stop = (f"vLLM {_spans(releases)} refuses {what} at startup: validate_environ raises ValueError "
                    + ("('Model Runner V1 has been removed'" if name == "VLLM_USE_V2_MODEL_RUNNER" else
                       f"('{name} has been removed'") + ") before the engine is built")
            fix = fix_for(pair, f"Remove {name} from spec.{r.role}.env (or spec.engine.env).",
                          f"Remove {name} from the {r.role} container's env.")
            if verdict:
                out.append((f"{r.role}: {stop}; this engine runs vLLM {fmt(r.version)}, so it never starts.", fix))
                continue
            if r.version is None:
                why = "this engine's vLLM version is unknown"
            elif value is None:
                why = "whether this value is refused is not in these files"
            else:
                why = f"this engine runs vLLM {fmt(r.version)}, which lies between or after the releases read"
            out.append((f"{r.role}: {stop}. Not checked: {why}.", fix, "warning"))
    return out
