"""Read a vLLM engine's settings from its command line and environment.

This is the one place that understands ``vllm serve`` arguments; both PDDeployments (through the
arguments the operator renders) and foreign manifests (the arguments people wrote) go through it, so
the rules always judge what the engine will actually be started with.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable
from dataclasses import replace

from pdd_operator.vllm.entrypoint import SERVE, leading_entry, leading_serve
from pdd_operator.vllm.expansion import (
    SERVICE_LINKS_KEY,
    ContainerEnv,
    kube_expand,
    kube_expand_script,
    runs_shell,
    shell_operands,
)
from pdd_operator.vllm.flags import parse_flags as parse_flags  # re-exported: the flags are read through this module
from pdd_operator.vllm.image_env import image_env
from pdd_operator.vllm.script import IN_PROCESS_ENGINE, Launch, entry_point, frontend, launcher_engine
from pdd_operator.vllm.script import launches as script_launches

#: Sentinel values of ``VLLM_NIXL_SIDE_CHANNEL_HOST`` set from the downward API.
POD_IP = "fieldRef:status.podIP"
HOST_IP = "fieldRef:status.hostIP"

def command_launches(
    command: Iterable[str] | None, args: Iterable[str] | None, *, image_runs_vllm: bool = False,
    extra: str | None = None, env: ContainerEnv | None = None,
) -> list[Launch]:
    """The vLLM engine processes a container's ``command`` and ``args`` start, one :class:`Launch` each.

    A plain command starts at most one (its argv from the vLLM entry point on: ``vllm serve ...`` or
    ``python -m vllm.entrypoints.openai.api_server ...``); an ``sh -c "..."`` script may start several, each with
    the variables it sets for that process (:func:`pdd_operator.vllm.script.launches`). ``image_runs_vllm``: the
    image's own entrypoint is ``vllm serve`` (vLLM's images), so a container with ``args`` only runs it; ``args``
    that start with an entry point of their own (``vllm serve ...``) are read from there, not as ``vllm serve vllm
    serve ...`` (:func:`pdd_operator.vllm.entrypoint.leading_entry`; that argv is refused, and reported, elsewhere),
    and ``args`` that start with a bare ``serve`` as ``vllm serve ...`` (:func:`~pdd_operator.vllm.entrypoint.
    leading_serve`: written for an ENTRYPOINT of ``vllm`` alone; the ``entrypoint-repeated`` rule judges the image's).
    ``extra``: more arguments from the environment (``VLLM_ADDITIONAL_ARGS``, as KServe and llm-d presets pass
    them), appended. ``env``: the container's environment; when given, ``$(VAR)`` in command and args is expanded
    as the kubelet does and the script's ``$VAR``/``${VAR}`` from it (:mod:`pdd_operator.vllm.expansion`).
    """
    command, args = [str(x) for x in command or []], [str(x) for x in args or []]
    if env is not None:
        # In an sh -c script the kubelet's expansion is read again by the shell: an unknown value stays a variable.
        expand = ((lambda x: kube_expand_script(x, env)) if runs_shell([*command, *args])
                  else (lambda x: kube_expand(x, env.kube)))
        command, args = [expand(x) for x in command], [expand(x) for x in args]
    if not command and image_runs_vllm and (args or extra):
        # args that start an engine themselves repeat the entrypoint, which vLLM's parser refuses
        # (:mod:`pdd_operator.vllm.entrypoint`, rule entrypoint-repeated); the engine is read as they write it.
        command = [] if leading_entry(args) else list(SERVE[:1]) if leading_serve(args) else list(SERVE)
    argv = [str(x) for x in [*(command or []), *(args or [])]]
    if len(argv) >= 3 and argv[0].rsplit("/", 1)[-1] in ("sh", "bash") and argv[1] in ("-c", "-lc", "-ec"):
        argv = [*argv[:2], *shell_operands(argv)]
        if len(argv) < 3:
            return []
        script, rest = argv[2], argv[3:]
        if rest and re.search(r"\$(\{)?[@*1-9]", script):  # sh -c SCRIPT NAME ARGS: ARGS are $1 ... ($@)
            return script_launches(script + (f" {extra}" if extra else ""), env, rest[1:])
        # Leniently, words after the script that it does not read are taken as more of it (as written by hand).
        return script_launches(" ".join(argv[2:]) + (f" {extra}" if extra else ""), env)
    if extra:
        try:
            argv += shlex.split(extra)
        except ValueError:
            argv += extra.split()
    entry = entry_point(argv)
    if not entry and (own := launcher_engine(argv)) is not None:  # a program of its own given vLLM's engine options
        return [Launch(tuple(own[1]), wrapper=(IN_PROCESS_ENGINE, *argv[:own[0]]))]
    return [Launch(tuple(entry), frontend=frontend(argv))] if entry else []


def split_command(
    command: Iterable[str] | None, args: Iterable[str] | None, *, image_runs_vllm: bool = False,
    extra: str | None = None, env: ContainerEnv | None = None,
) -> list[str]:
    """The argv of the first engine a container starts (:func:`command_launches`), or ``[]`` when it starts none."""
    found = command_launches(command, args, image_runs_vllm=image_runs_vllm, extra=extra, env=env)
    return list(found[0].argv) if found else []


def engine_arg_words(key: str, value) -> list[str]:
    """The ``vllm serve`` words of one ``EngineArgs`` field set in Python (``LLM(**kwargs)``, ``AsyncEngineArgs``,
    Ray Serve's ``engine_kwargs``): ``--key-with-dashes value``; ``True`` the bare flag, ``False`` its ``--no-`` form
    (vLLM's boolean engine flags are ``BooleanOptionalAction``s, vllm/engine/arg_utils.py), a mapping as JSON (the
    form vLLM's parser takes for its config objects), a list as its items (mappings among them as JSON); ``None``
    nothing (vLLM's default). ``key`` is the field name with underscores; never raises."""
    flag = "--" + key.replace("_", "-")
    if value is None:
        return []
    if value is True:
        return [flag]
    if value is False:
        return ["--no-" + key.replace("_", "-")]
    if isinstance(value, dict):
        return [flag, json.dumps(value)]
    if isinstance(value, list):
        return [flag, *(json.dumps(v) if isinstance(v, dict) else str(v) for v in value)]
    return [flag, str(value)]


def json_flag(flags: dict[str, str | bool], name: str) -> dict | None:
    """The JSON object given to a flag such as ``--kv-transfer-config``; ``None`` if absent.

    Raises ``ValueError`` naming the flag when the value is not a JSON object (saying so where it is Python's repr of
    a mapping, as a ``--config`` file's YAML mapping reaches vLLM up to 0.14.1: :mod:`pdd_operator.compat.config_files`).
    """
    raw = flags.get(name)
    if raw is None or isinstance(raw, bool):
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        repr_of_dict = " (single-quoted: Python's str() of a mapping, which vLLM up to 0.14.1 makes of a YAML mapping " \
            "in a --config file; write it there as a JSON string)" if str(raw).lstrip().startswith("{'") else ""
        raise ValueError(f"{name} is not valid JSON: {exc.msg}{repr_of_dict}") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object")
    return value


def int_flag(flags: dict[str, str | bool], name: str, default: int | None) -> int | None:
    """An integer flag's value; ``default`` when absent; ``None`` when not a literal integer."""
    raw = flags.get(name)
    if raw is None:
        return default
    try:
        return int(str(raw))
    except ValueError:
        return None


def container_env(container: dict) -> ContainerEnv:
    """A container's environment (``env`` and ``envFrom``), its values expanded as the kubelet does;
    downward-API pod/host IPs become the :data:`POD_IP` / :data:`HOST_IP` sentinels; the image's own ``ENV`` as
    known (:func:`~pdd_operator.vllm.image_env.image_env`); the GPUs it is handed (``nvidia.com/gpu``); the kubelet's
    service variables it gets where :func:`pdd_operator.compat.service_links.with_service_links` marked them."""
    env = ContainerEnv.of(container.get("env"), container.get("envFrom"), _field_sentinel)
    links = container.get(SERVICE_LINKS_KEY)
    return replace(env, image=image_env(str(container.get("image") or "")), gpus=_gpu_limit(container),
                   service_links=frozenset(map(str, links)) if isinstance(links, list) else None)


def _gpu_limit(container: dict) -> int | None:
    """The container's ``nvidia.com/gpu`` limit (or request, which must equal it for extended resources), ``None``
    where it sets none or not as a whole number."""
    res = container.get("resources") if isinstance(container.get("resources"), dict) else {}
    for key in ("limits", "requests"):
        part = res.get(key) if isinstance(res.get(key), dict) else {}
        raw = part.get("nvidia.com/gpu")
        if raw is not None:
            try:
                return int(str(raw))
            except ValueError:
                return None
    return None


def container_launches(container: dict, *, image_runs_vllm: bool) -> list[Launch]:
    """The vLLM engine processes a container starts (:func:`command_launches`), after the kubelet's and the
    shell's variable expansion.

    ``VLLM_ADDITIONAL_ARGS`` is not appended: vLLM never reads that variable (in no file of the 0.9.0, 0.32.0 or
    0.34.0 package); only launchers whose own script expands it do, such as KServe's LLMInferenceService templates
    (``exec vllm serve ... ${VLLM_ADDITIONAL_ARGS} $@``, kserve config/llmisvcconfig), whose engines without a
    ``command`` are judged by :mod:`pdd_operator.compat.templated`. A container's own ``sh -c`` script that names it
    gets its value through the script's expansion; a plain ``vllm serve`` command (or vLLM's image entrypoint)
    ignores it."""
    env = container_env(container)
    return command_launches(container.get("command"), container.get("args"), image_runs_vllm=image_runs_vllm,
                            env=env)


def container_argv(container: dict, *, image_runs_vllm: bool) -> list[str]:
    """The argv of the first vLLM engine a container starts (:func:`container_launches`); ``[]`` for none."""
    found = container_launches(container, image_runs_vllm=image_runs_vllm)
    return list(found[0].argv) if found else []


def _field_sentinel(path: str) -> str | None:
    """The value kept for a downward-API ``fieldRef``: the pod and host IP sentinels, which the side-channel host rules
    know (:data:`POD_IP`, :data:`HOST_IP`); ``None`` (a value not in these files, :func:`~pdd_operator.vllm.expansion.
    unknown` wherever it is read) for every other field (``metadata.name``, ``metadata.annotations['model']``,
    ``status.podIPs``...): the kubelet fills it per pod, so no reader may take its path for a value (a model name, a
    device list, a port)."""
    return {"status.podIP": POD_IP, "status.hostIP": HOST_IP}.get(path)


def env_values(env: Iterable[dict] | None) -> dict[str, str]:
    """Literal values of a container's ``env`` list (``$(VAR)`` expanded from the variables before it, as the
    kubelet does); downward-API pod/host IPs become sentinels; ``valueFrom`` ConfigMaps/Secrets are left out."""
    return dict(ContainerEnv.of(env, None, _field_sentinel).values)
