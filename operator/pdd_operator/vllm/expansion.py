"""Variable expansion in a container's env, command and args, as the engine finally sees them.

Two expansions happen before vLLM parses its flags, and the checker applies both:

1. **The kubelet** expands ``$(VAR)`` in ``command``, ``args`` and ``env[].value`` (Kubernetes docs, "Define a
   Command and Arguments for a Container", *Use environment variables to define arguments*; code:
   ``pkg/kubelet/kuberuntime/kuberuntime_container.go`` -> ``kubecontainer.ExpandContainerCommandAndArgs`` and
   ``third_party/forked/golang/expansion/expand.go``). ``$$`` is an escaped ``$``; a reference to a variable
   that is not defined stays literally ``$(VAR)``; an env value sees only the variables defined before it.
2. **The shell** of an ``sh -c`` / ``bash -c`` script expands ``$VAR``, ``${VAR}`` and ``${VAR:-default}``
   from the process environment (POSIX Shell Command Language 2.6.2 "Parameter Expansion"), outside single
   quotes, including variables the script itself sets (``export MODEL=...; vllm serve $MODEL``); the script is
   run by :mod:`pdd_operator.vllm.script`, from the values :class:`ContainerEnv` gives it.

Only literal values written in the manifest are known (``pdd check`` first writes in the values of ConfigMaps that
are among its files, :mod:`pdd_operator.compat.config_refs`). A variable set through ``valueFrom`` (any other
ConfigMap, a Secret, a resource field) or possibly through ``envFrom`` has a value that is not in these files: it expands
to :func:`unknown` (``<unknown:NAME>``, one shell word), so that what reads the result (the model name, an
integer flag) can say "unknown because ..." instead of judging a model literally named ``${MODEL_PATH}``. Downward-API pod and
host IPs keep this package's sentinels (:data:`pdd_operator.vllm.args.POD_IP`), which the network rules read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

_UNKNOWN_RE = re.compile(r"<unknown:([A-Za-z_][A-Za-z0-9_]*)>")
#: A documentation placeholder, the whole value one angle-bracketed phrase starting with a letter that the reader of a
#: guide replaces (``<cuda_ip>``, ``<prefill_block_size>``, ``<your-gaudi-node-hostname>``, ``<image name to be
#: updated>``): not this module's ``<unknown:NAME>``, not a tokenizer's special token (:data:`_SPECIAL_TOKENS`,
#: ``<|im_end|>``).
_PLACEHOLDER_RE = re.compile(r"<(?!unknown:)[A-Za-z][^<>|]*>")
#: Special tokens of common tokenizers, spelt as placeholders are: never read as one.
_SPECIAL_TOKENS = frozenset({"<s>", "<pad>", "<unk>", "<eos>", "<bos>", "<mask>", "<cls>", "<sep>"})
#: Why a placeholder value is not read (for "not checked" reasons).
PLACEHOLDER_WHY = "a placeholder (<...>) the source leaves for its reader to fill in"


#: A Helm (Go text/template) action left unrendered in a value (``{{ .Values.decode.blockSize }}``, ``{{- include
#: "x" . }}``; Go text/template "Actions": delimited by ``{{`` and ``}}``): Helm replaces it when it renders the
#: chart, so the value the engine gets is not in these files. No JSON value holds ``{{`` (an object's key is a string).
_TEMPLATE_ACTION_RE = re.compile(r"\{\{[^{}]*\}\}")
#: Why a value holding an unrendered template action is not read (Helm charts; KServe's LLMInferenceServiceConfig
#: templates use the same Go text/template syntax, compat/kserve_merge.py fills what the files give).
TEMPLATE_WHY = ("an unrendered Helm template action or KServe config variable ({{ ... }}): render the chart (helm "
                "template) and give its output to pdd check, or, in an LLMInferenceServiceConfig, write the value "
                "KServe's controller fills in (a field of its global configuration or of an object not in the files)")


def placeholder_why(value: object) -> str | None:
    """Why ``value`` is not a value the engine can run with but one its source leaves to be filled in, or ``None``:
    a documentation placeholder (:data:`_PLACEHOLDER_RE`, the guide says to replace it: :data:`PLACEHOLDER_WHY`) or
    an unrendered Helm template action anywhere in it (:data:`_TEMPLATE_ACTION_RE`: :data:`TEMPLATE_WHY`). Pure."""
    text = value.strip() if isinstance(value, str) else ""
    if _PLACEHOLDER_RE.fullmatch(text) and text.lower() not in _SPECIAL_TOKENS:
        return PLACEHOLDER_WHY
    return TEMPLATE_WHY if _TEMPLATE_ACTION_RE.search(text) else None


def placeholder(value: object) -> bool:
    """``value`` is left to be filled in (:func:`placeholder_why`): what it stands for is not in these files."""
    return placeholder_why(value) is not None


def unknown(name: str) -> str:
    """The text a variable whose value is not in the manifest expands to."""
    return f"<unknown:{name}>"


def unknown_names(text: str | None) -> list[str]:
    """Names of the variables of unknown value ``text`` was expanded from (``[]`` when fully known)."""
    return _UNKNOWN_RE.findall(text or "")


#: A name the shell's parameter expansion can spell (POSIX Shell Command Language 2.6.2: a name is letters, digits
#: and underscores, not starting with a digit).
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: A shell script's command substitution (``$(...)`` or backquotes), which the shell runs when the container starts.
_COMMAND_SUBSTITUTION = re.compile(r"\$\(|`")


def shell_operands(command: list[str]) -> list[str]:
    """The words after a ``sh``/``bash -c`` command's option (``[sh, -c, SCRIPT, NAME, ARGS...]``) as the shell reads
    them: a ``--`` right after ``-c`` ends the shell's options and is not its script (POSIX sh: "A -- argument shall
    be accepted as a delimiter"; bash and dash run ``bash -c -- 'vllm serve ...'`` as ``bash -c 'vllm serve ...'``),
    so it is dropped. ``command``: a container's command and args as one argv, ``command[1]`` the ``-c`` option."""
    rest = command[2:]
    return rest[1:] if rest[:1] == ["--"] else rest


#: The command substitution that counts a container's GPUs, as entrypoint scripts size the tensor parallelism:
#: ``$(nvidia-smi -L | wc -l)``, ``$(nvidia-smi --list-gpus | wc -l)`` (substratusai/vllm-docker entrypoint.sh,
#: hommayushi3/vllm-huggingface endpoints-entrypoint.sh). ``nvidia-smi -L`` prints one line per GPU the container sees,
#: which the NVIDIA device plugin (``NVIDIA_VISIBLE_DEVICES``) limits to the GPUs it was handed.
GPU_COUNT_COMMAND = re.compile(r"^\$\(\s*nvidia-smi\s+(?:-L|--list-gpus)(?:\s+2>\s*/dev/null)?\s*\|\s*wc\s+-l\s*\)$")


def runs_shell(command: list[str]) -> bool:
    """Whether ``command`` (a container's command and args as written) runs a ``sh``/``bash -c`` script."""
    return len(command) >= 2 and command[0].rsplit("/", 1)[-1] in ("sh", "bash") and command[1].startswith("-")


def opaque_value(raw: str | bool | None, command: list[str], env: ContainerEnv | None = None) -> str | None:
    """Why a flag's value is not in the manifest, or ``None`` when it is written there (or absent).

    raw: the flag's value in the engine's argv, after the kubelet's and the shell's expansion (a bool or ``None``
    is no value); command: the container's command and args as written. The value is opaque when it came from a
    variable whose value is not in these files (a ConfigMap, a Secret, ``envFrom``, the image's ``ENV``:
    :func:`unknown_names`), or when a shell script computes it with a command substitution (``"$(python3 -c
    ...)"``, ``$(cat /etc/kv.json)``; POSIX Shell Command Language 2.6.3). Outside a shell an unexpanded
    ``$(NAME)`` reaches vLLM literally (the kubelet leaves an undefined reference as written): that is the value
    vLLM parses, so it is not opaque. A documentation placeholder (:func:`placeholder`, ``<prefill_block_size>``)
    is opaque too: the guide's reader replaces it before anything runs. This is the one test of opacity for every
    flag (the rules that need a flag's value name it in ``needs``; ``compat.engine`` leaves them "not checked").
    ``env``: the container's environment, whose :meth:`ContainerEnv.source` names where such a variable comes from
    (the ConfigMap, Secret or ``envFrom`` the input does not hold), so the user knows what to give ``pdd check``.
    """
    if not isinstance(raw, str):
        return None
    if (why := placeholder_why(raw)) is not None:
        return why
    names = unknown_names(raw)
    written = " ".join(command)
    if names and re.search(rf"\$(\{{|\()?{re.escape(names[0])}\b(?!\s)", written):
        where = env.source(names[0]) if env is not None else None
        return f"the value of ${names[0]}, which is not in these files" + (f" ({where})" if where else "")
    if names or (runs_shell(command) and _COMMAND_SUBSTITUTION.search(raw)):
        return "computed by a command when the container starts (a shell command substitution)"
    return None


def kube_expand(text: str, lookup: Callable[[str], str | None]) -> str:
    """Expand ``$(VAR)`` the way the kubelet does (``expansion.Expand``).

    ``lookup(name)`` gives a variable's value or ``None`` when it is not defined (the reference stays
    ``$(VAR)``). ``$$`` gives ``$``; a ``$`` followed by anything else, or an unclosed ``$(``, stays as written.
    """
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "$" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close < 0:
                out.append("$(")
                i += 2
                continue
            name = text[i + 2:close]
            value = lookup(name)
            out.append(f"$({name})" if value is None else value)
            i = close + 1
        else:
            out.append("$" + nxt)
            i += 2
    return "".join(out)


def kube_expand_script(text: str, env: ContainerEnv) -> str:
    """:func:`kube_expand` of an ``sh -c`` script's text: :meth:`ContainerEnv.kube_in_script` where the shell reads
    the result as source, :meth:`ContainerEnv.kube` inside single quotes (POSIX Shell Command Language 2.2.2: no
    expansion there; 2.2.1 and 2.2.3: a backslash outside single quotes escapes the next character)."""
    out: list[str] = []
    start, quote, i = 0, "", 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and quote != "'":
            i += 2
            continue
        if (ch == "'" and quote != '"') or (ch == '"' and quote != "'"):
            if ch == "'":  # a single-quoted part starts or ends here: expand what came before in its own way
                out.append(kube_expand(text[start:i], env.kube if quote == "'" else env.kube_in_script))
                start = i
            quote = "" if quote == ch else ch
        i += 1
    out.append(kube_expand(text[start:], env.kube if quote == "'" else env.kube_in_script))
    return "".join(out)


#: Variables the platform adds to a container's environment beyond its manifest, so that a ``$(VAR)`` naming one is
#: expanded at runtime to a value not in these files: the kubelet's service variables (``{SVC}_SERVICE_HOST``,
#: ``{SVC}_SERVICE_PORT[_{PORT}]``, ``{SVC}_PORT[_{N}_{PROTO}[_PROTO|_PORT|_ADDR]]``; Kubernetes docs, "Service" >
#: "Environment variables", with ``enableServiceLinks`` on by default) and LeaderWorkerSet's ``LWS_LEADER_ADDRESS``,
#: ``LWS_GROUP_SIZE``, ``LWS_WORKER_INDEX`` (LWS docs, "Environment variables"; injected into every pod of a group).
_INJECTED = re.compile(r"^(LWS_[A-Z_]+|[A-Z0-9_]+_SERVICE_(HOST|PORT)(_[A-Z0-9_]+)?"
                       r"|[A-Z0-9_]+_PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)$")
#: The part of :data:`_INJECTED` that LeaderWorkerSet's pod webhook adds (the rest is the kubelet's service variables).
_LWS_INJECTED = re.compile(r"^LWS_[A-Z_]+$")
#: The prefix of the variables of the ``kubernetes`` Service of the ``default`` namespace, which the kubelet adds to
#: every container whether or not ``enableServiceLinks`` is on (pkg/kubelet/kubelet_pods.go ``getServiceEnvVarMap``:
#: the master services are always included, the pod namespace's only with service links on).
_MASTER_SERVICE_PREFIX = "KUBERNETES_"
#: The key under which :func:`pdd_operator.compat.service_links.with_service_links` leaves on a container (of a pod
#: template whose Services are all among the files checked) the names of the kubelet's service variables it gets:
#: read into :attr:`ContainerEnv.service_links` by :func:`pdd_operator.vllm.args.container_env`.
SERVICE_LINKS_KEY = "x-pdd-service-links"



#: The environment variables whose values the rules read (vLLM's ``vllm/envs.py`` and the libraries it loads: UCX,
#: libfabric, PyTorch's allocator, the Hub client). Where a container's ``envFrom`` source is not in these files and
#: may set one of them (:meth:`ContainerEnv.may_define`), its value is unknown, never vLLM's default
#: (:func:`pdd_operator.compat.pair.role_from_container`). tests/unit/test_env_from.py checks that every name the
#: rules read is listed.
READ_ENV = (
    "VLLM_NIXL_SIDE_CHANNEL_PORT", "VLLM_NIXL_SIDE_CHANNEL_HOST", "VLLM_KV_CACHE_LAYOUT", "VLLM_HPU_HETERO_KV_LAYOUT",
    "VLLM_ATTENTION_BACKEND", "VLLM_SSM_CONV_STATE_LAYOUT", "VLLM_USE_MODELSCOPE", "VLLM_ROCM_USE_AITER",
    "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION", "UCX_NET_DEVICES", "FI_PROVIDER", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "VLLM_USE_V1",
    "HIP_VISIBLE_DEVICES",
    "UCX_TLS",
    "DYN_VLLM_KV_EVENT_PORT",
    "DYN_CONNECTOR",
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING",
    "VLLM_SKIP_MODEL_NAME_VALIDATION",
    "VLLM_NIC_SELECTION_VARS",
    "ENABLE_LMCACHE",
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
)


#: Names of Secrets that hold credentials by every convention seen (Dynamo's ``envFromSecret: hf-token-secret`` in
#: each of its recipes, KServe's and llm-d's ``hf-secret`` / ``llm-d-hf-token``, registry and API keys).
CREDENTIAL_SECRET = re.compile(r"(^|[-_.])(hf|huggingface|token|credentials?|api-?keys?|auth|passwords?|"
                               r"pull-?secrets?|ngc|wandb)([-_.]|$)", re.IGNORECASE)


def env_from_sources(env_from: Iterable[dict] | None) -> tuple[tuple[str, str], ...]:
    """``(what, prefix)`` for each entry of a container's ``envFrom`` (``configMapRef`` / ``secretRef`` with a
    ``name``, an optional ``prefix``): ``("ConfigMap nixl-env", "")``. An entry whose source or prefix cannot be read
    (no name, a templated value) may define any name: its prefix is ``""``.

    A Secret without a prefix whose name says it holds credentials (:data:`CREDENTIAL_SECRET`: ``hf-token-secret``,
    ``hf-secret``, ``ngc-api-key``) is read as holding only those, not engine settings: it is left out. Reading every
    token Secret as "may set any VLLM_* variable" would leave each Dynamo graph (all of whose recipes import
    ``hf-token-secret``) unchecked for every variable the rules read; a Secret named otherwise (``vllm-env``) or
    imported with a prefix stays a source of unknown values."""
    out = []
    for source in env_from or []:
        if not isinstance(source, dict):
            continue
        kind, ref = next(((k, source[k]) for k in ("configMapRef", "secretRef") if isinstance(source.get(k), dict)),
                         ("source", {}))
        if (kind == "secretRef" and not source.get("prefix") and isinstance(ref.get("name"), str)
                and CREDENTIAL_SECRET.search(ref["name"])):
            continue
        what = f"{'ConfigMap' if kind == 'configMapRef' else 'Secret' if kind == 'secretRef' else 'envFrom'} " + (
            str(ref.get("name")) if ref.get("name") else "(no name)")
        prefix = source.get("prefix")
        out.append((what, prefix if isinstance(prefix, str) and re.fullmatch(r"[-._a-zA-Z0-9]*", prefix) else ""))
    return tuple(out)


#: The ConfigMap name :mod:`pdd_operator.compat.compose_inputs` gives the variables a Compose file interpolates from
#: outside it (the project's ``.env`` file, the shell): it stands for no ConfigMap of the user's, so messages name the
#: interpolation instead (:func:`value_from_source`).
COMPOSE_OUTSIDE = "compose-env-not-in-files"


def value_from_source(value_from: object) -> str:
    """The source an env entry's ``valueFrom`` names, as the user wrote it, for messages: ``ConfigMap 'x' key
    'k'``, ``Secret 'x' key 'k'``, ``fieldRef <path>``, ``resourceFieldRef <resource>`` (k8s.io/api core/v1
    ``EnvVarSource``); ``a valueFrom source`` for anything else."""
    v = value_from if isinstance(value_from, dict) else {}
    for key, what in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
        ref = v.get(key)
        if isinstance(ref, dict) and ref.get("name") == COMPOSE_OUTSIDE:
            return f"${{{ref.get('key')}}}, which the Compose file interpolates from its .env file or the shell"
        if isinstance(ref, dict):
            return f"{what} '{ref.get('name')}' key '{ref.get('key')}'"
    if isinstance(v.get("fieldRef"), dict):
        return f"fieldRef {v['fieldRef'].get('fieldPath')}"
    if isinstance(v.get("resourceFieldRef"), dict):
        return f"resourceFieldRef {v['resourceFieldRef'].get('resource')}"
    return "a valueFrom source"


@dataclass(frozen=True)
class ContainerEnv:
    """What a container's environment tells about its variables.

    Attributes:
        values: literal values (after the kubelet's ``$(VAR)`` expansion, in order) and downward-API IP sentinels.
        opaque: names set through ``valueFrom`` whose value is not in the manifest.
        refs: ``name -> where`` for each name of :attr:`opaque`: the ``valueFrom`` source as the user wrote it
            (``ConfigMap 'vllm-env' key 'ucx'``, ``Secret 's' key 'k'``, ``fieldRef spec.nodeName``,
            ``resourceFieldRef limits.cpu``; k8s.io/api core/v1 ``EnvVarSource``), for messages that name it.
        sources: the ``envFrom`` entries whose variables are not in these files, as ``(what, prefix)``
            (``("ConfigMap nixl-env", "")``): any name starting with ``prefix`` may be set there, to a value not in
            the manifest (:meth:`may_define`). A ConfigMap that is among the files checked was written in as ``env``
            before (:mod:`pdd_operator.compat.config_refs`) and is not here.
        image: the image's own ``ENV`` as known (:func:`pdd_operator.vllm.image_env.image_env`): name -> value, or
            ``None`` where the image sets it to a value not known here; ``{}`` for an image whose ``ENV`` is not read.
        kubernetes: the environment is a Kubernetes container's, so the platform adds variables beyond the manifest
            (:data:`_INJECTED`: the kubelet's service variables, LeaderWorkerSet's); ``False`` for a script run on a
            host (:mod:`pdd_operator.compat.script_inputs`), where no kubelet or LWS sets ``PREFILL_NIXL_SIDE_PORT``
            and a ``${PREFILL_NIXL_SIDE_PORT:-5577}`` default is what the shell expands.
        gpus: the GPUs the container is handed (its ``nvidia.com/gpu`` limit; a Compose service's ``device_ids``),
            ``None`` where not known: what ``$(nvidia-smi -L | wc -l)`` prints inside it (:data:`GPU_COUNT_COMMAND`).
        service_links: the names of the kubelet's service variables the container gets, where the files checked are
            read as the whole deployment (:mod:`pdd_operator.compat.service_links`: those of the Services among them
            in the pod's namespace, none with ``enableServiceLinks: false``; the ``kubernetes`` Service's
            ``KUBERNETES_*`` always); ``None`` where that is not known, so that any name of the service-variable form
            (:data:`_INJECTED`) may be set by the platform.
    """

    values: dict[str, str] = field(default_factory=dict)
    opaque: frozenset[str] = frozenset()
    sources: tuple[tuple[str, str], ...] = ()
    image: dict[str, str | None] = field(default_factory=dict)
    kubernetes: bool = True
    refs: dict[str, str] = field(default_factory=dict)
    gpus: int | None = None
    service_links: frozenset[str] | None = None

    def injected(self, name: str) -> bool:
        """Whether the platform may add ``name`` to the container's environment beyond its manifest: LeaderWorkerSet's
        variables, and the kubelet's service variables (:data:`_INJECTED`) unless :attr:`service_links` says which
        ones it adds (the ``kubernetes`` Service's always). ``False`` for a script run on a host."""
        if not self.kubernetes or not _INJECTED.match(name):
            return False
        if self.service_links is None or _LWS_INJECTED.match(name) or name.startswith(_MASTER_SERVICE_PREFIX):
            return True
        return name in self.service_links

    @property
    def open(self) -> bool:
        """The container has ``envFrom`` not in these files, so other names may be set too."""
        return bool(self.sources)

    def may_define(self, name: str) -> str | None:
        """The ``envFrom`` source (``ConfigMap nixl-env``) that may set ``name`` to a value not in these files, or
        ``None`` when none may: the kubelet imports every key of the source, ``prefix`` prepended (k8s.io/api core/v1
        ``EnvFromSource``), so only names that start with the prefix can come from it. A literal ``env`` entry of the
        same name wins (it is listed after the imports): callers ask only for names the manifest does not set."""
        return next((what for what, prefix in self.sources if name.startswith(prefix)), None)

    @classmethod
    def of(cls, env: Iterable[dict] | None, env_from: Iterable[dict] | None = None,
           sentinels: Callable[[str], str | None] = lambda path: None) -> ContainerEnv:
        """Read a container's ``env`` and ``envFrom`` lists. ``sentinels(fieldPath)`` gives the value kept for a
        downward-API ``fieldRef`` (``None``: unknown)."""
        values: dict[str, str] = {}
        opaque: set[str] = set()
        refs: dict[str, str] = {}
        is_open = env_from_sources(env_from)
        for var in env or []:
            name = var.get("name") if isinstance(var, dict) else None
            if not name:
                continue
            name = str(name)
            if var.get("value") is not None:
                partial = cls(dict(values), frozenset(opaque), is_open)
                values[name] = kube_expand(str(var["value"]), partial.kube)
                opaque.discard(name)
                continue
            path = ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            kept = sentinels(str(path)) if path else None
            if kept is not None:
                values[name] = kept
                opaque.discard(name)
            else:
                values.pop(name, None)
                opaque.add(name)
                refs[name] = value_from_source(var.get("valueFrom"))
        return cls(values, frozenset(opaque), is_open, refs={n: w for n, w in refs.items() if n in opaque})

    def source(self, name: str) -> str | None:
        """Where variable ``name``, whose value is not in these files, comes from, as one phrase for messages that
        ask for it (``ConfigMap 'x' key 'k' (valueFrom): give it to pdd check``, ``ConfigMap x (envFrom) ...``), or
        ``None`` when this environment does not say (a variable of the script, the image's ``ENV``). The one
        wording of an unresolved Kubernetes indirection (issue 9, fixW)."""
        if name in self.values:
            return None
        if name in self.opaque:
            ref = self.refs.get(name, "a valueFrom source")
            return f"{ref}{'' if ref.startswith('$') else ' (valueFrom)'}: give it to pdd check"
        what = self.may_define(name)
        return f"possibly {what} (envFrom): give it to pdd check" if what else None

    def kube(self, name: str) -> str | None:
        """A variable's value for the kubelet's ``$(VAR)``: literal, :func:`unknown`, or ``None`` (not defined)."""
        if name in self.values:
            return self.values[name]
        if name in self.opaque or self.may_define(name) or self.injected(name):
            return unknown(name)
        return None

    def kube_in_script(self, name: str) -> str | None:
        """:meth:`kube` for a ``$(VAR)`` the kubelet expands inside the text of an ``sh -c`` script, outside single
        quotes, which the shell then reads as source: a value not in these files becomes the shell's own ``${NAME}``
        (for a name the shell can spell), so that the script reader gives it :func:`unknown` as one value
        (:meth:`shell_value`) instead of reading ``<unknown:NAME>`` as source, where ``<`` and ``>`` are redirections
        that cut the command line there. At runtime the kubelet writes the variable's value into the script; the
        shell then sees that value where ``${NAME}`` stands, as it does for ``$(LWS_LEADER_ADDRESS)``
        (LeaderWorkerSet sets it in the pod's env). Inside single quotes the shell expands nothing and reads
        ``<unknown:NAME>`` literally: :func:`kube_expand_script` keeps :meth:`kube` there."""
        value = self.kube(name)
        if value == unknown(name) and _SHELL_NAME.fullmatch(name):
            return "${" + name + "}"
        return value

    def shell_value(self, name: str) -> str:
        """A variable's value for the shell's ``$NAME`` (:mod:`pdd_operator.vllm.script` runs the scripts): its
        literal value (the manifest's, else the image's known ``ENV`` where nothing unseen may set it), else
        :func:`unknown` (``valueFrom``, ``envFrom``, the platform or the image may set it). The default forms
        ``${NAME:-d}`` ... read :meth:`unset` first."""
        if name in self.values:
            return self.values[name]
        image = self.image.get(name)
        if image is not None and name not in self.opaque and not self.may_define(name):
            return image
        return unknown(name)

    def unset(self, name: str) -> bool:
        """Whether ``name`` is certainly not set when the container's shell starts, so that a default
        (``${NAME:-d}``, ``${NAME:=d}``) is what the shell expands (POSIX Shell Command Language 2.6.2): the manifest's
        ``env`` does not set it, no ``valueFrom`` or unread ``envFrom`` source may (:meth:`may_define`), the platform
        does not add it (the kubelet's service variables, LWS's: :meth:`injected`), and the image's ``ENV`` does not
        set it as far as known (:attr:`image`; an image whose ``ENV`` is not read is taken not to set a name its
        script defaults)."""
        return (name not in self.values and name not in self.opaque and not self.may_define(name)
                and not self.injected(name) and name not in self.image)
