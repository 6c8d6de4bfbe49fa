"""Input files that are not Kubernetes manifests but configure prefill/decode KV transfer (a Slurm batch script, a shell
launch script, a systemd unit, a Nomad job in HCL): reported as "not checked", with the reason, instead of as
unreadable YAML (an input error, exit 2) or as an empty input (exit 4).

These files do hold vllm serve lines, but as a shell, a service manager or a scheduler runs them: environment from
``export``, ``srun --export=...``, ``Environment=`` or ``env { }`` blocks, values from shell variables and arithmetic
(NVIDIA/cloudai's vllm-disagg.sbatch: ``VLLM_NIXL_SIDE_CHANNEL_PORT=$((5557 + SLURM_JOB_ID % 1000))``), hosts from
the allocation, and an image or install whose vLLM version is seldom named. The rules read engines as Kubernetes
containers; what they would say of such a file depends on that runtime, so the file is named with its format and
what to do to have it checked. A shell or Slurm batch script whose engines can be found is read instead
(:mod:`pdd_operator.compat.script_inputs`); this record is for the rest.
"""

from __future__ import annotations

import re
import shlex

from pdd_operator.compat.config_files import starts_with_config_file
from pdd_operator.compat.manifests import (
    SIMULATOR,
    other_pd_engine_script,
    pd_marked,
    pd_signal,
    platform_pd_launcher,
)
from pdd_operator.compat.python_inputs import notebook_code, python_launch_script
from pdd_operator.vllm.script import docker_run, entry_point, image_engine, looks_like_proxy

#: A Jinja2 statement or comment tag (Jinja's template designer documentation: ``{% set %}``, ``{% if %}``, ``{% for %}``,
#: ``{% macro %}``, ``{% include %}`` ... with the optional ``-`` whitespace control, and ``{# ... #}`` comments), which
#: no Go template (Helm) and no YAML has: the generator templates that write P/D deployments from a context at run time
#: (ai-dynamo/aiconfigurator src/aiconfigurator/generator/config/backend_templates/vllm/llm-d-values.yaml.j2,
#: llm-d-kcustomization.yaml.j2, k8s_deploy.yaml.j2 at 110ad77b, 6fcd12ee, 1089dfa8; Ansible's ``template`` module
#: sources). Set 124. Only a tag that starts a line counts: a chat template passed inline (``--chat-template '{% for
#: message in messages %}...'``) leaves a script a script.
_JINJA = re.compile(r"^\s*(?:\{%-?\s*(?:set|if|elif|else|endif|for|endfor|macro|endmacro|call|block|extends|include|import"
                    r"|from|with|filter|raw)\b|\{#)", re.M)

#: (format, how to recognise it in the file's text), first match wins. Sources: Helm's chart template guide (``{{
#: .Values.x }}``, ``{{- include ... }}`` actions), Slurm sbatch(1) (``#SBATCH`` lines),
#: systemd.unit(5)/systemd.service(5) (``[Service]`` section, ``ExecStart=``), Nomad job specification (HCL
#: ``job "<name>" {``), the Terraform language (HCL blocks ``resource "<type>" "<name>" {``, ``data``, ``module``,
#: ``provider``: kubernetes_deployment, kubernetes_manifest, helm_release resources), Ansible (a playbook's plays, list
#: items with ``hosts:``; a role's task file, items keyed by a module's fully qualified name such as
#: ``ansible.builtin.shell:``), POSIX sh (``#!`` interpreter line, ``export``, a command line starting with ``vllm``, or with
#: inline ``NAME=value`` assignments before it, as the ``vllm serve`` pairs pasted in bug reports are: ``VLLM_USE_V1=1
#: CUDA_VISIBLE_DEVICES=0 vllm serve ...``, vllm-project/vllm#22965; a wrapper may stand between, ``viztracer -o f vllm``;
#: vLLM's Rust frontend ``vllm-rs serve``, :data:`pdd_operator.vllm.script.RUST_FRONTEND`; another engine's server
#: command line, ``python3 -m sglang.launch_server`` / ``sglang serve`` / ``trtllm-serve``, as bug reports paste an
#: SGLang P/D pair, sgl-project/sglang#18389; a Python file run with inline ``NAME=value`` assignments,
#: ``VLLM_ENABLE_V1_MULTIPROCESSING=0 CUDA_VISIBLE_DEVICES=0 python3 "$SCRIPT_DIR/prefill_example.py"`` as vLLM
#: 0.10.0's examples/offline_inference/disaggregated-prefill-v1/run.sh does, with no ``#!`` line; a Python module run
#: with options, ``python3 -m disaggregated.prefill_worker --model ...``, or any command continued with a trailing
#: backslash onto an ``--option`` line, as the commands users paste into issues are, with notes such as ``GPU 0:``
#: between them that no YAML reads: triton-inference-server/triton_distributed#195, set 130).
_FORMATS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Helm chart template", re.compile(r"\{\{-?\s*(\.Values|\.Release|\.Chart|include\s|toYaml\s|range\s)")),
    ("Jinja template", _JINJA),
    ("Slurm batch script", re.compile(r"^#SBATCH\s", re.M)),
    ("systemd unit", re.compile(r"^\[(Service|Unit)\]\s*$[\s\S]*^ExecStart\s*=", re.M)),
    ("Nomad job (HCL)", re.compile(r"^\s*job\s+\"[^\"]+\"\s*\{", re.M)),
    ("Terraform configuration (HCL)", re.compile(r'^\s*(?:resource|data|module|provider)\s+"[\w.-]+"(?:\s+"[\w.-]+")?\s*\{',
                                                 re.M)),
    ("Ansible playbook or task file", re.compile(r"^-\s+(?:\w+:[^\n]*\n\s+)*?hosts:\s*\S|^\s*(?:-\s+)?(?:ansible\.builtin|"
                                                 r"ansible\.legacy|community\.docker|kubernetes\.core|containers\.podman)"
                                                 r"\.\w+:", re.M)),
    ("shell script", re.compile(r"\A#!.*\b(ba|z|da|k)?sh\b|^\s*(export\s+\w+=|srun\s|(\S*/)?(python3?\s+-m\s+)?vllm(-rs)?[\s.])"
                                r"|^\s*(?:sudo\s+)?(?:docker|podman)(?:\s+container)?\s+run\s"
                                r"|^\s*(?:[A-Za-z_]\w*=\S*\s+)+(?:\S*/)?python3?\s+[\"']?\S+\.py\b"
                                r"|^\s*(?:[A-Za-z_]\w*=\S*\s+)+(?:\S+\s+)*?(?:\S*/)?(?:python3?\s+-m\s+)?vllm(?:-rs)?[\s.]"
                                r"|^\s*(?:[A-Za-z_]\w*=\S*\s+)*(?:\S*/)?(?:python3?\s+-m\s+sglang\.launch_server|sglang\s+serve"
                                r"|trtllm-serve)\s"
                                r"|^\s*(?:[A-Za-z_]\w*=\S*\s+)*(?:\S*/)?python3?(?:\.\d+)?\s+-m\s+[\w.]+\s+(?:--?[\w-]|\\$)"
                                r"|^\s*(?:[A-Za-z_]\w*=\S*\s+)*[\w./][\w./-]*(?:[ \t]+[^\s:]\S*)*[ \t]+\\\n\s*--[\w-]",
                                re.M)),
)


#: A shell prompt that starts a line of a pasted terminal session (``$ cmd``, ``(venv) $ cmd``, ``user@host:~$ cmd``,
#: ``root@host:/w# cmd``; bash(1) PROMPTING, the default PS1 ``\u@\h:\w\$``): group 1 is the command. No shell script
#: starts a line with ``$`` and a blank, and no YAML key does.
_PROMPT = re.compile(r"^\s*(?:\([\w.-]+\)\s*)?(?:[\w.-]+@[\w.-]+(?::\S*)?\s*[$#]|\$)\s+(\S.*)$")
#: The continuation prompt (bash's PS2, ``> ``) of a command continued onto the next line.
_PS2 = re.compile(r"^\s*>\s?")


def transcript_commands(text: str) -> str | None:
    """The commands of ``text`` when it is a pasted terminal session (some line starts with a shell prompt,
    :data:`_PROMPT`), as a shell script: each prompted line without its prompt, the lines it continues onto with a
    trailing backslash (without a ``> `` continuation prompt), and every other line (the commands' output:
    ``nvidia-smi`` tables, ``GPU 0: NVIDIA H100 ...``, logs) left empty, so that line N of the script is line N of
    the file. ``None`` for text with no prompted line (a script, a manifest). Pure."""
    lines = text.splitlines()
    out: list[str] = []
    prompted = False
    continued = False
    for line in lines:
        if continued:
            out.append(_PS2.sub("", line, count=1))
        elif (m := _PROMPT.match(line)) is not None:
            prompted = True
            out.append(m.group(1))
        else:
            out.append("")
        continued = out[-1].rstrip().endswith("\\") and out[-1].strip() != ""
    return "\n".join(out) + "\n" if prompted else None


#: The formats whose text becomes YAML once rendered: a file in one of them that does not parse is no broken manifest.
_TEMPLATE_FORMATS = ("Helm chart template", "Jinja template")

#: A Kubernetes manifest's first keys at the start of a line: text with both that is not valid YAML is a broken
#: manifest (its YAML error is the useful answer), unless it is a template (:data:`_TEMPLATE_FORMATS`).
_MANIFEST = (re.compile(r"^apiVersion:\s*\S", re.M), re.compile(r"^kind:\s*\S", re.M))


#: Python source (the Python language reference: ``import``/``from ... import`` statements at the start of a line,
#: ``def``/``class`` definitions; a ``#!`` line naming python): the launchers that build the ``vllm serve`` (or
#: ``python -m vllm.entrypoints.openai.api_server``) argument lists at run time, as vLLM 0.34.0's
#: tests/v1/kv_connector/rocm_pd_accuracy_utils.py and Clarifai/runners-examples'
#: llm/vllm-lmcache-disaggregated-prefill/1/model.py do (set 85).
_PY_SHEBANG = re.compile(r"\A#!.*\bpython")
_SH_SHEBANG = re.compile(r"\A#!.*\b(ba|z|da|k)?sh\b")
_PY_IMPORT = re.compile(r"^(?:from\s+[\w.]+\s+import\s|import\s+[\w.]+)", re.M)
_PY_DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+\w+\s*[(:]", re.M)


def _is_python(text: str) -> bool:
    """``text`` is Python source: a python ``#!`` line, or (without a shell's ``#!`` line) an import statement and a
    ``def``/``class`` at the start of lines. A shell script that pipes Python through a heredoc keeps its shell
    ``#!`` line or its shell commands and is not taken for Python unless it also defines functions the Python way."""
    if _PY_SHEBANG.search(text):
        return True
    return not _SH_SHEBANG.search(text) and bool(_PY_IMPORT.search(text)) and bool(_PY_DEF.search(text))


def text_format(text: str) -> str | None:
    """The name of the non-manifest format ``text`` is written in ("Jupyter notebook" for a notebook's JSON,
    :func:`~pdd_operator.compat.python_inputs.notebook_code`; one of :data:`_FORMATS`, or "Python launcher" for
    Python source that no earlier format claims: :func:`_is_python`), or ``None`` for text in none of them, and for a
    manifest that does not parse (``apiVersion:`` and ``kind:`` lines) that is no template (:data:`_TEMPLATE_FORMATS`)."""
    if notebook_code(text) is not None:
        return "Jupyter notebook"
    fmt = next((name for name, pattern in _FORMATS if pattern.search(text)), None)
    if fmt in (None, "shell script") and _is_python(text):
        fmt = "Python launcher"
    if fmt not in _TEMPLATE_FORMATS and all(p.search(text) for p in _MANIFEST):
        return None
    return fmt


#: The formats of :data:`_FORMATS` that a shell, service manager or scheduler runs (not a chart template, whose text
#: becomes YAML once rendered, nor Python, whose command lines are built when it runs).
_RUN_FORMATS = ("Slurm batch script", "shell script", "systemd unit", "Nomad job (HCL)")


def run_format(text: str) -> str | None:
    """The format of ``text`` when it is a script, unit or job file that a shell, service manager or scheduler runs
    (one of :data:`_RUN_FORMATS`, by :func:`text_format`), else ``None``.

    Such a file is no YAML document, though its text may happen to parse as one (a plain ``vllm serve`` line is a YAML
    string; a multi-line quoted JSON argument, ``--speculative_config '{\\n "model": ...}'`` as ai-dynamo/dynamo's
    examples/backends/vllm/launch/agg_spec_decoding.sh at f8b33ac writes it, is not): where it configures no
    prefill/decode KV transfer (:func:`unreadable_text` gives no record) it holds nothing to check either way, never
    an unreadable input. Pure."""
    fmt = text_format(text)
    return fmt if fmt in _RUN_FORMATS else None


#: A container engine's run command at the start of a line (``docker run``, ``sudo podman run``): a file of such
#: commands is a shell script even without a shebang, as vendors' guides give their P/D launch (Qualcomm vllm-qaic
#: docs/docs/user_guide/features/disaggregated_serving.md: ``docker pull`` then ``docker run ... <image> --model ...``).
_CONTAINER_RUN = re.compile(r"^\s*(?:sudo\s+)?(?:docker|podman)\s+run\s", re.M)

#: A command that runs another script file: ``bash di.sh``, ``sh -x run.sh``, ``srun ... bash di.sh``, ``./di.sh``,
#: ``source env.sh`` / ``. env.sh`` (bash(1)), ``python3 "$SCRIPT_DIR/prefill_example.py"`` (vLLM's offline
#: disaggregated-prefill runner, examples/offline_inference/disaggregated-prefill-v1/run.sh 0.10.0, whose engines
#: are the LLM(...) of the two Python files it runs); group 1 is the script's path.
_RUNS_SCRIPT = re.compile(r"(?:^|[\s;&|(])(?:(?:ba|z|da|k)?sh\s+(?:-\w+\s+)*|source\s+|\.\s+|(?=\./)"
                          r"|(?:\S*/)?python3?(?:\.\d+)?\s+(?:-[A-Za-z]+\s+)*[\"']?)"
                          r"((?:\./)?[\w./${}-]+\.(?:sh|bash|slurm|sbatch|py))\b", re.M)
#: Words that say a script is about a prefill/decode split (vllm-project/vllm#34975's di.slurm: ``PREFILL_NODE``,
#: ``DECODE_NODE``, "Node 0 = prefill + proxy, Node 1 = decode").
_PD_WORDS = (re.compile(r"prefill", re.I), re.compile(r"decode", re.I))


def _delegated_pd_script(text: str) -> str | None:
    """The script file that ``text`` (a Slurm batch or shell script configuring no KV transfer itself) runs to start
    its prefill and decode engines, or ``None`` when it runs none or names no prefill and decode.

    A P/D proxy it runs (:func:`~pdd_operator.vllm.script.looks_like_proxy`: ``python3 dp_proxy_demo.py --prefill
    host:8100 --decode host:8801``, the request router of jikunshang/vllm's pd_distributed/start_dp_proxy.sh at
    99a6441, which only forwards requests to servers started elsewhere) starts no engine: it is passed over, and a
    script that runs nothing else starts none (nothing to check, as a client-only file)."""
    lines = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    found = next((m for m in _RUNS_SCRIPT.finditer(lines) if not looks_like_proxy([m.group(1).rsplit("/", 1)[-1]])),
                 None)
    return found.group(1) if found and all(p.search(text) for p in _PD_WORDS) else None


#: A line (not a comment) of a script that gives an engine its role through ``VLLM_DISTRIBUTED_KV_ROLE`` (an inline
#: ``NAME=value`` prefix or an ``export``): the variable of the disaggregation prototype of vllm-project/vllm#8498,
#: never merged, which Mooncake's ``kvcache-ai/vllm`` ``mooncake-integration`` fork over vLLM 0.6.2 carries
#: (kvcache-ai/Mooncake doc/zh/vllm-integration.md at 348afd7: ``VLLM_DISTRIBUTED_KV_ROLE=producer``
#: / ``consumer`` with ``MASTER_ADDR``, no ``--kv-transfer-config``). No released vLLM reads it: none of the sources
#: of 0.9.0-0.34.0 names it; released vLLM configures the transfer with ``--kv-transfer-config``.
_FORK_KV_ROLE = re.compile(r"^(?!\s*#)[^\n]*\bVLLM_DISTRIBUTED_KV_ROLE=[\"']?(producer|consumer|both)\b", re.M)


#: A Python module run as a program (``python3 -m disaggregated.prefill_worker``, python(1) ``-m``): group 1 is the
#: module. Launchers of their own (triton-inference-server/triton_distributed's disaggregated.prefill_worker /
#: decode_worker, issue #195) pass vLLM engine flags to code that is not in the file; vLLM's, SGLang's, TensorRT-LLM's
#: and Dynamo's own modules are read (or named) elsewhere (:data:`_OWN_MODULES`).
_PY_MODULE = re.compile(r"(?:^|[\s;&|(])(?:\S*/)?python3?(?:\.\d+)?\s+(?:-[A-Za-z]+\s+)*-m\s+([\w.]+)", re.M)
_OWN_MODULES = re.compile(r"(?:vllm|sglang|tensorrt_llm|dynamo|pip|venv|uv)(?:\.|$)")
#: A vLLM server started in a command line (``vllm serve``, ``python -m vllm.entrypoints...``).
_VLLM_START = re.compile(r"(?:^|[\s;&|(])(?:\S*/)?(?:python3?(?:\.\d+)?\s+-m\s+)?vllm(?:-rs)?(?:\s+serve\b|\.)", re.M)


def _module_launcher(text: str) -> str | None:
    """The first Python module of its own that the script ``text`` runs (:data:`_PY_MODULE`, not one of
    :data:`_OWN_MODULES`) where no vLLM server is started in it (:data:`_VLLM_START`), else ``None``."""
    lines = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    if _VLLM_START.search(lines):
        return None
    return next((m.group(1) for m in _PY_MODULE.finditer(lines) if not _OWN_MODULES.match(m.group(1))), None)


def _python_reason(fmt: str, text: str) -> str:
    """Why the Python launcher or notebook ``text`` (of format ``fmt``) is not checked: the engine constructors and
    argument lists it holds whose values are not literal (:func:`~pdd_operator.compat.python_inputs.
    python_launch_script`), or, where it holds none, that its command lines are built when it runs."""
    code = notebook_code(text) if fmt == "Jupyter notebook" else text
    what = ("a Jupyter notebook whose code cells start" if fmt == "Jupyter notebook"
            else "a Python program that starts")
    unread = python_launch_script(code or "").unread
    if unread:
        return (f"it is {what} the prefill and decode engines, and not every setting of theirs is literal in it "
                f"({'; '.join(unread[:3])}): these rules read Python without running it; write the values in "
                "(or write out the vllm serve commands it runs, as a shell script) to have them checked")
    return (f"it is {what} the prefill and decode engines, but their command lines (model, ports, devices, "
            "--kv-transfer-config) are built when it runs, from f-strings, values read from files and function "
            "arguments; these rules read Python without running it (only literal LLM(...), EngineArgs(...) and "
            "AsyncEngineArgs(...) keywords and literal [\"vllm\", \"serve\", ...] lists); write out the vllm serve "
            "commands it builds (as a shell script, or as the commands of Kubernetes containers, one per engine, with "
            "their environment) to have them checked")


#: Words of a guide or script that say it deploys prefill and decode apart (vllm-ascend#857's "How to use
#: disaggregated_prefill" and its "PD separation", a container named ``disaggregeted_prefill``; "1P1D", "xPyD",
#: "P/D disaggregation", "disaggregated serving"): group 0 names what was seen.
_PD_SHOWN = re.compile(r"disaggreg\w*[\s_-]*(?:prefill|serving|inference)|\bP/?D[\s_-]*(?:separation|disaggreg\w*)"
                       r"|prefill[\s/_-]*(?:and[\s_-]*)?decode[\s_-]*(?:disaggreg\w*|separation|split)|\b\d+P\d+D\b"
                       r"|\bxPyD\b", re.I)
#: A shell assignment of a value (``IMAGE=quay.io/ascend/vllm-ascend:main``, after ``export``): groups name, value.
_ASSIGNED = re.compile(r"^\s*(?:export\s+)?([A-Za-z_]\w*)=[\"']?([^\s\"']+)", re.M)


def engineless_containers(script: str) -> list[str]:
    """The ``docker run`` / ``podman run`` commands of the shell ``script`` that start a container of a vLLM image
    (its name holds ``vllm``, after the script's own assignments: ``export IMAGE=...vllm-ascend:main``) but no
    vLLM engine in it, each as a phrase naming what was seen: a container whose command is a shell or ``sleep``
    (the engines typed into it by hand later, vllm-ascend#857's guide), or one whose text stops before its image
    (:func:`~pdd_operator.vllm.script.docker_run` finds none) while the script names a vLLM image. A run whose
    command (:func:`~pdd_operator.vllm.script.entry_point`) or image ENTRYPOINT
    (:func:`~pdd_operator.vllm.script.image_engine`) starts an engine is not listed: the script reader reads it.
    Comment lines are left out. Pure."""
    lines = [line for line in script.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    values = dict(_ASSIGNED.findall(joined))
    images = [v for v in values.values() if "vllm" in v.lower() and ("/" in v or ":" in v)]
    found = []
    for line in joined.splitlines():
        if not _CONTAINER_RUN.match(line):
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split()
        words = [re.sub(r"\$\{?(\w+)\}?", lambda m: values.get(m.group(1), m.group(0)), w) for w in words]
        docker = docker_run(words)
        name = next((w.split("=", 1)[1] if "=" in w else words[i + 1] for i, w in enumerate(words[:-1])
                     if w.split("=", 1)[0] == "--name"), "")
        named = f" named {name}" if name else ""
        if docker is None:
            if images:
                found.append(f"a docker run{named} of {images[0]} whose command the text stops before (its image "
                             "and command are not in it)")
            continue
        if "vllm" not in docker.image.lower() or entry_point(docker.command) or image_engine(docker):
            continue
        command = " ".join(docker.command) or "the image's own"
        found.append(f"a docker run{named} of {docker.image} whose command ({command}) starts no vLLM engine")
    return found


def pd_shown(text: str) -> str | None:
    """The words of ``text`` (a guide with its prose, a script with its comments) that say it deploys prefill and
    decode apart (:data:`_PD_SHOWN`), else ``None``. Pure."""
    m = _PD_SHOWN.search(text)
    return m.group(0) if m else None


def unreadable_text(path: str, text: str, commands: bool = False,
                    document: str | None = None) -> dict[str, str] | None:
    """A "not checked" record (``{"object": ..., "reason": ...}``, as ``pdd check`` lists them) for the file ``path``
    whose ``text`` is no YAML mapping but configures prefill/decode KV transfer (a KV connector or ``kv_role``), or
    is a Slurm batch or shell script that runs another script to start its prefill and decode engines
    (:func:`_delegated_pd_script`) or that gives its engines roles through the unreleased
    ``VLLM_DISTRIBUTED_KV_ROLE`` (:data:`_FORK_KV_ROLE`), or that runs a platform plugin's own P/D launcher
    (:func:`~pdd_operator.compat.manifests.platform_pd_launcher`: Qualcomm's ``qaic_disagg``), or that starts another
    engine's disaggregated servers (:func:`~pdd_operator.compat.manifests.other_pd_engine_script`: SGLang, TensorRT-LLM),
    or that starts vLLM
    with a ``--config`` file (:func:`~pdd_operator.compat.config_files.starts_with_config_file`: the KV transfer
    settings may all be in it; the script's engines are then read, each one whose file is not here not checked), or
    ``None`` for a file that names none or is in none of the formats of :func:`text_format` (it stays an input error,
    or nothing to check). ``commands``: ``text`` is known to be shell commands (a README's:
    :func:`~pdd_operator.compat.markdown_inputs.markdown_commands`), a shell script where no other format is
    recognised in it. Any P/D signal (:func:`~pdd_operator.compat.manifests.
    pd_signal`) of a script none of the readers above reads makes it "not checked", naming the signal, and so does a
    container of a vLLM image that starts no engine (:func:`engineless_containers`) where the ``document`` (the
    Markdown the commands are from, else ``text``) says it deploys prefill and decode apart (:func:`pd_shown`)."""
    fmt = text_format(text)
    fmt = "shell script" if commands and fmt is None else fmt
    signal = (pd_signal(text) if fmt in ("Slurm batch script", "shell script") and not pd_marked(text)
              and not platform_pd_launcher(text) and not other_pd_engine_script(text) else None)
    if signal is not None:  # a P/D deployment whose engines its own programs start: never "nothing to check"
        return {"object": f"{path} ({fmt})", "reason": (
            f"it starts a prefill/decode deployment ({signal}), but no vLLM engine command is in it: the programs it "
            "runs build the engines, and their vLLM arguments, KV connector and vLLM build are in those programs' "
            "code or configuration, not in these files; give the vllm serve commands (or the Kubernetes containers) "
            "they amount to, with the vLLM release, to have them checked")}
    containers = (engineless_containers(text) if fmt in ("Slurm batch script", "shell script") and not pd_marked(text)
                  else [])
    shown = pd_shown(document if document is not None else text) if containers else None
    if shown is not None:  # the engines are started by hand inside the container: a P/D deployment not in the file
        return {"object": f"{path} ({fmt})", "reason": (
            f"it shows a prefill/decode deployment (\"{shown}\") started from {containers[0]}: the engines are "
            "started later inside the container, by commands these files do not hold, so their vLLM arguments, KV "
            "connector and release are not here; give the vllm serve commands run in it (or the Kubernetes "
            "containers), with the vLLM release, to have them checked")}
    if fmt in ("Slurm batch script", "shell script") and not pd_marked(text):
        inner = _delegated_pd_script(text)
        if inner:
            return {"object": f"{path} ({fmt})", "reason": (
                f"its prefill and decode engines are started by {inner}, which it runs but which is not in these "
                f"files: nothing of their configuration is here; check {inner} itself (with this file's variables "
                "written into it) to have them checked")}
    if fmt in ("Slurm batch script", "shell script") and not pd_marked(text) and _FORK_KV_ROLE.search(text):
        return {"object": f"{path} ({fmt})", "reason": (
            "its engines take their prefill/decode role from VLLM_DISTRIBUTED_KV_ROLE, the variable of the unmerged "
            "disaggregation prototype of vllm-project/vllm#8498 (Mooncake's kvcache-ai/vllm mooncake-integration fork "
            "over vLLM 0.6.2): no released vLLM reads it and it names no --kv-transfer-config, so no release's code "
            "describes this transfer; run a released vLLM with --kv-transfer-config to have it checked")}
    launcher = (platform_pd_launcher(text) if fmt in ("Slurm batch script", "shell script")
                or (fmt is None and _CONTAINER_RUN.search(text)) else None)
    if launcher and not pd_marked(text):
        return {"object": f"{path} ({fmt or 'shell script'})", "reason": f"it runs {launcher[0]}: {launcher[1]}"}
    other = other_pd_engine_script(text) if fmt in ("Slurm batch script", "shell script") else None
    if other and other[0] != SIMULATOR and not pd_marked(text):  # a simulator's script starts no engine
        return {"object": f"{path} ({fmt})", "reason": (
            f"its prefill and decode servers are {other[0]}'s, not vLLM's: {other[1]}; no vLLM engine is in this "
            "file to check")}
    module = _module_launcher(text) if fmt in ("Slurm batch script", "shell script") and pd_marked(text) else None
    if module:
        return {"object": f"{path} ({fmt})", "reason": (
            f"its prefill and decode engines are started by python -m {module}, a launcher of its own that takes the "
            "engine flags (--kv-transfer-config ...) and builds the vLLM engines in its code, which is not in these "
            "files, nor is the vLLM build it runs (a fork's patch may define its own fields); give the vllm serve "
            "commands, or the Kubernetes containers, that it amounts to, with the vLLM release, to have them checked")}
    configured = (fmt in ("Slurm batch script", "shell script")  # its engines' settings may all be in the file
                  and starts_with_config_file(text))
    # a Jinja template's connector and roles may all come from its context: naming both roles is enough
    roles = fmt == "Jinja template" and all(p.search(text) for p in _PD_WORDS)
    if fmt is None or not (pd_marked(text) or configured or roles):
        return None
    if fmt == "Jinja template":
        return {"object": f"{path} ({fmt})", "reason": (
            "it is a Jinja2 template (a generator's or Ansible's source), not a manifest: it writes prefill and decode "
            "engines, but their model, image, parallelism, arguments and KV transfer configuration are filled in from "
            "the context it is rendered with ({% set %}/{% if %}/{% for %} statements and {{ ... }} expressions), "
            "which these rules do not have; render it (the generator's output, or ansible's template result) and "
            "check the rendered files")}
    if fmt == "Helm chart template":  # Go template actions (helm.sh/docs chart_template_guide): YAML once rendered
        return {"object": f"{path} ({fmt})", "reason": (
            "it is a Helm chart template, not a manifest: it configures prefill/decode KV transfer, but its values "
            "and much of its text are filled in when the chart is rendered; render it (helm template) and check the "
            "rendered manifests")}
    if fmt == "Terraform configuration (HCL)":
        return {"object": f"{path} ({fmt})", "reason": (
            "it is Terraform configuration: the engines' containers are written in HCL (kubernetes_deployment, "
            "kubernetes_manifest or helm_release resources) with expressions, variables and values files that "
            "Terraform evaluates at plan time, which these rules do not read; check the manifests it applies "
            "(kubectl get -o yaml after apply, or helm template with the release's values) to have them checked")}
    if fmt == "Ansible playbook or task file":
        return {"object": f"{path} ({fmt})", "reason": (
            "it is Ansible: the engine commands are in its tasks (shell, command, template or container modules), "
            "run on the hosts its inventory groups, hosts and when conditions choose, with Jinja variables filled in "
            "when it runs, which these rules do not read; write out each host's vllm serve command (as a shell "
            "script, or as the commands of Kubernetes containers) to have them checked")}
    if fmt in ("Python launcher", "Jupyter notebook"):
        return {"object": f"{path} ({fmt})", "reason": _python_reason(fmt, text)}
    return {"object": f"{path} ({fmt})", "reason": (
        f"it is a {fmt}, not a Kubernetes manifest: it configures prefill/decode KV transfer in commands that a shell, "
        "service manager or scheduler runs (their environment, variables and vLLM version are set where it runs), which "
        "these rules do not read; give the same vllm serve commands as the commands of Kubernetes containers (one "
        "container or pod per engine, with their environment) to have them checked")}
