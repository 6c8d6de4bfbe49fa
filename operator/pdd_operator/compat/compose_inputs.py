"""The vLLM engines of Docker Compose files, read as the checker's engines (issue 9).

P/D bug reports and tutorials often publish Compose files: one ``docker-compose.yml`` with a prefill and a decode
service, or one file per host (bhajian/disaggregated-serving ``04-disaggregated-vllm/docker/node-a.yaml`` /
``node-b.yaml``). Each service of a Compose document becomes one container of a synthetic Pod, in the shape that
:func:`pdd_operator.compat.manifests.scan` reads, so that the pairing and every rule read Compose engines as they read
Kubernetes ones, and findings name ``<file> (Compose) services.<name>.<key>``.

How a service maps (the Compose specification, compose-spec/compose-spec ``05-services.md``, and Docker's
``docker run`` reference for what each key does to the container):

* ``entrypoint`` -> the container's ``command`` and ``command`` -> its ``args``: Compose's ``command`` overrides the
  image's ``CMD`` (arguments to the image's ``ENTRYPOINT``: ``vllm serve`` in vllm/vllm-openai), ``entrypoint``
  overrides ``ENTRYPOINT`` and clears the image's ``CMD``, as Kubernetes' ``command``/``args`` do. A string form is
  split into words as Compose does (shell-like quoting, no shell: ``shlex.split``).
* ``environment`` (map or ``NAME=value`` list; a bare ``NAME`` takes its value from the shell running compose: not
  in these files) -> ``env``; ``env_file`` -> an ``envFrom`` source not in these files (it may set any variable).
* GPUs: ``deploy.resources.reservations.devices`` entries with ``capabilities: [gpu]`` (``count``: an integer;
  ``device_ids``: their number), ``gpus: N`` and ``runtime: nvidia`` with a literal ``NVIDIA_VISIBLE_DEVICES`` list
  -> ``nvidia.com/gpu: N``; ``all`` (and ``runtime: nvidia`` alone) gives every GPU of the host, a number not in the
  file: no count is written (rules needing it are not checked). ``CUDA_VISIBLE_DEVICES`` stays in the environment,
  where the rules read it as in a pod.
* ``network_mode: host`` -> ``hostNetwork`` (ports shared on the host, like hostNetwork pods); otherwise each
  service has its own network namespace on the project's bridge network, like a pod of its own; ``ports``
  ``"HOST:CONTAINER"`` -> ``hostPort``.
* ``ipc: host`` -> ``hostIPC``; ``cap_add`` -> ``securityContext.capabilities.add``; ``privileged``; ``user``
  (a numeric non-zero uid -> ``runAsUser``); ``devices`` ``/dev/infiniband`` -> an RDMA device
  (:data:`RDMA_RESOURCE`); ``ulimits.memlock`` -> the engine's memlock limit (Docker sets it with setrlimit before
  the process starts, :attr:`~pdd_operator.compat.pair.RoleConfig.memlock_ulimit`).
* The hosts: every service of one Compose document runs on one host (``docker compose up`` on that machine);
  several documents given together (one per host, as multi-node tutorials publish them) are one topology on as many
  hosts, paired with each other (one owner per project ``name``, else per file).
* ``extends: {service: NAME}`` (same file) takes that service's keys first; ``extends: {file: other.yaml, service:
  NAME}`` takes them from ``other.yaml`` (relative to this file) when that file is given, else the service is "not
  checked" with the file's name.
* ``include:`` (a path, or ``path:`` one or a list; Compose specification ``14-include.md``) adds the services of the
  files it names (relative to this file, their own ``include`` followed; a service defined here is kept); a file not
  given is "not checked" with its name.
* ``env_file``: a file given next to the Compose file is read (``NAME=value`` lines, :func:`parse_env_file`) for the
  names ``environment`` does not set; one not given is an ``envFrom`` source not in these files (it may set any
  variable), skipped where marked ``required: false``.

"Given" is a file on disk where the Compose file names it (the CLI reads them, ``pdd_operator.cli._beside``); the
webhook and a file from standard input have none.

Interpolation (Compose specification ``12-interpolation.md``): ``$VAR`` and ``${VAR}`` anywhere in a value,
``${VAR:-default}`` / ``${VAR-default}``, ``${VAR:?err}``, ``${VAR:+alt}``, ``$$`` a literal ``$``. A variable the
project's ``.env`` file (next to the Compose file, Compose v2's project directory) sets takes its value there; one it
does not set takes its default, and without a default (or without an ``.env`` file given) it takes its value from the
shell, which is not in these files: it is unknown, written to the synthetic container as the kubelet reference
``$(VAR)`` to a variable of unknown value (an env entry ``valueFrom`` a ConfigMap not in the files), so that the rules
which need it say "not checked" and never judge a guess. (A variable the shell sets wins over ``.env``; a shell that
sets one the ``.env`` file sets is not seen here.)
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from pdd_operator.compat.image_builds import IMAGE_ENV_KEY, compose_build_of, service_from_build
from pdd_operator.compat.manifests import Engine, Unreadable, is_compose_file, pd_marked, scan
from pdd_operator.compat.rules.base import COMPOSE_KIND
from pdd_operator.vllm.expansion import COMPOSE_OUTSIDE

#: The resource name a service's ``/dev/infiniband`` device becomes (an RDMA device, as the shared-device plugin's).
RDMA_RESOURCE = "rdma/compose-infiniband"

#: The ConfigMap whose keys stand for the variables a Compose file interpolates from outside it (an ``.env`` file,
#: the shell): not among the files, so every value read from it is unknown.
_OUTSIDE = COMPOSE_OUTSIDE

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_BRACED = re.compile(r"\$\{(" + _NAME + r")(?:(:?[-?+])((?:[^{}]|\{[^{}]*\})*))?\}")
_BARE = re.compile(r"\$(" + _NAME + ")")
_VLLM = re.compile(r"vllm\s+serve|vllm\.entrypoints\.openai\.api_server|dynamo\.vllm|\bvllm\b", re.I)


def interpolate(text: str, unknown: set[str], values: Mapping[str, str] | None = None) -> str:
    """``text`` (a Compose value) after Compose's interpolation, written for the kubelet's expansion: a variable of
    ``values`` (the project's ``.env`` file, :func:`parse_env_file`) takes its value, as ``docker compose`` resolves
    it when the shell does not set it; for one not there a default is substituted (``${VAR:-d}``, ``${VAR-d}``),
    ``$$`` stays ``$$`` (the kubelet's escape for a literal ``$``), and a variable whose value is not in these files
    becomes ``$(VAR)`` and its name is added to ``unknown``; any other ``$`` is kept. With ``values``:
    ``${VAR:-d}`` takes ``d`` for an empty value, ``${VAR:+alt}``/``${VAR+alt}`` take ``alt`` for a set one (empty
    for ``:+`` and an empty value), ``${VAR:?err}`` the value (Compose specification ``12-interpolation.md``)."""
    values = values or {}
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$$")
            i += 2
            continue
        braced = _BRACED.match(text, i)
        bare = None if braced else _BARE.match(text, i)
        if braced:
            name, op, arg = braced.group(1), braced.group(2), braced.group(3)
            value = values.get(name)
            if value is not None and op in (None, "-", "?", ":?") or value and op == ":-":
                out.append(_escaped(value))
            elif op in (":-", "-"):
                out.append(interpolate(arg or "", unknown, values))
            elif value is not None and op in (":+", "+"):
                out.append(interpolate(arg or "", unknown, values) if value or op == "+" else "")
            else:
                unknown.add(name)
                out.append(f"$({name})")
            i = braced.end()
        elif bare:
            if (value := values.get(bare.group(1))) is not None:
                out.append(_escaped(value))
            else:
                unknown.add(bare.group(1))
                out.append(f"$({bare.group(1)})")
            i = bare.end()
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _escaped(value: str) -> str:
    """A value substituted by Compose, written so that the kubelet's expansion keeps it as it is (``$`` -> ``$$``)."""
    return value.replace("$", "$$")


def parse_env_file(text: str) -> dict[str, str]:
    """The variables of a Compose ``.env`` / ``env_file`` file (``NAME=value`` lines; ``#`` comments and blank lines
    skipped; an ``export`` prefix dropped; a value in single quotes literal, in double quotes with ``\n``/``\"``
    escapes, unquoted up to a `` #`` comment; a line without ``=`` sets nothing), as Compose v2 reads it
    (docs.docker.com compose/environment-variables/variable-interpolation, ".env file syntax")."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        name, eq, value = line.partition("=")
        name = name.strip()
        if not eq or not re.fullmatch(_NAME, name):
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1]
        elif len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1].replace("\\n", "\n").replace('\\"', '"')
        else:
            value = re.split(r"\s+#", value, maxsplit=1)[0].strip()
        out[name] = value
    return out


def _words(value: Any, unknown: set[str], values: Mapping[str, str] | None = None) -> list[str]:
    """A ``command`` / ``entrypoint`` as words: a list as it is, a string split as Compose splits it."""
    if value is None:
        return []
    if isinstance(value, list):
        return [interpolate(str(x), unknown, values) for x in value]
    try:
        words = shlex.split(str(value))
    except ValueError:
        words = str(value).split()
    return [interpolate(w, unknown, values) for w in words]


#: Reads a file named relative to the Compose file (``include``, ``extends.file``, ``env_file``, ``.env``): its text,
#: or ``None`` where it is not given (not on disk next to the file).
Reader = Callable[[str], "str | None"]


def _env(service: dict, unknown: set[str], values: Mapping[str, str] | None = None,
         read: Reader | None = None) -> tuple[list[dict], list[dict]]:
    """The service's ``environment`` as a Kubernetes ``env`` list (values interpolated with ``values``), and its
    ``env_file`` files: read (``read``) into ``env`` for the names ``environment`` does not set (it wins, Compose
    specification ``05-services.md`` env_file), or, where a file is not given, an ``envFrom`` source not in these files
    named ``env_file <path>`` (it may set any variable); one marked ``required: false`` and not given is skipped, as
    Compose skips it."""
    raw = service.get("environment")
    pairs: list[tuple[str, str | None]] = []
    if isinstance(raw, dict):
        pairs = [(str(k), None if v is None else str(v).lower() if isinstance(v, bool) else str(v))
                 for k, v in raw.items()]
    elif isinstance(raw, list):
        for item in raw:
            name, eq, value = str(item).partition("=")
            pairs.append((name, value if eq else None))
    env: list[dict] = []
    for name, value in pairs:
        if value is None:  # ``NAME`` alone: the value of the shell that runs compose
            env.append({"name": name, "valueFrom": {"configMapKeyRef": {"name": _OUTSIDE, "key": name}}})
            continue
        names: set[str] = set()
        written = interpolate(value, names, values)
        if names:  # its value is read from outside the files
            unknown |= names
            key = min(names)  # the interpolated variable, for messages (expansion.value_from_source)
            env.append({"name": name, "valueFrom": {"configMapKeyRef": {"name": _OUTSIDE, "key": key}}})
        else:
            env.append({"name": name, "value": written.replace("$$", "$").replace("$", "$$")})
    files = service.get("env_file")
    files = [files] if isinstance(files, (str, dict)) else files or []
    env_from = []
    for f in files:
        name = str(f.get("path") if isinstance(f, dict) else f)
        text = read(name) if read is not None else None
        if text is None:
            if not (isinstance(f, dict) and f.get("required") is False):
                env_from.append({"configMapRef": {"name": f"env_file {name}"}})
            continue
        defined = {e["name"] for e in env}
        env += [{"name": k, "value": v.replace("$", "$$")} for k, v in parse_env_file(text).items() if k not in defined]
    image_env = service.get(IMAGE_ENV_KEY)  # the built image's ENV: below environment and env_file
    if isinstance(image_env, dict):
        defined = {e["name"] for e in env}
        env += [{"name": str(k), "value": str(v).replace("$", "$$")} for k, v in image_env.items() if k not in defined]
    return env, env_from


def _at(node: Any, *keys: str) -> Any:
    """``node[k1][k2]...``, ``None`` where a level is missing or no mapping (a file of any shape never crashes)."""
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _gpus(service: dict) -> int | None:
    """GPUs the service reserves, ``None`` for all of the host's or none written."""
    count = 0
    devices = _at(service, "deploy", "resources", "reservations", "devices") or []
    for d in devices if isinstance(devices, list) else []:
        if not isinstance(d, dict) or "gpu" not in (d.get("capabilities") or []) and d.get("driver") != "nvidia":
            continue
        if isinstance(d.get("device_ids"), list):
            count += len(d["device_ids"])
        elif isinstance(d.get("count"), int):
            count += d["count"]
        else:  # ``count: all`` or no count (the spec's default: all)
            return None
    gpus = service.get("gpus")
    if isinstance(gpus, str) and gpus.isdigit():
        gpus = int(gpus)
    if isinstance(gpus, int) and not isinstance(gpus, bool):
        count += gpus
    elif isinstance(gpus, list):
        for g in gpus:
            if isinstance(g, dict) and isinstance(g.get("device_ids"), list):
                count += len(g["device_ids"])
            elif isinstance(g, dict) and isinstance(g.get("count"), int):
                count += g["count"]
            else:
                return None
    elif gpus is not None:
        return None
    return count or None


def _runtime_gpus(service: dict, env: list[dict]) -> int | None:
    """The GPUs of a ``runtime: nvidia`` service without device requests: the entries of a literal
    ``NVIDIA_VISIBLE_DEVICES`` list in its environment (``0,1``, GPU UUIDs), which the NVIDIA container runtime
    mounts; ``None`` for ``all``, none written, another runtime, or a value not in the file."""
    if service.get("runtime") != "nvidia" or service.get("gpus") is not None or _at(
            service, "deploy", "resources", "reservations", "devices"):
        return None
    value = next((e.get("value") for e in env if e["name"] == "NVIDIA_VISIBLE_DEVICES"), None)
    if not value or value in ("all", "none", "void") or "$" in value:
        return None
    return len([x for x in value.split(",") if x.strip()])


def _host_devices(service: dict, env: list[dict]) -> tuple[bool, tuple[str, ...] | None]:
    """Whether the service is handed GPUs of its host by their host ordinals, and which in the order the container
    sees them: ``device_ids`` (of every GPU device request), a literal ``NVIDIA_VISIBLE_DEVICES`` list under ``runtime:
    nvidia``; ``None`` for all of them (``gpus: all``, ``count: all``, ``runtime: nvidia`` alone) or for a ``count``
    (Docker's pick is not in the file: :func:`~pdd_operator.compat.rules.parallelism._on_host` reads it as unknown)."""
    ids: list[str] = []
    requests = _at(service, "deploy", "resources", "reservations", "devices")
    gpus = service.get("gpus")
    for d in (requests if isinstance(requests, list) else []) + (gpus if isinstance(gpus, list) else []):
        if isinstance(d, dict) and isinstance(d.get("device_ids"), list):
            ids += [str(x) for x in d["device_ids"]]
        elif isinstance(d, dict) and ("gpu" in (d.get("capabilities") or []) or d.get("driver") == "nvidia"):
            return True, None
    if ids:
        return True, tuple(ids)
    if gpus is not None or requests:
        return True, None
    if service.get("runtime") == "nvidia":
        value = next((e.get("value") for e in env if e["name"] == "NVIDIA_VISIBLE_DEVICES"), None)
        listed = [x.strip() for x in value.split(",")] if value and "$" not in value else []
        return True, tuple(listed) if listed and all(x.isdigit() for x in listed) else None
    return False, None


def _memlock(service: dict) -> tuple[str, str] | None:
    """``ulimits.memlock`` as ``(soft, hard)`` (``-1``: ``unlimited``), ``None`` when not set."""
    value = _at(service, "ulimits", "memlock")
    if value is None:
        return None

    def text(v: Any) -> str:
        return "unlimited" if str(v) == "-1" else str(v)

    if isinstance(value, dict):
        return text(value.get("soft")), text(value.get("hard"))
    return text(value), text(value)


def _extended(name: str, services: dict, seen: tuple[str, ...] = (), read: Reader | None = None,
              depth: int = 0) -> dict | str:
    """The service ``name`` with the keys of the services it extends merged under its own, or why not read.

    ``extends: {file: other.yaml, service: base}`` reads ``other.yaml`` (relative to this file, through ``read``)
    and takes ``base`` from its services, resolving that service's own ``extends`` there (relative to that file);
    a file not given is named ("not checked")."""
    service = services[name]
    ext = service.get("extends")
    if ext is None:
        return service
    base = ext if isinstance(ext, str) else ext.get("service") if isinstance(ext, dict) else None
    if isinstance(ext, dict) and ext.get("file"):
        other = str(ext["file"])
        text = read(other) if read is not None and depth < _MAX_DEPTH else None
        docs = _yaml_docs(text) if text is not None else []
        theirs = docs[0].get("services") if docs and isinstance(docs[0].get("services"), dict) else None
        if theirs is None:
            return f"it extends service {base} of {other}, which is not in these files"
        if base not in theirs:
            return f"it extends service {base} of {other}, which that file does not define"
        parent = _extended(str(base), theirs, (), _relative(read, other), depth + 1)
    else:
        if base not in services or base in seen:
            return f"it extends service {base}, which this file does not define"
        parent = _extended(base, services, (*seen, name), read, depth)
    if isinstance(parent, str):
        return parent
    return {**parent, **{k: v for k, v in service.items() if k != "extends"}}


#: How deep ``include`` and ``extends.file`` are followed (a cycle between files ends here).
_MAX_DEPTH = 8


def _yaml_docs(text: str) -> list[dict]:
    """The mapping documents of a YAML text; ``[]`` for one that does not parse."""
    import yaml

    try:
        return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    except yaml.YAMLError:
        return []


def _relative(read: Reader | None, name: str) -> Reader | None:
    """A reader for the files named inside the file ``name`` (paths relative to its directory)."""
    if read is None:
        return None
    folder = name.rsplit("/", 1)[0] if "/" in name else ""
    return (lambda other: read(other if other.startswith("/") or not folder else f"{folder}/{other}"))


def _included(doc: dict, read: Reader | None, depth: int = 0) -> tuple[dict, list[str]]:
    """The services of a Compose document with those of the files its ``include`` names (Compose specification
    ``14-include.md``: each entry a path, a list of paths under ``path``, relative to this file; an included file's
    own ``include`` is followed; a service the document defines itself is kept), and the files not given."""
    services = dict(doc.get("services") or {}) if isinstance(doc.get("services"), dict) else {}
    missing: list[str] = []
    entries = doc.get("include") if isinstance(doc.get("include"), list) else []
    for entry in entries:
        paths = entry.get("path") if isinstance(entry, dict) else entry
        for name in [paths] if isinstance(paths, str) else paths if isinstance(paths, list) else []:
            name = str(name)
            text = read(name) if read is not None and depth < _MAX_DEPTH else None
            docs = _yaml_docs(text) if text is not None else []
            if not docs:
                missing.append(name)
                continue
            theirs, lost = _included(docs[0], _relative(read, name), depth + 1)
            missing += lost
            for key, service in theirs.items():
                services.setdefault(key, service)
    return services, missing


def _runs_vllm(service: dict) -> bool:
    text = " ".join(str(x) for x in _words(service.get("entrypoint"), set()) + _words(service.get("command"), set()))
    return bool(_VLLM.search(text)) or "vllm" in str(service.get("image") or "").lower()


#: The suffix of a variable Compose interpolates from outside the file whose name the service's own script also sets.
_FROM_OUTSIDE = "_from_compose_env"


def _env_names(service: dict) -> set[str]:
    """The names the service's ``environment`` sets (map or list form)."""
    raw = service.get("environment")
    if isinstance(raw, dict):
        return {str(k) for k in raw}
    return {str(x).partition("=")[0] for x in raw} if isinstance(raw, list) else set()


def _renamed(words: list[str], names: set[str]) -> list[str]:
    """``words`` with each ``$(NAME)`` of ``names`` (a Compose variable, replaced before the shell runs) written as
    ``$(NAME_from_compose_env)``: the script's own ``NAME=...`` must not stand in for the value Compose substituted
    (``export BS=16; vllm serve --block-size $BS`` without ``$$`` gets the ``.env`` file's ``BS``, or nothing), nor
    the service's ``environment`` (Compose interpolates from the shell and ``.env``, never from the service's own
    environment: ``environment: {MODEL: m}`` with ``command: --model ${MODEL}`` does not read ``m``)."""
    out = []
    for word in words:
        for name in names:
            word = word.replace(f"$({name})", f"$({name}{_FROM_OUTSIDE})")
        out.append(word)
    return out


def _pod(name: str, service: dict, host: int, owner: str, values: Mapping[str, str] | None = None,
         read: Reader | None = None) -> tuple[dict, str, tuple[bool, tuple[str, ...] | None]]:
    """The synthetic Pod of one service on the document's ``host``, the Compose key its engine flags are in, and the
    GPUs of the host it is handed (:func:`_host_devices`); ``values``: the ``.env`` file's variables, ``read``: the
    files next to the Compose file (``env_file``)."""
    unknown: set[str] = set()
    entrypoint = _words(service.get("entrypoint"), unknown, values)
    command = _words(service.get("command"), unknown, values)
    own = _env_names(service)
    assigned = {v for v in unknown if v in own or re.search(rf"(?<![\w$]){v}=", " ".join(entrypoint + command))}
    if assigned:  # the service or its script sets a name Compose already replaced: keep them apart (:func:`_renamed`)
        entrypoint, command = _renamed(entrypoint, assigned), _renamed(command, assigned)
        unknown = (unknown - assigned) | {f"{v}{_FROM_OUTSIDE}" for v in assigned}
    env, env_from = _env(service, unknown, values, read)
    container: dict[str, Any] = {"name": name, "image": interpolate(str(service.get("image") or ""), set(), values)}
    if entrypoint:
        container["command"] = entrypoint
    if command:
        container["args"] = command
    defined = {e["name"] for e in env}
    env += [{"name": v, "valueFrom": {"configMapKeyRef": {"name": _OUTSIDE, "key": v}}}
            for v in sorted(unknown) if v not in defined]
    if env:
        container["env"] = env
    if env_from:
        container["envFrom"] = env_from
    limits: dict[str, Any] = {}
    gpus = _gpus(service) or _runtime_gpus(service, env)
    if gpus:
        limits["nvidia.com/gpu"] = gpus
    devices = service.get("devices") or []
    if any("/dev/infiniband" in str(d) for d in devices if isinstance(devices, list)):
        limits[RDMA_RESOURCE] = 1
    if limits:
        container["resources"] = {"limits": limits}
    security: dict[str, Any] = {}
    if isinstance(service.get("cap_add"), list):
        security["capabilities"] = {"add": [str(c) for c in service["cap_add"]]}
    if service.get("privileged") is True:
        security["privileged"] = True
    user = str(service.get("user") or "").split(":", 1)[0]
    if user.isdigit():
        security["runAsUser"] = int(user)
    if security:
        container["securityContext"] = security
    ports = []
    for p in service.get("ports") if isinstance(service.get("ports"), list) else []:
        host_port, _, inner = str(p).rpartition(":") if not isinstance(p, dict) else (
            str(p.get("published") or ""), ":", str(p.get("target") or ""))
        inner = inner.split("/", 1)[0]
        if inner.isdigit():
            entry: dict[str, Any] = {"containerPort": int(inner)}
            if host_port.rsplit(":", 1)[-1].isdigit():
                entry["hostPort"] = int(host_port.rsplit(":", 1)[-1])
            ports.append(entry)
    if ports:
        container["ports"] = ports
    spec: dict[str, Any] = {"containers": [container], "nodeName": f"compose-host-{host}"}
    if service.get("network_mode") == "host":
        spec["hostNetwork"] = True
    if service.get("ipc") == "host":
        spec["hostIPC"] = True
    labels = service.get("labels")
    labels = dict(labels) if isinstance(labels, dict) else {}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "labels": {str(k): str(v) for k, v in labels.items()},
        "ownerReferences": [{"kind": "Compose", "name": owner}]}, "spec": spec}
    key = "entrypoint" if entrypoint and not command else "command"
    return pod, key, _host_devices(service, env)


def compose_engines(path: str, docs: list[dict], first_host: int = 0,
                    read: Reader | None = None) -> tuple[list[Engine], list[Unreadable]] | None:
    """The P/D engines of the Compose documents ``docs`` of the file ``path`` (each document one host, numbered from
    ``first_host``) and those it cannot read, as :func:`~pdd_operator.compat.manifests.scan` gives them, each
    ``where`` naming ``<path> (Compose) services.<service>.<key>``; ``None`` when no service of them runs vLLM with a
    KV transfer configuration or a P/D role (the documents keep today's answer).

    ``read`` gives the files the Compose file names, relative to its directory (``None``: none given): the project's
    ``.env`` (interpolation, :func:`interpolate`), ``include`` (:func:`_included`), ``extends.file``
    (:func:`_extended`) and ``env_file`` (:func:`_env`), as Compose v2 resolves them; a file named but not given is
    "not checked" with its name. A variable the shell running ``docker compose`` sets wins over ``.env``; the shell is
    not in these files."""
    engines: list[Engine] = []
    unreadable: list[Unreadable] = []
    found_vllm = False
    dotenv = read(".env") if read is not None else None
    values = parse_env_file(dotenv) if dotenv is not None else None
    for host, doc in enumerate(docs, start=first_host):
        if not is_compose_file(doc):
            continue
        services, missing = _included(doc, read)
        if not pd_marked(repr(services)) and not (missing and pd_marked(repr(doc))):
            if missing and not services:
                unreadable += [Unreadable(f"{path} (Compose) include", f"it includes {m}, which is not "
                                          "in these files") for m in missing]
                found_vllm = True
            continue
        unreadable += [Unreadable(f"{path} (Compose) include", f"it includes {m}, which is not in these "
                                  "files; its services were not read") for m in missing]
        owner = str(doc.get("name") or path)
        for name in services:
            service = _extended(name, services, read=read)
            where = f"{path} (Compose) services.{name}"
            if isinstance(service, dict) and read is not None and (built := compose_build_of(service, ".", read)):
                service = service_from_build(service, built, read)  # the image its Dockerfile here builds
            if isinstance(service, str):
                # A service built on a file not given may hold any engine of this P/D project: named, not guessed.
                if pd_marked(repr(services[name])) or "not in these files" in service:
                    unreadable.append(Unreadable(where, service))
                continue
            if not _runs_vllm(service):
                continue
            found_vllm = True
            pod, key, (handed, devices) = _pod(str(name), service, host, owner, values, read)
            got, cannot = scan(pod)
            memlock = _memlock(service)
            engines += [replace(e, where=_where(e.where, f"{where}.{key}"), container=where, flags_key=key, config=replace(
                e.config, workload_kind=COMPOSE_KIND, gpu_host=f"{path} host {host}" if handed else "",
                host_devices=devices, memlock_ulimit=memlock if memlock is not None else e.config.memlock_ulimit))
                for e in got]
            unreadable += [replace(u, where=_where(u.where, f"{where}.{key}")) for u in cannot]
    if not found_vllm or not (engines or unreadable):
        return None
    return engines, unreadable


def _where(old: str, where: str) -> str:
    """``old`` (``Pod/<service> spec.containers[0](<service>) line 7``) as ``where line 7``."""
    match = re.search(r" line \d+(?: #\d+)?$", old)
    return where + (match.group(0) if match else "")
