"""Images users build around vLLM's image, read from the files of their repository: Dockerfiles, the Makefiles and
Compose ``build:`` sections that build them, and the entrypoint scripts they copy in.

A prefill/decode deployment often runs the user's own tag (``ghcr.io/<user>/vllm-pd:latest``, ``local/vllm-pd:latest``)
whose vLLM release, environment and start command live in a Dockerfile beside the manifests
(gracee3/docker-local-inference, substratusai/vllm-docker, hommayushi3/vllm-huggingface, the NIXL override of
aws/deep-learning-containers#6173). What the image gives an engine, as Docker's builder and the container runtimes apply
it (Dockerfile reference: ``FROM``, ``ARG``, ``ENV``, ``ENTRYPOINT``, ``CMD``, ``COPY``; Kubernetes ``command``/``args``
replace ``ENTRYPOINT``/``CMD``, Compose ``entrypoint``/``command`` likewise):

* the base image of the final stage (``FROM`` with ``ARG`` defaults and ``--build-arg`` values substituted): its tag
  names the vLLM release (``vllm/vllm-openai:v0.22.1``), as an image given directly does;
* ``ENV`` variables, which the container's own ``env`` (Compose: ``environment`` and ``env_file``) override;
* ``ENTRYPOINT`` and ``CMD``, used where the container sets no command (``args`` / Compose ``command`` replace ``CMD``);
* a script the image copies from the repository (``COPY entrypoint.sh /usr/local/bin/``) and starts from
  ``ENTRYPOINT``: read as ``/bin/bash -c <script>``, so its ``vllm serve`` line and the variables it reads from the
  container's environment are seen as an inline script's (:mod:`pdd_operator.compat.mounted_scripts` does the same for
  a script mounted from a ConfigMap).

Which tag is built from which Dockerfile: a Compose service's ``build`` (``context`` and ``dockerfile``, default
``Dockerfile``) and a Makefile's ``docker build -t <tag> [-f <file>] <context>`` lines (``:=``/``?=``/``=`` variables
expanded, ``$(VAR)`` and ``${VAR}``). An image whose Dockerfile is not among the files keeps today's reading (its
entrypoint, when needed, "not checked" naming the image).
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

from pdd_operator.vllm.versions import image_repository, version_from_image, wrapped_vllm_version

#: File names that are Dockerfiles (Dockerfile reference: the default name ``Dockerfile``; ``docker build -f`` takes any,
#: and ``Dockerfile.<variant>``, ``<variant>.Dockerfile`` and Podman's ``Containerfile`` are the common ones).
_DOCKERFILE_NAME = re.compile(r"^(?:Dockerfile|Containerfile)(?:\.[\w.-]+)?$|\.[Dd]ockerfile$")
#: File names that are Makefiles (GNU make's default names, and ``*.mk`` includes).
_MAKEFILE_NAME = re.compile(r"^(?:GNUmakefile|[Mm]akefile)$|\.mk$")


def is_dockerfile(path: str) -> bool:
    """Whether the file ``path`` is a Dockerfile by its name (``Dockerfile``, ``Dockerfile.decode``,
    ``prefill.Dockerfile``, ``Containerfile``); a manifest named after one (``Dockerfile.yaml``) is not."""
    name = PurePosixPath(path).name
    return bool(_DOCKERFILE_NAME.search(name)) and PurePosixPath(name).suffix not in (".yaml", ".yml", ".json")


def is_makefile(path: str) -> bool:
    """Whether the file ``path`` is a Makefile by its name (``Makefile``, ``makefile``, ``GNUmakefile``, ``*.mk``)."""
    return bool(_MAKEFILE_NAME.search(PurePosixPath(path).name))


@dataclass(frozen=True)
class ImageBuild:
    """What a Dockerfile's final stage gives the containers of its image.

    base: the ``FROM`` image (``ARG`` values substituted), ``""`` when unreadable; env: ``ENV`` name -> value in order;
    entrypoint / cmd: exec-form words (a shell form is ``[/bin/sh, -c, <text>]``), ``None`` where the stage does not
    set them (inherited from the base image); copies: destination path -> source path of each ``COPY``/``ADD`` of
    a single file (relative to the build context); path: the Dockerfile's path; workdir: the last ``WORKDIR``."""

    path: str
    base: str
    env: dict[str, str] = field(default_factory=dict)
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    copies: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"


def _logical_lines(text: str) -> list[str]:
    """The instructions of a Dockerfile: comment lines dropped, backslash continuations joined."""
    out: list[str] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        out.append(buf + line)
        buf = ""
    if buf:
        out.append(buf)
    return out


def _subst(text: str, values: Mapping[str, str]) -> str:
    """``$VAR``, ``${VAR}`` and ``${VAR:-default}`` replaced from ``values`` (unset: the default, else empty)."""
    def one(m: re.Match) -> str:
        name = m.group(1) or m.group(3)
        if name in values:
            return values[name]
        return m.group(2) or ""
    return re.sub(r"\$\{(\w+)(?::?-([^}]*))?\}|\$(\w+)", one, text)


def _words(rest: str, values: Mapping[str, str]) -> list[str]:
    """An ``ENTRYPOINT``/``CMD`` operand as words: the JSON exec form as it is, the shell form as ``/bin/sh -c``."""
    rest = rest.strip()
    if rest.startswith("["):
        try:
            words = json.loads(rest)
        except ValueError:
            words = None
        if isinstance(words, list) and all(isinstance(w, str) for w in words):
            return words
    return ["/bin/sh", "-c", rest]


def parse_dockerfile(path: str, text: str, build_args: Mapping[str, str] | None = None) -> ImageBuild:
    """The :class:`ImageBuild` of the Dockerfile ``text`` (at ``path``): its final stage's base image, ``ENV``,
    ``ENTRYPOINT``, ``CMD``, single-file ``COPY``/``ADD`` and ``WORKDIR``. ``build_args``: ``--build-arg`` values,
    which win over ``ARG`` defaults. A stage built ``FROM`` an earlier stage inherits that stage's settings. Never
    raises: what cannot be read is left out."""
    args: dict[str, str] = {}
    stages: dict[str, ImageBuild] = {}
    current: ImageBuild | None = None
    for line in _logical_lines(text):
        op, _, rest = line.partition(" ")
        op = op.upper()
        rest = rest.strip()
        if op == "ARG":
            name, eq, default = rest.partition("=")
            name = name.strip()
            if build_args and name in build_args:
                args[name] = build_args[name]
            elif eq:
                args[name] = _subst(default.strip().strip('"').strip("'"), args)
            continue
        if op == "FROM":
            words = [w for w in rest.split() if not w.startswith("--")]
            image = _subst(words[0], args) if words else ""
            alias = words[2] if len(words) >= 3 and words[1].lower() == "as" else ""
            parent = stages.get(image)
            current = (ImageBuild(path=path, base=parent.base, env=dict(parent.env), entrypoint=parent.entrypoint,
                                  cmd=parent.cmd, copies=dict(parent.copies), workdir=parent.workdir)
                       if parent is not None else ImageBuild(path=path, base=image))
            if alias:
                stages[alias] = current
            continue
        if current is None:
            continue
        values = {**args, **current.env}
        if op == "ENV":
            env = dict(current.env)
            try:
                parts = shlex.split(rest)
            except ValueError:
                parts = rest.split()
            if parts and "=" not in parts[0]:  # legacy form: ENV NAME value with blanks
                env[parts[0]] = _subst(rest.split(None, 1)[1] if len(rest.split(None, 1)) > 1 else "", values)
            else:
                for p in parts:
                    k, _, v = p.partition("=")
                    env[k] = _subst(v, {**values, **env})
            current = _with(current, stages, env=env)
        elif op == "ENTRYPOINT":
            current = _with(current, stages, entrypoint=_words(rest, values), cmd=None)
        elif op == "CMD":
            current = _with(current, stages, cmd=_words(rest, values))
        elif op == "WORKDIR":
            workdir = _subst(rest, values)
            current = _with(current, stages, workdir=str(PurePosixPath(current.workdir, workdir)))
        elif op in ("COPY", "ADD"):
            words = [w for w in rest.split() if not w.startswith("--")]
            if words and words[0].startswith("["):
                try:
                    words = json.loads(rest[rest.index("["):])
                except ValueError:
                    continue
            if len(words) == 2:
                src, dst = words
                dst = _subst(dst, values)
                target = PurePosixPath(current.workdir, dst)
                if dst.endswith("/"):
                    target = target / PurePosixPath(src).name
                current = _with(current, stages, copies={**current.copies, str(target): src})
    return current or ImageBuild(path=path, base="")


def _with(build: ImageBuild, stages: dict[str, ImageBuild], **changes: Any) -> ImageBuild:
    """``build`` with ``changes``, also under every stage alias that names it."""
    new = ImageBuild(**{**build.__dict__, **changes})
    for alias, stage in list(stages.items()):
        if stage is build:
            stages[alias] = new
    return new


def _make_values(text: str) -> dict[str, str]:
    """The simple variables of a Makefile (``NAME := value``, ``?=``, ``=``; conditionals not followed)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z_][\w]*)\s*(?::=|\?=|=|::=)\s*(.*?)\s*$", line)
        if m and not line.startswith("\t"):
            name, value = m.groups()
            if line.split("=", 1)[0].rstrip().endswith("?") and name in values:
                continue
            values[name] = value
    return values


def _make_expand(text: str, values: Mapping[str, str], depth: int = 0) -> str:
    """``$(VAR)`` and ``${VAR}`` of a Makefile expanded from ``values`` (recursively; unknown ones left as they are)."""
    if depth > 8:
        return text
    out = re.sub(r"\$[({](\w+)[)}]", lambda m: values.get(m.group(1), m.group(0)), text)
    return out if out == text else _make_expand(out, values, depth + 1)


def makefile_builds(text: str) -> dict[str, tuple[str, str, dict[str, str]]]:
    """Image tag -> (Dockerfile path, context directory, ``--build-arg`` values) of each ``docker build`` (or
    ``podman build``, ``docker buildx build``) line of the Makefile ``text``; paths relative to the Makefile's
    directory, the Dockerfile ``<context>/Dockerfile`` where ``-f`` is not given."""
    values = _make_values(text)
    joined = re.sub(r"\\\n", " ", text)
    return _build_lines(_make_expand(line.strip().lstrip("@-"), values) for line in joined.splitlines())


def _build_lines(lines: Iterable[str]) -> dict[str, tuple[str, str, dict[str, str]]]:
    """Image tag -> (Dockerfile path, context, ``--build-arg`` values) of each ``docker build`` / ``docker buildx
    build`` / ``podman build`` / ``nerdctl build`` command among ``lines`` (variables already expanded); a tag that
    still holds a ``$`` (a variable not read) is left out."""
    out: dict[str, tuple[str, str, dict[str, str]]] = {}
    for line in lines:
        m = re.search(r"\b(?:docker|podman|nerdctl)(?:\s+buildx)?\s+build\s+(.*)", line)
        if not m:
            continue
        try:
            words = shlex.split(m.group(1).split("&&")[0].split(";")[0].split(" | ")[0], comments=True)
        except ValueError:
            continue
        tags: list[str] = []
        dockerfile = ""
        build_args: dict[str, str] = {}
        context = "."
        i = 0
        while i < len(words):
            w = words[i]
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if w in ("-t", "--tag"):
                tags.append(nxt)
                i += 2
            elif w.startswith("--tag="):
                tags.append(w.split("=", 1)[1])
                i += 1
            elif w in ("-f", "--file"):
                dockerfile = nxt
                i += 2
            elif w.startswith("--file="):
                dockerfile = w.split("=", 1)[1]
                i += 1
            elif w == "--build-arg":
                k, _, v = nxt.partition("=")
                build_args[k] = v
                i += 2
            elif w.startswith("-"):
                i += 2 if "=" not in w and nxt and not nxt.startswith("-") and w in _VALUE_OPTIONS else 1
            else:
                context = w
                i += 1
        path = dockerfile or str(PurePosixPath(context, "Dockerfile"))
        for tag in tags:
            if "$" not in tag and tag:
                out[tag] = (path, context, build_args)
    return out


def _shell_values(text: str) -> dict[str, str]:
    """The plain assignments of a shell script or README (``NAME=value``, ``export NAME=value``; quotes dropped)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(?:export\s+)?([A-Za-z_]\w*)=(\S*)\s*(?:#.*)?$", line)
        if m:
            values[m.group(1)] = m.group(2).strip("\"'")
    return values


def _shell_expand(text: str, values: Mapping[str, str]) -> str:
    """``$NAME``, ``${NAME}`` and ``${NAME:-default}`` from ``values``, the default where unset; others kept."""
    def one(m: re.Match) -> str:
        name = m.group(1) or m.group(3)
        if name in values:
            return values[name]
        return m.group(2) if m.group(2) is not None else m.group(0)
    return re.sub(r"\$\{(\w+)(?::?-([^}]*))?\}|\$(\w+)", one, text)


def script_builds(text: str) -> dict[str, tuple[str, str, dict[str, str]]]:
    """Image tag -> (Dockerfile, context, build args) of each ``docker build -t <tag> ... <context>`` line of a shell
    script or a README's commands (``$ `` prompts and Markdown code fences allowed; the script's plain assignments
    expanded); paths relative to the file's directory, where such a command is run from."""
    values = _shell_values(text)
    joined = re.sub(r"\\\n", " ", text)
    return _build_lines(_shell_expand(re.sub(r"^\s*[$>]\s+", "", line), values) for line in joined.splitlines())


def tilt_builds(text: str) -> dict[str, tuple[str, str, dict[str, str]]]:
    """Image name -> (Dockerfile, context, build args) of each ``docker_build('<name>', '<context>',
    dockerfile='...', build_args={...})`` of a Tiltfile (Tilt API reference: ``docker_build(ref, context,
    build_args={}, dockerfile='Dockerfile', ...)``; the Dockerfile relative to the Tiltfile, default
    ``<context>/Dockerfile``). Tilt replaces the image wherever a manifest names ``ref`` (any tag)."""
    out: dict[str, tuple[str, str, dict[str, str]]] = {}
    for m in re.finditer(r"\bdocker_build\s*\((.*?)\)\s*(?:\n|$)", text, re.S):
        body = m.group(1)
        strings = re.findall(r"^\s*['\"]([^'\"]+)['\"]\s*,\s*['\"]([^'\"]+)['\"]", body)
        if not strings:
            continue
        ref, context = strings[0]
        dockerfile = re.search(r"\bdockerfile\s*=\s*['\"]([^'\"]+)['\"]", body)
        args = re.search(r"\bbuild_args\s*=\s*\{([^}]*)\}", body)
        build_args = dict(re.findall(r"['\"](\w+)['\"]\s*:\s*['\"]([^'\"]*)['\"]", args.group(1))) if args else {}
        out[ref] = (dockerfile.group(1) if dockerfile else str(PurePosixPath(context, "Dockerfile")), context,
                    build_args)
    return out


def _args_map(raw: Any) -> dict[str, str]:
    return ({str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else
            dict(str(a).partition("=")[::2] for a in raw) if isinstance(raw, list) else {})


def skaffold_builds(doc: dict) -> dict[str, tuple[str, str, dict[str, str]]]:
    """Image name -> (Dockerfile, context, build args) of a Skaffold config's ``build.artifacts`` (``apiVersion:
    skaffold/v*``; each artifact's ``image``, ``context`` default ``.``, ``docker.dockerfile`` default
    ``Dockerfile`` relative to the context, ``docker.buildArgs``). Skaffold tags the image and rewrites every
    manifest that names it, whatever tag the manifest writes."""
    if not str(doc.get("apiVersion") or "").startswith("skaffold/"):
        return {}
    out: dict[str, tuple[str, str, dict[str, str]]] = {}
    profiles = [p for p in doc.get("profiles") or [] if isinstance(p, dict)]
    for part in [doc, *profiles]:
        build = part.get("build") if isinstance(part.get("build"), dict) else {}
        for a in build.get("artifacts") or []:
            if not isinstance(a, dict) or not a.get("image"):
                continue
            context = str(a.get("context") or ".")
            docker = a.get("docker") if isinstance(a.get("docker"), dict) else {}
            path = str(PurePosixPath(context, str(docker.get("dockerfile") or "Dockerfile")))
            out.setdefault(str(a["image"]), (path, context, _args_map(docker.get("buildArgs"))))
    return out


def devspace_builds(doc: dict) -> dict[str, tuple[str, str, dict[str, str]]]:
    """Image name -> (Dockerfile, context, build args) of a DevSpace config's ``images`` (``version: v1beta*`` /
    ``v2beta*``; each image's ``image``, ``dockerfile`` default ``./Dockerfile``, ``context`` default ``./``,
    ``buildArgs``; paths relative to devspace.yaml). DevSpace replaces the image in the deployments it runs."""
    if not re.match(r"v[12]beta", str(doc.get("version") or "")) or not isinstance(doc.get("images"), dict):
        return {}
    out: dict[str, tuple[str, str, dict[str, str]]] = {}
    for spec in doc["images"].values():
        if isinstance(spec, dict) and spec.get("image"):
            out[str(spec["image"])] = (str(spec.get("dockerfile") or "./Dockerfile"), str(spec.get("context") or "."),
                                       _args_map(spec.get("buildArgs") or spec.get("build_args")))
    return out


def workflow_builds(doc: dict) -> dict[str, tuple[str, str, dict[str, str]]]:
    """Image tag -> (Dockerfile, context, build args) of each ``docker/build-push-action`` step of a GitHub Actions
    workflow (``with``: ``tags`` one per line or comma-separated, ``file`` default ``<context>/Dockerfile``,
    ``context`` default the checkout, ``build-args`` ``K=V`` lines); ``${{ env.X }}`` filled from the workflow's,
    job's and step's ``env``, a tag with another expression left out. Paths relative to the repository root."""
    jobs = doc.get("jobs")
    if not isinstance(jobs, dict):
        return {}
    out: dict[str, tuple[str, str, dict[str, str]]] = {}
    top = doc.get("env") if isinstance(doc.get("env"), dict) else {}
    for job in jobs.values():
        if not isinstance(job, dict):
            continue
        job_env = {**top, **(job.get("env") if isinstance(job.get("env"), dict) else {})}
        for step in job.get("steps") or []:
            if not (isinstance(step, dict) and str(step.get("uses") or "").startswith("docker/build-push-action")):
                continue
            env = {**job_env, **(step.get("env") if isinstance(step.get("env"), dict) else {})}
            w = step.get("with") if isinstance(step.get("with"), dict) else {}

            def fill(value: Any, env: dict = env) -> str:
                return re.sub(r"\$\{\{\s*env\.(\w+)\s*\}\}",
                              lambda m: str(env[m.group(1)]) if m.group(1) in env else m.group(0), str(value or ""))

            context = fill(w.get("context")) or "."
            path = fill(w.get("file")) or str(PurePosixPath(context, "Dockerfile"))
            args = dict(line.strip().partition("=")[::2] for line in fill(w.get("build-args")).splitlines()
                        if "=" in line)
            for tag in re.split(r"[,\n]", fill(w.get("tags"))):
                tag = tag.strip()
                if tag and "${{" not in tag:
                    out[tag] = (path, context, args)
    return out


#: ``docker build`` options that take a value (the rest are switches), so the context argument is found.
_VALUE_OPTIONS = frozenset({"--platform", "--target", "--label", "--network", "--progress", "--secret", "--ssh",
                            "--cache-from", "--cache-to", "--output", "-o", "--iidfile", "--add-host", "--shm-size"})


#: Reads a file of the repository by its path relative to the folder given (``None``: not among the files).
Reader = Callable[[str], "str | None"]


def entrypoint_script(build: ImageBuild, words: list[str], read: Reader) -> str | None:
    """The text of the script the image copies in from the repository and that ``words`` (the container's command)
    starts, directly (``entrypoint.sh``, ``/usr/local/bin/entrypoint.sh``) or through ``bash``/``sh``; ``None`` for
    any other start."""
    if not words:
        return None
    start = words[0]
    if PurePosixPath(start).name in ("bash", "sh") and len(words) > 1 and not words[1].startswith("-"):
        start = words[1]
    candidates = [str(PurePosixPath(build.workdir, start))] if not start.startswith("/") else [start]
    for dst, src in build.copies.items():
        if dst in candidates or (not start.startswith("/") and "/" not in start
                                 and PurePosixPath(dst).name == start and PurePosixPath(dst).parent.name == "bin"):
            context = str(PurePosixPath(build.path).parent)
            return read(str(PurePosixPath(context, src)))
    return None


def container_from_build(container: dict, build: ImageBuild, read: Reader) -> dict:
    """``container`` (a Kubernetes container; not changed) as it runs from ``build``'s image: ``image`` the base image,
    the image's ``ENV`` behind the container's own ``env``, and ``command``/``args`` from ``ENTRYPOINT``/``CMD`` where the
    container sets none (Kubernetes: ``command`` replaces ``ENTRYPOINT`` and drops ``CMD``, ``args`` replaces ``CMD``);
    a copied-in entrypoint script becomes ``/bin/bash -c <script>`` with the container's arguments after it."""
    out = copy.deepcopy(container)
    if build.base:
        out["image"] = build.base
    own = {e.get("name") for e in out.get("env") or [] if isinstance(e, dict)}
    image_env = [{"name": k, "value": v} for k, v in build.env.items() if k not in own]
    if image_env:
        out["env"] = image_env + list(out.get("env") or [])
    if "command" not in out and build.entrypoint is not None:
        args = out.get("args") if "args" in out else (build.cmd or [])
        words = [*build.entrypoint, *(str(a) for a in args)]
        script = entrypoint_script(build, build.entrypoint, read)
        if script is not None:
            rest = build.entrypoint[2:] if PurePosixPath(build.entrypoint[0]).name in ("bash", "sh") else \
                build.entrypoint[1:]
            extra = [w for w in [*rest, *(str(a) for a in args)] if w]
            words = ["/bin/bash", "-c", script, *(["entrypoint", *extra] if extra else [])]
        out["command"] = words
        out.pop("args", None)
    elif "command" not in out and "args" not in out and build.cmd is not None and build.entrypoint is None:
        out["args"] = build.cmd
    return out


#: File names that may tie an image tag to a Dockerfile without building or running anything themselves (READMEs and
#: docs with ``docker build`` commands, Tiltfiles, Skaffold and DevSpace configs, GitHub Actions workflows).
_LINK_NAME = re.compile(r"^(?:README[\w.-]*|[\w.-]+\.md|Tiltfile|skaffold[\w.-]*\.ya?ml|devspace[\w.-]*\.ya?ml)$", re.I)


def is_build_link_file(path: str) -> bool:
    """Whether the file ``path`` (relative to the folder given) may only tie image tags to Dockerfiles
    (:func:`build_links`): a README or Markdown file, a Tiltfile, a Skaffold or DevSpace config, or a GitHub Actions
    workflow (``.github/workflows/*.yml``)."""
    parts = PurePosixPath(path).parts
    return bool(_LINK_NAME.match(parts[-1] if parts else "")) or (
        len(parts) >= 3 and parts[-3:-1] == (".github", "workflows") and PurePosixPath(path).suffix in (".yml", ".yaml"))


def build_links(path: str, text: str) -> tuple[dict[str, tuple[str, str, dict[str, str]]], str]:
    """``(image tag or name -> (Dockerfile, context, build args), the folder those paths are relative to)`` that the
    file ``path`` (text ``text``) ties to Dockerfiles: a Makefile's (:func:`makefile_builds`), a shell script's or
    README's ``docker build`` lines (:func:`script_builds`), a Tiltfile's ``docker_build`` (:func:`tilt_builds`), a
    Skaffold or DevSpace config's images (:func:`skaffold_builds`, :func:`devspace_builds`) or a GitHub Actions
    workflow's ``docker/build-push-action`` steps (:func:`workflow_builds`, relative to the repository root above
    ``.github``). ``{}`` for any other file."""
    p = PurePosixPath(path)
    folder = str(p.parent)
    if is_makefile(path):
        return makefile_builds(text), folder
    if p.name == "Tiltfile":
        return tilt_builds(text), folder
    if p.suffix in (".yml", ".yaml", ".json"):
        try:
            docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
        except yaml.YAMLError:
            return {}, folder
        out: dict[str, tuple[str, str, dict[str, str]]] = {}
        workflow = p.parts[-3:-1] == (".github", "workflows")
        for d in docs:
            out.update(workflow_builds(d) if workflow else {**skaffold_builds(d), **devspace_builds(d)})
        return out, str(p.parent.parent.parent) if workflow else folder
    if "build" in text and re.search(r"\b(?:docker|podman|nerdctl)(?:\s+buildx)?\s+build\b", text):
        return script_builds(text), folder
    return {}, folder


def builds_of(files: Mapping[str, str]) -> dict[str, ImageBuild]:
    """Image tag (or a tagless image name, which Skaffold, Tilt and DevSpace replace whatever the tag) ->
    :class:`ImageBuild` for every image that a file among ``files`` (path -> text) builds from a Dockerfile among
    them (:func:`build_links`). A Makefile's or Compose file's own link wins over a README's or script's."""
    out: dict[str, ImageBuild] = {}
    ordered = sorted(files.items(), key=lambda kv: 0 if is_makefile(kv[0]) else 1, reverse=True)
    for path, text in ordered:
        if is_dockerfile(path):
            continue
        links, folder = build_links(path, text)
        for tag, (dockerfile, _, build_args) in links.items():
            target = str(PurePosixPath(folder, dockerfile))
            body = files.get(target)
            if body is not None:
                out[tag] = parse_dockerfile(target, body, build_args)
    return out


def _without_tag(image: str) -> str:
    """``image`` without its ``:tag`` and ``@digest`` (the registry's port kept)."""
    image = image.split("@", 1)[0]
    head, _, last = image.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def build_for(image: str, builds: Mapping[str, ImageBuild]) -> ImageBuild | None:
    """The :class:`ImageBuild` of ``image``: its tag among ``builds``, else its name where a tagless name is
    (Skaffold, Tilt and DevSpace tag the image themselves and replace it in every manifest naming it)."""
    if image in builds:
        return builds[image]
    name = _without_tag(image)
    return builds.get(name) if name != image and ":" not in name.rpartition("/")[2] else None


def lone_dockerfile(files: Mapping[str, str], builds: Mapping[str, ImageBuild],
                    images: Iterable[str]) -> tuple[str, ImageBuild] | None:
    """``(image, build)`` where nothing among ``files`` names the tag the one Dockerfile among them builds:
    ``images`` (those of the containers that start no command of their own, so their image's ENTRYPOINT and ENV
    decide what runs) hold exactly one image that no link builds and that is no published image (vLLM's Docker Hub
    images, the wrapped images of ``wrapped_vllm_versions.json``), the files hold exactly one Dockerfile, no link
    names it, and its final stage is built on a vLLM image. The user's own image is then the one they build from
    that Dockerfile; the caller says so beside the verdict. ``None`` otherwise."""
    dockerfiles = [p for p in files if is_dockerfile(p)]
    if len(dockerfiles) != 1 or any(b.path == dockerfiles[0] for b in builds.values()):
        return None
    own = {i for i in images if i and build_for(i, builds) is None and not image_repository(i).startswith("vllm/")
           and wrapped_vllm_version(i) is None}
    if len(own) != 1:
        return None
    build = parse_dockerfile(dockerfiles[0], files[dockerfiles[0]])
    if not build.base or version_from_image(build.base) is None:
        return None
    return own.pop(), build


def commandless_images(doc: Any) -> list[str]:
    """The ``image`` of every container (and init container) in ``doc`` that sets no ``command``."""
    out: list[str] = []
    if isinstance(doc, dict):
        for key in ("containers", "initContainers"):
            items = doc.get(key)
            if isinstance(items, list):
                out += [str(c.get("image") or "") for c in items if isinstance(c, dict) and not c.get("command")]
        for value in doc.values():
            out += commandless_images(value)
    elif isinstance(doc, list):
        for value in doc:
            out += commandless_images(value)
    return out


def with_image_builds(doc: dict, builds: Mapping[str, ImageBuild], read: Reader) -> dict:
    """``doc`` (a manifest; not changed) with every container of every pod spec in it whose ``image`` is one of
    ``builds`` rewritten by :func:`container_from_build`. Returns a deep copy where anything changed, else ``doc``."""
    if not builds:
        return doc
    out = copy.deepcopy(doc)
    changed = False

    def walk(node: Any) -> None:
        nonlocal changed
        if isinstance(node, dict):
            for key in ("containers", "initContainers"):
                items = node.get(key)
                if isinstance(items, list):
                    for i, c in enumerate(items):
                        build = build_for(str(c.get("image") or ""), builds) if isinstance(c, dict) else None
                        if build is not None:
                            items[i] = container_from_build(c, build, read)
                            changed = True
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(out)
    return out if changed else doc


#: The key under which :func:`service_from_build` hands a Compose service its image's ``ENV`` (an ``x-`` extension key,
#: which Compose itself ignores).
IMAGE_ENV_KEY = "x-image-env"


def service_from_build(service: dict, build: ImageBuild, read: Reader) -> dict:
    """A Compose ``service`` (not changed) whose ``build`` is ``build``: ``image`` the base image, ``entrypoint`` and
    ``command`` from ``ENTRYPOINT``/``CMD`` where the service sets none (Compose: ``entrypoint`` replaces
    ``ENTRYPOINT`` and clears ``CMD``, ``command`` replaces ``CMD``), the image's ``ENV`` under :data:`IMAGE_ENV_KEY`
    (below ``environment`` and ``env_file``, :func:`~pdd_operator.compat.compose_inputs._env`), ``build`` dropped."""
    out = {k: v for k, v in service.items() if k != "build"}
    if build.base:
        out["image"] = build.base
    if build.env:
        out[IMAGE_ENV_KEY] = dict(build.env)
    if "entrypoint" not in out and build.entrypoint is not None:
        script = entrypoint_script(build, build.entrypoint, read)
        if script is not None:
            command = out.pop("command", None)
            args = command if isinstance(command, list) else shlex.split(command) if isinstance(command, str) else \
                [_literal(w) for w in build.cmd or []]
            out["entrypoint"] = ["/bin/bash", "-c", _literal(script), "entrypoint", *[str(a) for a in args]]
        else:
            out["entrypoint"] = [_literal(w) for w in build.entrypoint]
            if "command" not in out and build.cmd is not None:
                out["command"] = [_literal(w) for w in build.cmd]
    return out


def _literal(word: str) -> str:
    """``word`` from the image, escaped for a Compose file: Compose interpolates ``$VAR`` in what the file says and
    turns ``$$`` into ``$``, never in what the image holds."""
    return word.replace("$", "$$")


def compose_build_of(service: dict, compose_dir: str, read: Reader) -> ImageBuild | None:
    """The :class:`ImageBuild` of a Compose ``service``'s ``build`` (a context string, or ``context``,
    ``dockerfile`` and ``args``), read through ``read`` (paths relative to the Compose file's folder, which is
    ``compose_dir`` relative to the reader: ``"."`` for a reader of that folder);
    ``None`` without ``build`` or when its Dockerfile is not among the files."""
    spec = service.get("build")
    if spec is None:
        return None
    if isinstance(spec, str):
        context, dockerfile, args = spec, "Dockerfile", {}
    elif isinstance(spec, dict):
        context = str(spec.get("context") or ".")
        dockerfile = str(spec.get("dockerfile") or "Dockerfile")
        raw = spec.get("args")
        args = ({str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else
                dict(str(a).partition("=")[::2] for a in raw) if isinstance(raw, list) else {})
    else:
        return None
    path = str(PurePosixPath(compose_dir, context, dockerfile))
    text = read(path)
    if text is None:
        return None
    return parse_dockerfile(path, text, args)


def makefile_recipes(text: str) -> str:
    """The recipe lines of the Makefile ``text`` as one shell script, in order: each tab-led line (continuations
    joined), its ``@``/``-``/``+`` prefix dropped, ``$(VAR)`` and ``${VAR}`` expanded from the Makefile's simple
    variables (:func:`_make_values`) and make's ``$$`` turned into the shell's ``$`` (GNU make manual, "Recipe Syntax",
    "Using Variables in Recipes"). Which targets run is not followed: every recipe is read, as a launcher script whose
    engines the P/D readers pair (:func:`~pdd_operator.compat.script_inputs.script_engines`)."""
    values = _make_values(text)
    lines: list[str] = []
    buf = ""
    for raw in text.splitlines():
        if not buf and not raw.startswith("\t"):
            continue
        line = raw.strip()
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        line = (buf + line).lstrip("@-+ ")
        buf = ""
        lines.append(_make_expand(line, values).replace("$$", "$"))
    return "\n".join(lines) + "\n"
