"""The vLLM engines a shell script or Slurm batch script starts, read as the checker's engines (issue 9).

Public P/D reports are often host scripts: vLLM's own ``tests/v1/kv_connector/nixl_integration/run_accuracy_test.sh``
(``CUDA_VISIBLE_DEVICES=$GPU_ID VLLM_NIXL_SIDE_CHANNEL_PORT=$SIDE_CHANNEL_PORT vllm serve $model_name --port $PORT
--kv-transfer-config '{...}' &`` in loops over the prefill and decode instances, then ``toy_proxy_server.py
--prefiller-ports ... --decoder-ports ...``), ``examples/online_serving/disaggregated_serving*/*.sh``, and
NVIDIA/cloudai's ``vllm-disagg.sbatch`` (``srun --export=ALL,CUDA_VISIBLE_DEVICES=0,1,... -N1
--container-image=nvcr.io/nvidia/vllm:latest vllm serve ... &``).

The script is run symbolically by the one shell reader of this project (:func:`pdd_operator.vllm.script.launches`:
variables, ``export``, inline assignments, functions, loops with literal bounds, ``eval``, ``sh -c``); what it cannot
know is ``<unknown:NAME>``, which rules read as "not checked". The engines of each node then become one container
of a synthetic hostNetwork Pod (one Pod per node; one per engine whose node is not known), whose ``bash -c`` script
holds each engine's command with its environment on the script's own line number, so that what reads Kubernetes
engines (:func:`pdd_operator.compat.manifests.scan`, the pairing, every rule, engines of one container sharing a
host's ports and GPUs) reads these too and the findings name "``<file> (<format>) line N``".

Where each engine runs (Slurm ``srun``/``sbatch`` options, sbatch(1) and srun(1) of Slurm 24.05):

* ``srun -w NODE`` / ``--nodelist=NODE`` (one node): that node; ``srun -r N`` / ``--relative=N``: the job's node N;
  ``ssh HOST cmd``: HOST;
* ``srun --nodelist=a,b`` (literal names, or a slice of the array ``scontrol show hostnames "$SLURM_JOB_NODELIST"``
  fills: ``${nodes[*]:0:4}``, also through ``$(IFS=,; echo ...)``), ``--relative=N --nodes=K``, ``--exclude=a``: one
  of those nodes (not those excluded), written as the Pod's required node affinity (:func:`_pool_affinity`), so
  steps on disjoint node sets never share a node and overlapping ones may;
* ``srun`` without them in a job of one node (``#SBATCH -N 1`` / ``--nodes=1``): the job's node; a command without
  ``srun`` runs where the script runs (the batch host, the job's first node);
* otherwise (a node from ``scontrol show hostnames``, a job of several nodes) the node is not known: the Pod has no
  node, so placement rules say the engines may or may not share one (never an error for it);
* a script with no ``&`` at all that starts two engines or more in the foreground is a pasted command pair (each
  command run in its own terminal, on one host or several: :func:`_pasted_foreground`): no engine's node is known.

A variable the script never names is read as unset (vLLM's default): one set where the script runs reaches every
engine alike (one shell, or ``srun``'s default ``--export=ALL``), so it cannot give two engines of one host different
ports or two nodes their own addresses. The script is read as run with none of the variables it reads set
beforehand: ``${V:-d}`` is its own default ``d`` (vLLM's accuracy test: ``PREFILL_BLOCK_SIZE=${PREFILL_BLOCK_SIZE:-128}``),
while a bare ``$V`` it reads but never sets (``$MODEL``, a ``$1`` of the script, a value from ``scontrol``, a loop over
``$(seq ...)``) is unknown (the author expects it set), and the rules that need it say "not checked".

A launcher whose own arguments choose what it starts (``bash launch.sh configC1 prefill``, a ``case "$1"`` of
functions: :func:`pdd_operator.vllm.script.argument_alternatives`) is read per alternative: each is a deployment of its
own (its Pods named after the functions that start them, never paired with another alternative's), the roles it
starts by separate invocations each on a host not known, and every finding names the alternative ("run as
configC1_prefill / configC1_decode, chosen by its arguments").

An engine's environment: the variables the script exports and its inline ``NAME=value`` prefixes (from the shell
reader), then ``srun --export=``: ``NONE`` drops them all, ``NAME=value`` entries are set (an entry
with no ``=`` that is no variable name, as ``1`` in ``CUDA_VISIBLE_DEVICES=0,1,X=2``, continues the previous value,
as CloudAI writes device lists). The image: ``srun --container-image=`` (Pyxis), else a ``pip install vllm==X`` pin
in the script (read as vLLM X's ``vllm/vllm-openai:vX`` image; the last pin before the engine's line, as each
install replaces the one before it; ``pip install "ray[llm]==R"`` pins the vLLM of Ray R's llm extra where that is
exact, else leaves it unknown), the image of an interactive container the script opened before the engine's
command (``docker run -it --entrypoint=/bin/bash IMAGE``: the commands after it are typed into it) unless a pin
follows it, else unknown; a ``pip install nixl==X`` line before
the engines (``nixl-cu12``, ``nixl[cu12]``) is the NIXL they load, except in an image ``--container-image`` names.
GPUs of a node: ``#SBATCH --gpus-per-node=N`` or ``--gres=gpu[:type]:N``, else at least the highest
``CUDA_VISIBLE_DEVICES`` ordinal + 1 where every engine of the node writes one, else not known.
"""

from __future__ import annotations

import json
import re
import shlex
import zlib
from dataclasses import replace

from pdd_operator.compat.config_files import starts_with_config_file
from pdd_operator.compat.manifests import Engine, Unreadable, pd_marked, repeats_unread, scan
from pdd_operator.compat.python_inputs import notebook_code, python_launch_script
from pdd_operator.compat.rules.base import SCRIPT_KIND
from pdd_operator.compat.text_inputs import text_format
from pdd_operator.vllm.block_size import (
    ROCM_RESOURCES,
    script_gpu_resource,
    script_platform_hint,
    script_shows_other_accelerator,
)
from pdd_operator.vllm.expansion import ContainerEnv, unknown_names
from pdd_operator.vllm.script import (
    IN_PROCESS_ENGINE,
    JOB_NODES,
    MAX_ARGUMENT_PATHS,
    Alternative,
    Launch,
    _function_of,
    _http_port,
    argument_alternatives,
    arguments_truncated,
    docker_run,
    launches,
)
from pdd_operator.vllm.versions import RAY_LLM_REQUIREMENT, RELEASE_NUMBER, ray_llm_vllm

#: The formats whose vllm serve lines are read (:func:`pdd_operator.compat.text_inputs.text_format`).
READ_FORMATS = ("Slurm batch script", "shell script")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SBATCH_NODES = re.compile(r"^#SBATCH\s+(?:-N\s*|--nodes[=\s])(\d+)(?:-(\d+))?\s*$", re.M)
_SBATCH_GPUS = re.compile(r"^#SBATCH\s+(?:--gpus-per-node[=\s](?:[A-Za-z0-9_-]+:)?|--gres[=\s]gpu:(?:[A-Za-z0-9_-]+:)?)"
                          r"(\d+)\s*$", re.M)
_PIP_VLLM = re.compile(rf"\bpip3?\s+install\b[^\n]*?\bvllm==({RELEASE_NUMBER})\b")
#: A ``pip install ... vllm==X`` line of the script that is not in a comment (:func:`_vllm_pin`).
_PIP_VLLM_LINE = re.compile(rf"^[^#\n]*\bpip3?\s+install\b[^\n#]*?\bvllm==({RELEASE_NUMBER})\b", re.M)
#: A ``pip install ... "ray[llm]==R"`` line of the script that is not in a comment (extras in any order,
#: ``ray[serve,llm]``): Ray release R's LLM stack, whose vLLM :func:`_vllm_pins` reads.
_PIP_RAY_LLM_LINE = re.compile(r"^[^#\n]*\bpip3?\s+install\b[^\n#]*?" + RAY_LLM_REQUIREMENT.pattern, re.M | re.I)
#: A ``pip install`` (``pip3``, ``uv pip``, ``python -m pip``) line of the script that pins NIXL: ``nixl==X``,
#: ``nixl-cu12==X``, ``nixl[cu12]==X`` (not in a comment).
_PIP_NIXL = re.compile(r"^[^#\n]*\bpip3?\s+install\b[^\n#]*?\b(nixl(?:-cu1[23])?(?:\[[a-z0-9,]+\])?\s*==\s*[0-9][0-9a-z.]*)",
                       re.M | re.I)


def _option(words: list[str], short: str, long: str) -> str | None:
    """The value of ``short VALUE``, ``shortVALUE``, ``long=VALUE`` or ``long VALUE`` in ``words`` (the last given)."""
    out = None
    for i, word in enumerate(words):
        if word in (short, long) and i + 1 < len(words):
            out = words[i + 1]
        elif word.startswith(long + "="):
            out = word[len(long) + 1:]
        elif short and word.startswith(short) and len(word) > len(short) and not word.startswith("--"):
            out = word[len(short):]
    return out


#: Words of a wrapper that run the engine elsewhere than on the script's host as it is: a container runtime (which
#: hands the container its own devices), a remote shell, a scheduler step (which sets the step's devices).
_NOT_ON_HOST = frozenset({"docker", "podman", "nerdctl", "ssh", "srun", "kubectl", "enroot", "mpirun", "torchrun"})


def host_launch(wrapper: tuple[str, ...]) -> bool:
    """The engine runs on the script's host with the host's devices as they are: its wrapper words hold none of
    :data:`_NOT_ON_HOST` (a bare launch, ``env``, ``nohup``, ``numactl``, or Apptainer/Singularity, which bind the
    host's GPUs with ``--nv`` and pass the shell's environment through). Pure."""
    return not any(w.rsplit("/", 1)[-1] in _NOT_ON_HOST for w in wrapper)


def _srun_words(wrapper: tuple[str, ...]) -> list[str] | None:
    """The words after ``srun`` up to the command it runs, or ``None`` when no ``srun`` wraps the engine."""
    for i, word in enumerate(wrapper):
        if word.rsplit("/", 1)[-1] == "srun":
            return list(wrapper[i + 1:])
    return None


def _node(wrapper: tuple[str, ...], job_nodes: int | None) -> str | None:
    """Where the engine whose command ``wrapper`` precedes runs (see the module docstring), ``None`` if not known."""
    if "ssh" in wrapper:
        after = [w for w in wrapper[wrapper.index("ssh") + 1:] if not w.startswith("-")]
        host = after[0] if after else None
        return None if host is None or unknown_names(host) else host.rsplit("@", 1)[-1]
    srun = _srun_words(wrapper)
    if srun is None:
        return "batch-host"
    pool = _pool(srun)
    if pool is not None:
        return pool[0] if len(pool) == 1 else None
    if _option(srun, "-w", "--nodelist") is not None:
        return None
    return "batch-host" if job_nodes == 1 else None


def _job_node(index: int) -> str:
    """The name the engines' Pods give node ``index`` of the job's allocation: its first node is where the batch
    script runs (``batch-host``), the others ``job-node-N`` (``srun --relative=N``, ``scontrol show hostnames``'
    N-th name: both count the allocation in one order)."""
    return "batch-host" if index == 0 else f"job-node-{index}"


def _pool(srun: list[str]) -> tuple[str, ...] | None:
    """The nodes one ``srun`` step may run its tasks on (the words after ``srun``), where its options name them:
    ``-w``/``--nodelist`` as a comma-separated list of literal names, or as nodes of the job's allocation read from
    ``scontrol show hostnames`` (an element or a slice of that array: :data:`~pdd_operator.vllm.script.JOB_NODES`),
    or ``-r``/``--relative=N`` with ``-N``/``--nodes=K`` (K nodes from the allocation's node N; srun(1): the step
    starts relative to node N of the allocation). ``None`` where they are not known (a hostlist range ``n[1-4]``,
    a file, a value not in the files)."""
    listed = _option(srun, "-w", "--nodelist")
    if listed is not None:
        if (token := JOB_NODES.fullmatch(listed)) is not None:
            start, count = int(token.group(1)), int(token.group(2))
            return tuple(_job_node(i) for i in range(start, start + count))
        names = tuple(n for n in listed.split(",") if n)
        if not names or unknown_names(listed) or any(c in listed for c in "[]/ "):
            return None
        return names
    relative = _option(srun, "-r", "--relative")
    if relative is None or not relative.isdigit():
        return None
    count = _option(srun, "-N", "--nodes") or "1"
    return tuple(_job_node(i) for i in range(int(relative), int(relative) + int(count))) if count.isdigit() else None


def _excluded(srun: list[str]) -> tuple[str, ...]:
    """The literal node names ``srun -x``/``--exclude`` keeps the step off (``()`` where none, or not literal)."""
    listed = _option(srun, "-x", "--exclude")
    if listed is None or unknown_names(listed) or any(c in listed for c in "[]/ "):
        return ()
    return tuple(n for n in listed.split(",") if n)


def _pool_affinity(srun: list[str] | None) -> dict | None:
    """The required node affinity of the Pod of an engine whose ``srun`` step runs on one of several nodes
    (:func:`_pool`: one ORed ``matchFields`` ``metadata.name In [node]`` term per node) or off the nodes it excludes
    (:func:`_excluded`: ``NotIn`` each, in every term), so that placement reads two steps on disjoint node sets as
    never on one node (:func:`pdd_operator.compat.placement.nodes_disjoint`); ``None`` where the step names
    neither."""
    if srun is None:
        return None
    pool, excluded = _pool(srun), _excluded(srun)
    if (pool is None or len(pool) < 2) and not excluded:
        return None
    off = [{"key": "metadata.name", "operator": "NotIn", "values": [n]} for n in excluded]
    terms = ([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}, *off]} for n in pool]
             if pool is not None and len(pool) > 1 else [{"matchFields": off}])
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def _export(srun: list[str], env: dict[str, str]) -> dict[str, str]:
    """The engine's environment after ``srun --export=...`` (see the module docstring)."""
    value = _option(srun, "", "--export")
    if value is None:
        return env
    entries = value.split(",")
    out = dict(env) if entries[0] != "NONE" else {}
    last = None
    for entry in entries:
        name, eq, val = entry.partition("=")
        if eq and _NAME.fullmatch(name):
            out[name], last = val, name
        elif not eq and last is not None and not _NAME.fullmatch(entry) and entry not in ("ALL", "NONE"):
            out[last] += "," + entry
    return out


def _container_image(group: list[Launch]) -> bool:
    """Whether the engines of ``group`` run in an image ``srun --container-image=`` names (a script's own
    ``pip install`` lines then do not reach them)."""
    return any(_option(_srun_words(x.wrapper) or [], "", "--container-image") for x in group)


def _vllm_pins(text: str, line: int) -> list[tuple[int, str]]:
    """``(line, X)`` of each ``pip install vllm==X`` pin of the script ``text`` on a line of its own (not in a comment)
    at or before ``line`` (1-based), in order; a ``pip install "ray[llm]==R"`` line counts as the vLLM that Ray
    release's llm extra pins exactly (:func:`~pdd_operator.vllm.versions.ray_llm_vllm`: Ray 2.56.0 on), or as ``""``
    (unknown: a release that names only a floor, ``vllm>=X``, lets pip pick the newest) - an install that replaces the
    vLLM before it either way. A ``vllm==X`` on the same line as the Ray one wins (it is the explicit pin)."""
    pins = [(n, 1, m.group(1)) for m in _PIP_VLLM_LINE.finditer(text)
            if (n := text.count("\n", 0, m.start()) + 1) <= line]
    pins += [(n, 0, (ray_llm_vllm(m.group(1)) or ("",))[0]) for m in _PIP_RAY_LLM_LINE.finditer(text)
             if (n := text.count("\n", 0, m.start()) + 1) <= line]
    return [(n, x) for n, _, x in sorted(pins)]


def _vllm_pin(text: str, line: int) -> str | None:
    """The vLLM release a ``pip install vllm==X`` pin of the script ``text`` gives an engine started on ``line``
    (1-based): the last such pin on a line of its own (not in a comment) at or before ``line``, as each install replaces
    the one before it in the environment the later ``vllm serve`` imports (a script that installs 0.14.0, starts the
    prefill, installs 0.16.0 and starts the decode runs two releases); where none comes before it, the script's first
    pin anywhere (a comment's included, as the script's instructions), else ``None``."""
    before = _vllm_pins(text, line)
    if before:
        return before[-1][1] or None
    pin = _PIP_VLLM.search(text)
    return pin.group(1) if pin else None


def _image(wrapper: tuple[str, ...], text: str, line: int = 0, inside: tuple[int, str] | None = None) -> str:
    """The engine's image: a ``docker run``'s image (the last word of ``wrapper``,
    :func:`pdd_operator.vllm.script.docker_run`), ``srun --container-image=``, else the image of the interactive
    container the engine's command is typed into (``inside``, :attr:`pdd_operator.vllm.script.Launch.inside`: ``docker
    run -it --entrypoint=/bin/bash vllm/vllm-openai-rocm:v0.20.0`` then ``vllm serve ...``; its tag names the release
    as a container's image does) unless a ``pip install vllm==X`` pin comes after it, else the pin of the script that
    reaches the engine started on ``line`` (:func:`_vllm_pin`), else ``""``."""
    docker = docker_run(wrapper)
    if docker is not None:
        return "" if unknown_names(docker.image) else docker.image
    srun = _srun_words(wrapper) or []
    image = _option(srun, "", "--container-image")
    if image and not unknown_names(image):
        return image
    if inside is not None and not any(n > inside[0] for n, _ in _vllm_pins(text, line)):
        return inside[1]
    pin = _vllm_pin(text, line)
    return f"vllm/vllm-openai:v{pin}" if pin else ""


def _nixl_pin(text: str) -> tuple[int, str] | None:
    """The first ``pip install`` line of the script ``text`` that pins NIXL: (its 1-based line, ``pip install
    nixl==X`` as written there), else ``None``. The NIXL wheel such a line installs where the script runs is the one
    every engine it then starts there loads (vLLM imports ``nixl._api`` from its Python environment:
    distributed/kv_transfer/kv_connector/v1/nixl_connector.py, 0.11.1 and 0.19.0), as a ``pip install vllm==X`` pin
    gives their vLLM (:func:`_image`); :func:`pdd_operator.vllm.known_bad.nixl_version` reads it from the engine's
    command."""
    match = _PIP_NIXL.search(text)
    if match is None:
        return None
    return text.count("\n", 0, match.start()) + 1, "pip install " + match.group(1)


def _line(launch: Launch) -> str:
    """The engine's command as one literal shell line: its environment as ``NAME=value`` prefixes, then its argv (from
    the program that starts it: ``vllm-rs serve ...`` for a Rust frontend launch, ``Launch.frontend``; the
    :data:`~pdd_operator.vllm.script.IN_PROCESS_ENGINE` word of an engine a Python program builds)."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in launch.env.items() if _NAME.fullmatch(k))
    argv = list(launch.argv)
    if launch.frontend and argv[:2] == ["vllm", "serve"]:  # started by vllm-rs: the same program again
        argv[0] = launch.frontend
    if launch.wrapper[:1] == (IN_PROCESS_ENGINE,):  # built in a Python process: kept, it serves no HTTP
        argv.insert(0, IN_PROCESS_ENGINE)
    return (env + " " if env else "") + " ".join(shlex.quote(w) for w in argv) + " &"


def _synthetic_script(found: list[Launch], roles: dict[int, str], last_line: int,
                      nixl_pin: tuple[int, str] | None = None) -> str:
    """A script with each engine of ``found`` on its own line number (engines of one line, a loop's, side by side)
    and, after ``last_line``, a P/D proxy line naming the ports of ``roles`` (port -> role) as the script's did;
    ``nixl_pin`` (:func:`_nixl_pin`: line, ``pip install nixl==X``) is kept on its line where it comes before the
    first engine, so the engines' command names the NIXL they load."""
    lines = [""] * (last_line + 1)
    if nixl_pin is not None and found and nixl_pin[0] <= min(x.line for x in found):
        lines[nixl_pin[0] - 1] = nixl_pin[1]
    for launch in found:
        lines[launch.line - 1] += _line(launch) + " "
    if roles:
        flags = {"prefill": "--prefiller-ports", "decode": "--decoder-ports"}
        lines[last_line] = "pd_proxy " + " ".join(
            f"{flags[role]} {' '.join(str(p) for p, r in roles.items() if r == role)}"
            for role in ("prefill", "decode") if role in roles.values())
    return "\n".join(lines)


def script_engines(path: str, text: str, sections: list[tuple[str, ...]] | None = None,
                   ) -> tuple[list[Engine], list[Unreadable]] | None:
    """The P/D engines of the shell or Slurm batch script ``path`` (``text``) and the ones it cannot read, as
    :func:`pdd_operator.compat.manifests.scan` gives them for a manifest, each ``where`` naming ``path (format) line
    N``; ``None`` for text in another format, one that configures no KV transfer (and starts no engine with a
    ``--config`` file, whose settings may hold it: :func:`~pdd_operator.compat.config_files.starts_with_config_file`),
    or one in which no engine start is
    found (it stays "not checked", :func:`pdd_operator.compat.text_inputs.unreadable_text`). ``sections``: where
    ``text`` is a Markdown document's commands, the headings each of its lines falls under
    (:func:`~pdd_operator.compat.markdown_inputs.markdown_sections`): sections that each start a deployment of their own
    are read as alternatives (:func:`section_alternatives`)."""
    fmt = text_format(text)
    if fmt in ("Python launcher", "Jupyter notebook"):
        return _python_engines(path, text, fmt)
    if fmt not in READ_FORMATS or not (pd_marked(text) or starts_with_config_file(text)):
        return None
    # run as written: no variable of its own set beforehand, and none a kubelet would add (it runs on a host)
    env = ContainerEnv(kubernetes=False)
    alternatives = argument_alternatives(text, env)
    if alternatives is not None:
        return _alternatives(path, text, fmt, alternatives, arguments_truncated(text, env))
    found = launches(text, env)
    if not found:
        return None
    by_section = section_alternatives(found, sections) if sections is not None else None
    if by_section is not None:
        return _alternatives(path, text, fmt, by_section, False, how="a section of the document")
    return _engines(path, text, fmt, found)


def section_alternatives(found: list[Launch], sections: list[tuple[str, ...]]) -> list[Alternative] | None:
    """The engines ``found`` in a Markdown document's commands grouped by the sections that each hold a deployment of
    their own, or ``None`` where the document holds one. ``sections``: the headings each line of the document falls
    under (:func:`~pdd_operator.compat.markdown_inputs.markdown_sections`). Documentation shows alternatives side by side
    (a same-host 1P1D pair, then a multi-machine 2P2D setup; "Run 1P3D" then "Run 3P1D"), each with its prefill and
    its decode under sub-headings of their own: the engines are split at the deepest heading level at which every
    section that starts engines starts at least two, of which not all are KV producers nor all KV consumers
    (``kv_role``), and more than one section does. Pure."""
    def complete(group: list[Launch]) -> bool:
        roles = {m.group(1) for x in group if (m := _KV_ROLE_IN.search(" ".join(x.argv)))}
        return len(group) >= 2 and roles not in ({"kv_producer"}, {"kv_consumer"})

    best: list[list[Launch]] | None = None
    for depth in range(1, 7):
        groups: dict[tuple[str, ...], list[Launch]] = {}
        for launch in found:
            heading = sections[launch.line - 1] if 0 < launch.line <= len(sections) else ()
            groups.setdefault(heading[:depth], []).append(launch)
        if not all(complete(g) for g in groups.values()):
            break
        best = list(groups.values())
    if best is None or len(best) < 2:
        return None
    return [Alternative(launches=tuple(g), invocations=1) for g in best]


#: A ``kv_role`` producer or consumer value in an engine's words (``--kv-transfer-config`` JSON).
_KV_ROLE_IN = re.compile(r"[\"']?kv_role[\"']?\s*:\s*[\"']?(kv_producer|kv_consumer)")


def _python_engines(path: str, text: str, fmt: str) -> tuple[list[Engine], list[Unreadable]] | None:
    """The P/D engines of the Python launcher or notebook ``path`` whose settings are all literal
    (:func:`~pdd_operator.compat.python_inputs.python_launch_script`: its engine constructors and ``vllm serve``
    argument lists as the shell lines they stand for, read as a script run on one host), each ``where`` naming
    ``path (fmt) line N`` of the Python source (a notebook's code cells joined); ``None`` where it starts none that
    can be read, or one of them is not literal (the file stays "not checked", with the reason:
    :func:`pdd_operator.compat.text_inputs.unreadable_text`)."""
    code = notebook_code(text) if fmt == "Jupyter notebook" else text
    read = python_launch_script(code or "")
    if read.script is None or read.unread or not pd_marked(read.script):
        return None
    found = launches(read.script, ContainerEnv(kubernetes=False))
    return _engines(path, read.script, "shell script", found, label=fmt) if found else None


def _alternatives(path: str, text: str, fmt: str, alternatives: list[Alternative],
                  truncated: bool, how: str = "chosen by its arguments") -> tuple[list[Engine], list[Unreadable]]:
    """The engines of a launcher script whose arguments choose what it starts
    (:func:`~pdd_operator.vllm.script.argument_alternatives`): each alternative read as its own deployment (engines of
    two alternatives never pair, share a host or ports), named by the functions that start it; the engines of an
    alternative each invocation starts on its own (``launch.sh cfg prefill``, ``launch.sh cfg decode``) on hosts not
    known (never assumed shared). ``truncated``: more ways through the script's choices than were read, said as "not
    checked". ``how``: what chooses among them, said in each engine's ``where``."""
    engines: list[Engine] = []
    unreadable: list[Unreadable] = []
    pods: list[dict] = []  # every alternative's synthetic Pods kept until all are read (their id() is the engine's doc)
    for k, alt in enumerate(alternatives):
        chosen = " / ".join(alt.functions) if alt.functions else f"the engines at line {alt.launches[0].line}"
        label = (f"{fmt}, run as {chosen}" + (" (one invocation each)" if alt.invocations > 1 else "")
                 + f", {how}")
        # each invocation on a host not known; only the engines one invocation starts side by side share its host
        separate = alt.invocations > 1 or len(alt.launches) == 1
        got, cannot = _engines(path, text, fmt, list(alt.launches), separate=separate, label=label,
                               alternative=k, pods=pods)
        engines += got
        unreadable += cannot
    if truncated:
        unreadable.append(Unreadable(f"{path} ({fmt})", (
            f"it chooses the engines it starts by its own arguments ($1, $2, ...) and has more than "
            f"{MAX_ARGUMENT_PATHS} ways through those choices; the engines of the first were read, the others not")))
    return engines, unreadable


def _engines(path: str, text: str, fmt: str, found: list[Launch], *, separate: bool = False, label: str | None = None,
             alternative: int | None = None, pods: list[dict] | None = None) -> tuple[list[Engine], list[Unreadable]]:
    """The engines ``found`` in the script ``path`` (``text``, of format ``fmt``) as :func:`script_engines` reads
    them. ``separate``: each engine is started by its own run of the script, on a host not known (an alternative
    of :func:`_alternatives`); ``label`` replaces the format in each engine's ``where``; ``alternative``: the
    alternative's index, which gives its synthetic Pods their own names and owner (alternatives never pair); ``pods``:
    where the synthetic Pods are kept (a caller reading several groups keeps them all alive)."""
    found = _headless_ports(found)
    nodes = _SBATCH_NODES.search(text)
    job_nodes = int(nodes.group(1)) if nodes and (nodes.group(2) is None or nodes.group(2) == nodes.group(1)) else None
    if fmt == "shell script" and not any(_srun_words(x.wrapper) is not None for x in found):
        job_nodes = 1
    pasted = separate or _pasted_foreground(text, found)
    gpus = _SBATCH_GPUS.search(text)
    by_node: dict[tuple[str | None, str, int], list[Launch]] = {}
    for i, launch in enumerate(found):
        srun = _srun_words(launch.wrapper)
        if srun is not None:
            launch = replace(launch, env=_export(srun, launch.env))
        node = (declared_host(launch) if pasted and "ssh" not in launch.wrapper
                else _node(launch.wrapper, job_nodes))
        # engines of unknown node: one Pod each (they may or may not share a node: never assumed)
        key = (node, _image(launch.wrapper, text, launch.line, launch.inside), i if node is None else -1)
        by_node.setdefault(key, []).append(launch)
    roles = {_http_port(x.argv): x.proxy_role for x in found if x.proxy_role}
    clusters = ray_clusters(text)
    last = max(x.line for x in found) + 1
    pin = _nixl_pin(text)
    engines: list[Engine] = []
    unreadable: list[Unreadable] = []
    where = f"{path} ({label or fmt})"
    owner = path if alternative is None else f"{path} ({label})"
    suffix = "" if alternative is None else f"-a{alternative}"
    hint = script_platform_hint(text)
    gpu_host = bool(hint) and not script_shows_other_accelerator(text)
    # every synthetic Pod is kept until all are read: an engine's pod_id is its pod spec's id(), which a freed spec
    # would hand to the next node's, reading the engines of two nodes as containers of one pod
    pods = [] if pods is None else pods
    for n, ((node, image, _), group) in enumerate(by_node.items()):
        own = {p: r for p, r in roles.items() if any(_http_port(x.argv) == p for x in group)}
        spec: dict = {"hostNetwork": True, "containers": [{
            "name": f"engines-{n}", "image": image,
            "command": ["bash", "-c", _synthetic_script(group, own, last, None if _container_image(group) else pin)]}]}
        if node is not None:
            spec["nodeName"] = node
        elif (affinity := _pool_affinity(_srun_words(group[0].wrapper))) is not None and not pasted:
            spec["affinity"] = affinity  # one of several nodes srun names (an engine per Pod: never one host)
        count = int(gpus.group(1)) if gpus else _least_gpus(group, script_gpu_resource(text) in ROCM_RESOURCES)
        cluster = clusters.get(node) if node is not None else None
        if count is None and cluster is not None:
            count = cluster[0]
        if count:
            spec["containers"][0]["resources"] = {"limits": {script_gpu_resource(text): count}}
        # named by the path's checksum, not the path: words in it (a ``decode`` directory) must not name a role, and
        # two scripts checked together must not pair by name
        # an alternative's Pod is named after the function that starts it (the script's own name for the role:
        # configC1_prefill), so that its role and its partner (the same name but the role word) are read from it
        function = _function_of(text, group[0].line) if alternative is not None else None
        name = (f"script-{zlib.crc32(path.encode()):08x}-{function}" + (f"-{n}" if n else "") if function
                else f"script-{zlib.crc32(path.encode()):08x}{suffix}-{n}")
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name,
            "ownerReferences": [{"kind": "Script", "name": owner}]}, "spec": spec}
        pods.append(pod)
        got, cannot = scan(pod)
        on_host = not separate and all(host_launch(x.wrapper) for x in group)
        on = "the host it runs on" if node == "batch-host" else node
        host = f"{where} on {on}" if node else f"{where} line {group[0].line}"  # one container per node
        group_of = {}
        if cluster is not None:  # the Ray cluster the script builds on this head: the engine's pod group
            workers = cluster[1]
            group_of = {"pod_group": 1 + len(workers), "ray_cluster": True,
                        "group_worker_gpus": workers[0] if len(set(workers)) == 1 else None}
        engines += [replace(e, where=_where(e.where, where, group), container=host,
                            config=replace(e.config, workload_kind=SCRIPT_KIND, platform_hint=hint,
                                           script_docker=any(docker_run(x.wrapper) for x in group),
                                           host_gpus=gpu_host and on_host, **group_of,
                                           **_handed(e.where, group)))
                    for e in got]
        unreadable += [replace(u, where=_where(u.where, where, group)) for u in cannot]
    counted = {x.line: x for x in found if x.repeats}  # the synthetic script holds one pass: its count is said here
    unreadable += [repeats_unread(f"{where} line {line}", x) for line, x in counted.items()]
    return engines, unreadable


#: A ``&`` that runs the command before it in the background (not ``&&``, ``2>&1``, ``&>``): bash(1), Lists.
_BACKGROUND = re.compile(r"(?<![&>])&(?![&>\d])")


def _pasted_foreground(text: str, found: list[Launch]) -> bool:
    """Whether ``text`` starts its engines ``found`` one after another in the foreground: two engines or more, no
    ``&`` anywhere in the script, no ``srun``. ``vllm serve`` runs until it is stopped, so run as written the second
    engine would only start once the first has exited: such a file is the command pair pasted in a bug report
    (vllm-project/vllm#22965: "Launch Prefiller" / "Launch Decoder", one per machine), each command run in its own
    terminal, on one host or on two. Where each runs is then not known (never assumed shared), unless the engines
    advertise one routable address as their own (:func:`declared_host`): then on that host. A ``docker run -d``
    returns once its container is started (Docker's "docker container run" reference, ``--detach``): engines
    started so run side by side on the script's host, as ``&`` would."""
    return (len(found) > 1 and not _BACKGROUND.search(text)
            and all(_srun_words(x.wrapper) is None and not ((d := docker_run(x.wrapper)) and d.detach) for x in found))


#: Addresses that name no one host: the wildcard and loopback (every host has its own), as an engine may declare them.
_NO_HOST = re.compile(r"^(0\.0\.0\.0|::|\[::\]|localhost|127(\.\d+){3}|::1|\*)$")


def declared_host(launch: Launch) -> str | None:
    """The host an engine of a pasted command pair declares it runs on, as ``"host <address>"``: the address it
    advertises as its own to the other role, MoRIIOConnector's ``kv_connector_extra_config.host_ip``
    (``resolve_host_ip`` takes it before ``get_ip()``: moriio_common.py 0.24.0 lines 189-198, 0.34.0 the same; the
    peer dials it from kv_transfer_params) or ``VLLM_NIXL_SIDE_CHANNEL_HOST`` (the side channel binds and advertises
    it: nixl scheduler/worker, every release with NIXL), from the command's environment or its ``docker run -e``.
    Two engines that advertise one routable address run on one host (an engine advertising another host's address
    is never reached), so they share its network namespace. ``None`` where the engine declares none, or only a
    wildcard, loopback or unknown value (which name no one host)."""
    found: list[str] = []
    argv = list(launch.argv)
    for i, word in enumerate(argv):
        raw = argv[i + 1] if word == "--kv-transfer-config" and i + 1 < len(argv) else (
            word.split("=", 1)[1] if word.startswith("--kv-transfer-config=") else None)
        if raw is None:
            continue
        try:
            config = json.loads(raw)
        except ValueError:
            continue
        extra = config.get("kv_connector_extra_config") if isinstance(config, dict) else None
        if isinstance(config, dict) and config.get("kv_connector") == "MoRIIOConnector" and isinstance(extra, dict):
            found.append(str(extra.get("host_ip") or ""))
    docker = docker_run(launch.wrapper)
    env = {**(docker.env if docker else {}), **launch.env}
    found.append(env.get("VLLM_NIXL_SIDE_CHANNEL_HOST", ""))
    hosts = [h.strip() for h in found if h and h.strip() and not _NO_HOST.match(h.strip()) and not unknown_names(h)]
    return f"host {hosts[0]}" if hosts else None


#: ``ssh HOST`` (after its options) on a line of the script: the host the rest of the line runs on.
_SSH_HOST = re.compile(r"\bssh\s+(?:-\S+\s+)*([^\s\"']+)")
#: ``ray start`` and its options up to the end of that command (a quote, ``&``, ``;`` or ``|``).
_RAY_START = re.compile(r"\bray\s+start\b([^\"'&;|]*)")


def _ray_option(args: str, name: str) -> str | None:
    """The value of ``--name V`` / ``--name=V`` among ``ray start``'s ``args``, or ``None``."""
    match = re.search(rf"--{name}(?:=|\s+)(\S+)", args)
    return match.group(1) if match else None


def ray_clusters(text: str) -> dict[str, tuple[int | None, list[int | None]]]:
    """The Ray clusters a host script builds over several hosts: head host -> (the head's ``--num-gpus``, the
    ``--num-gpus`` of each other host that joins it), for heads that at least one other host joins.

    A line's host is its ``ssh HOST`` (else the script's own, ``batch-host``); ``ray start --head`` makes it a head
    (known also by its ``--node-ip-address``), ``ray start --address H:PORT`` on another host joins H's cluster
    (Ray's "ray start" CLI). vLLM's Ray executor places an engine's TP x PP ranks on the cluster's GPUs, so an
    engine started with ``--distributed-executor-backend ray`` on the head spans the joined hosts where its ranks
    exceed the head's GPUs (v1/executor/ray_utils.py ``initialize_ray_cluster``: one bundle per rank)."""
    heads: dict[str, str] = {}  # head host or its node IP -> head host
    head_gpus: dict[str, int | None] = {}
    joins: list[tuple[str, str, int | None]] = []  # (joining host, head address, its GPUs)
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        ssh = _SSH_HOST.search(line)
        host = ssh.group(1).rsplit("@", 1)[-1] if ssh else "batch-host"
        for match in _RAY_START.finditer(line):
            args = match.group(1)
            gpus_text = _ray_option(args, "num-gpus")
            gpus = int(gpus_text) if gpus_text and gpus_text.isdigit() else None
            if re.search(r"--head\b", args):
                heads[host] = host
                if (ip := _ray_option(args, "node-ip-address")) is not None:
                    heads[ip] = host
                head_gpus[host] = gpus
            elif (address := _ray_option(args, "address")) is not None:
                joins.append((host, address.rsplit(":", 1)[0], gpus))
    clusters: dict[str, tuple[int | None, list[int | None]]] = {}
    for host, address, gpus in joins:
        head = heads.get(address)
        if head is not None and host != head and host not in heads:
            clusters.setdefault(head, (head_gpus.get(head), []))[1].append(gpus)
    return clusters


def _headless_ports(found: list[Launch]) -> list[Launch]:
    """``found`` with each ``--headless`` launch that has a role given an ``--port`` no other launch uses.

    The synthetic pod's proxy line hands roles by HTTP port (:func:`_synthetic_script`), but a headless launch
    serves no HTTP (entrypoints/cli/serve.py ``run_headless``: engine cores only), so its ``--port``, often vLLM's
    default on every worker of both roles, names nothing; the role it inherits from its leader
    (:func:`pdd_operator.vllm.script.dp_group_roles`) is carried by a port of its own instead. The rules never read
    a headless launch's HTTP port (:attr:`~pdd_operator.compat.pair.RoleConfig.other_ports`)."""
    used = {_http_port(x.argv) for x in found}
    out = []
    spare = max(used | {0}) + 1
    for x in found:
        if x.proxy_role and "--headless" in x.argv:
            while spare in used:
                spare += 1
            argv = [w for i, w in enumerate(x.argv) if w != "--port" and not w.startswith("--port=")
                    and not (i > 0 and x.argv[i - 1] == "--port")]
            x = replace(x, argv=(*argv, "--port", str(spare)))
            used.add(spare)
        out.append(x)
    return out


def _least_gpus(group: list[Launch], rocm: bool = False) -> int | None:
    """The fewest GPUs the node of ``group`` holds where every engine names its devices by ordinal in a literal
    ``CUDA_VISIBLE_DEVICES`` (the highest ordinal + 1: CUDA finds no device past the node's), else ``None``. On a
    ROCm host (``rocm``: the script's GPUs are AMD's, :func:`~pdd_operator.vllm.block_size.script_gpu_resource`) an
    engine without ``CUDA_VISIBLE_DEVICES`` names them in ``HIP_VISIBLE_DEVICES``, which vLLM's ROCm platform copies
    into ``CUDA_VISIBLE_DEVICES`` at import (vllm/platforms/rocm.py: module level in 0.11.0,
    ``_sync_hip_cuda_env_vars`` at lines 114-134 in 0.23.0)."""
    ids = [x.env.get("CUDA_VISIBLE_DEVICES", x.env.get("HIP_VISIBLE_DEVICES") if rocm else None) for x in group]
    if not ids or any(v is None or not re.fullmatch(r"\d+(,\d+)*", v) for v in ids):
        return None
    return max(int(i) for v in ids if v for i in v.split(",")) + 1


def _handed(old: str, group: list[Launch]) -> dict:
    """``{"host_devices": ...}`` for the engine at ``old`` (its synthetic Pod's ``where``, naming its line) where its
    launch is a ``docker run`` whose ``--gpus`` hands the container host GPUs by ordinal
    (:attr:`~pdd_operator.vllm.script.DockerRun.gpu_devices`): inside the container those are devices 0, 1, ... in
    that order, whatever their host ordinals; ``{}`` otherwise."""
    match = re.search(r" line (\d+)(?: #\d+)?$", old)
    launch = next((x for x in group if match and x.line == int(match.group(1))), group[0] if len(group) == 1 else None)
    docker = docker_run(launch.wrapper) if launch is not None else None
    return {"host_devices": docker.gpu_devices} if docker is not None and docker.gpu_devices else {}


def _where(old: str, where: str, group: list[Launch]) -> str:
    """``old`` (``Pod/script-<crc32 of the path>-0 ... line 7 #2``) as ``<file> (<format>) line 7 #2``; a Pod
    of one engine has no line in ``old``: its engine's line is named."""
    match = re.search(r" line \d+(?: #\d+)?$", old)
    return where + (match.group(0) if match else f" line {group[0].line}")
