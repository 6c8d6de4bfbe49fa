"""The vLLM engines a container's shell script starts, one :class:`Launch` per engine process.

A container whose command is ``sh -c`` / ``bash -c`` may start several engines (``vllm serve A ... & vllm serve B
...``, or a loop of ``python -m dynamo.vllm ... &`` lines, as Dynamo's one-pod gpt-oss recipes do). The script is
parsed with tree-sitter-bash (``tree-sitter/tree-sitter-bash``, the grammar GitHub and editors use) and run
symbolically, following the POSIX Shell Command Language (Issue 7, section 2) and bash's manual:

* every simple command of a list runs, whatever separates it (``;``, ``&``, ``&&``, ``||``, a newline, a pipe);
  ``wait``, ``set``, redirections and commands that are not an engine start nothing here;
* ``NAME=value cmd`` puts ``NAME`` in that command's environment only (2.9.1 "Simple Commands"); ``NAME=value``
  alone sets a shell variable, which reaches an engine's environment only once ``export``-ed or when the container's
  env already defines it (2.9.1, 2.14 "export");
* parameter expansion (2.6.2): ``$V``, ``${V}``, ``${V:-d}``, ``${V-d}``, ``${V:=d}``, ``${V:+a}``, positional
  ``$1`` inside a function, bash's case modification ``${V,,}`` ``${V^^}`` ``${V,}`` ``${V^}``; an unquoted
  expansion is split into fields on blanks (2.6.5), so ``M="--model x --tp 4";
  vllm serve $M`` gives the engine both flags; ``$((...))`` integer arithmetic (2.6.4) on known integers. A
  default (``${V:-d}``, ``${V-d}``, ``${V:=d}``) or alternative (``${V:+a}``) is applied as the shell applies it
  where the manifest or the script sets ``V`` (``V=; ... ${V:-d}`` is ``d``), and where ``V`` is certainly unset
  (:meth:`~pdd_operator.vllm.expansion.ContainerEnv.unset`: no ``env`` entry, no ``valueFrom``/unread ``envFrom``
  source that may set it, not the platform's (the kubelet's service variables: only names a Service among the files
  produces, where :mod:`pdd_operator.compat.service_links` tells which, else any ``<SVC>_PORT``-shaped name), not in
  the image's ``ENV`` as known,
  :mod:`pdd_operator.vllm.image_env`): ``${GPU_D:-2}`` is ``2`` (set 22's E/P/D script hid two engines on one GPU
  behind such defaults). A ``V`` that what these files do not show may set expands to ``<unknown:V>`` in each of
  these forms, as ``$V`` does, and rules say "not checked". A bare ``$V`` of an unset ``V`` stays unknown too (the
  script's author expects it set somewhere), and so does a command's argument that only an empty default of such a
  ``V`` makes empty (``"${V:-}"``, ``"${V-}"``, ``"${V:=}"``: ``$V`` spelled to survive ``set -u``, which the image's
  ``ENV``, the pod's env, a sourced file or the caller may set), so it is no empty word vLLM's parser would refuse
  (``cli-option-malformed``) but ``V``'s unknown value (:meth:`_Shell.argument_fields`); an empty ``V`` the script or
  the container's env sets is an empty word. ``${V:?msg}`` (in a ``:`` command or anywhere) exits the script where
  ``V`` is unset or empty, ``${V?msg}`` where it is unset: past it ``V`` is set (and with the colon not empty), its
  value unknown where it was not known to pass (:meth:`_Shell.guarded`);
* ``for v in a b c; do ...; done`` runs its body once per word (at most :data:`MAX_ITERATIONS` times in all); a
  ``while``/``until``/C-style ``for`` body is read once;
* conditions (2.9.4.4 ``if``/``elif``/``else``, 2.9.4.3 ``case`` with glob patterns, 2.9.3 ``&&``/``||`` after a
  test) are evaluated where their operands are known: ``[ ]``/``test`` (``= != -z -n -eq -ne -gt -ge -lt -le !
  -a -o``), ``[[ ]]`` (also ``== != <pattern>``, ``=~``, ``&& ||``, arithmetic integer operands), ``(( ))``,
  ``true``/``false``; the shell's branch is taken. A condition that reads an unknown value (or a file test, or
  another command's status) leaves each possible branch: the script is run once per way through them (at most
  :data:`MAX_PATHS`) and a flag the ways give different values becomes ``<unknown:NAME>`` (NAME: the condition's
  variable, else :data:`BRANCH`), so rules reading it say "not checked"; where the ways start different numbers of
  engines, the first way's engines are read. ``case`` fall-through (``;&``, ``;;&``) is read as ``;;``. A launcher
  whose own arguments (``$1``, ``$2``) choose which engines start is read per choice by
  :func:`argument_alternatives`;
* ``$(cat <<WORD ... WORD)`` is the here-document's text (expanded unless WORD is quoted), so a
  ``--kv-transfer-config "$(cat <<JSON ...)"`` is read; a comment line inside an array's ``( ... )`` is no element;
* ``f() { ...; }`` then ``f args`` runs the body with ``$1...`` set, and ``$(f args)`` is what the body prints
  (:meth:`_Shell.function_output`: ``local``, ``printf``/``echo``, known tests; else unknown); ``sh -c "..."``
  inside the script is read too, and so is ``ssh [options] HOST "..."`` (its command words joined, as ssh(1) hands
  them to the remote shell, with none of this shell's exported variables; the launch's ``wrapper`` ends with
  ``ssh ... HOST``);
  ``eval ARGS`` reads its joined arguments as shell input in this shell (2.14), so a command built in a variable and
  run by ``eval "$CMD"`` (or ``exec $CMD``, a split unquoted expansion) is read from the variable's value;
* indexed arrays, as bash's manual ("Arrays") describes them: ``A=(w1 w2)``, ``A+=(w3)``, ``A[N]=w``, ``declare -a``
  / ``local -a`` / ``readonly -a``; ``"${A[@]}"`` gives one field per element (zero fields for an empty array),
  ``"${A[*]}"`` one field of the elements joined by a space, unquoted both are split; ``${A[N]}`` (an integer or
  arithmetic index, negative from the end), ``$A`` (element 0), ``${#A[@]}`` (the count), ``${!A[@]}`` (the
  indices). Arrays are not exported to an engine's environment (bash exports no arrays), nor to the shell of an
  ``sh -c '...'`` or ``ssh HOST '...'`` this script starts, where they expand to nothing (:meth:`_Shell.child_shell`);
  an array filled by an unquoted word of unknown value (``($(cmd))``) has elements not known, except that the job's
  node names (``($(scontrol show hostnames "$SLURM_JOB_NODELIST"))``) give each element and ``${A[*]:O:L}`` slice a
  :data:`JOB_NODES` token, unknown to every rule but where ``srun --nodelist`` runs. What the reader cannot
  follow, an associative array (``declare -A``), an element assigned past the end or by ``[i]=`` inside ``(...)``,
  an array filled by ``read -a`` / ``mapfile`` / ``readarray``, slices and defaults on arrays (``${A[@]:1}``),
  expands to :func:`~pdd_operator.vllm.expansion.unknown` of the array's name.

What is not known here expands to :func:`~pdd_operator.vllm.expansion.unknown` (``<unknown:NAME>``): a variable the
manifest does not define (the image's ``ENV`` may), one set through ``valueFrom``/``envFrom``, the output of a command
substitution ``$(cmd ...)`` (named after ``cmd``), and arithmetic on such values; readers then say "not checked"
instead of guessing.
"""

from __future__ import annotations

import ast
import fnmatch
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

import tree_sitter
import tree_sitter_bash

from pdd_operator.vllm.entrypoint import SERVE, image_entrypoint
from pdd_operator.vllm.expansion import _UNKNOWN_RE, GPU_COUNT_COMMAND, ContainerEnv, unknown, unknown_names
from pdd_operator.vllm.flags import _entry_length, parse_flags

#: Loop iterations run in one script, all loops together (a bound on the work one manifest can cause).
MAX_ITERATIONS = 64

#: Modules whose ``python -m`` starts a vLLM engine. vLLM's gRPC server (``vllm.entrypoints.grpc_server``, which
#: SMG's gRPC workers run) parses its argv with ``FlexibleArgumentParser``, ``--host``/``--port`` of its own and
#: ``AsyncEngineArgs.add_cli_args`` (from 0.14.0: grpc_server.py l.518-520; 0.18.0 l.140-161, 0.25.0 l.168-189), then builds
#: the engine from ``AsyncEngineArgs.from_cli_args`` as ``vllm serve`` does; from 0.30.0 it re-exports
#: ``vllm.entrypoints.launchers.grpc_server`` (0.30.0 and 0.34.0 grpc_server.py l.5-18), which keeps that parser.
ENTRY_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.cli.main", "dynamo.vllm",
                 "vllm.entrypoints.grpc_server", "vllm.entrypoints.launchers.grpc_server")

#: vLLM's Rust frontend, ``vllm-rs serve MODEL [frontend flags] -- [engine flags]`` (the ``vllm-rs`` binary of
#: rust/src/cmd, in the 0.27.0-0.34.0 sdists): it serves the OpenAI API itself and starts the Python engine core of
#: MODEL with the words after ``--`` (clap ``last = true`` passthrough) and the frontend's engine flags
#: (``--max-model-len``, the data-parallel sizes) appended (``ManagedEngineArgs.into_config``, 0.34.0
#: rust/src/managed-engine/src/cli.rs lines 12-126).
RUST_FRONTEND = "vllm-rs"
#: The word :mod:`pdd_operator.compat.python_inputs` writes before the ``vllm serve`` line of an engine that a Python
#: program builds in its own process (``LLM(...)``, ``EngineArgs``/``AsyncEngineArgs`` for ``LLMEngine`` or
#: ``AsyncLLMEngine``): the line's wrapper, no program. Such an engine starts no API server (entrypoints/llm.py
#: ``LLM.__init__`` builds an ``LLMEngine`` only, 0.9.0-0.34.0), so it listens on no HTTP ``--port``.
IN_PROCESS_ENGINE = "vllm.LLM"


@dataclass(frozen=True)
class Launch:
    """One engine process a container starts.

    Attributes:
        argv: the command's words after expansion, from the entry point on (``vllm serve ...`` or
            ``python -m <module> ...`` from the module name on, see :func:`entry_point`).
        env: variables the script sets for this process beyond the container's ``env``: its ``NAME=value`` prefixes,
            ``env NAME=value`` words and the variables it ``export``-ed before (values expanded).
        line: the 1-based line of the script it starts on (0: not from a script); for an engine started by the text of
            an ``eval`` or of an ``sh -c`` inside the script, the line of that ``eval`` or ``sh -c``.
        proxy_role: ``prefill`` or ``decode`` where a P/D proxy the same script starts names this engine's
            ``--port`` as a prefiller or decoder port (:func:`proxy_roles`), else ``None``.
        proxies: the words (expanded) of each command the same script starts that looks like a P/D proxy
            (:func:`looks_like_proxy`: ``python3 toy_proxy_server.py ...``, ``./bin/llm-d-routing-sidecar ...``), in
            order; which protocol each speaks is judged in :mod:`pdd_operator.compat.pd_proxy`.
        wrapper: the command's expanded words before the entry point (``srun -w node1 --export=ALL,X=1``,
            ``numactl ...``, ``env X=1``), those of an enclosing ``srun ... bash -c "..."`` first; a host script's
            reader (:mod:`pdd_operator.compat.script_inputs`) takes the engine's node and environment from them.
        repeats: why how many times this command runs is not known (``""``: known), a sentence fragment: it is in
            the body of a ``for`` loop over words these files do not give (``$(seq 0 $((N-1)))``, ``$PORTS``,
            ``{1..$N}``), or of more than :data:`MAX_ITERATIONS` words, or of a ``while``/``until``/C-style ``for``
            loop (read once); readers say "not checked" for how many engines it starts.
        inside: ``(line, image)`` of the interactive container (:meth:`DockerRun.shell`: ``docker run -it
            --entrypoint=/bin/bash IMAGE``, ``docker run -it IMAGE bash``) the script started before this command, on
            the same host (no ``ssh`` between): a pasted session's later lines are typed into that shell, so the
            engine runs in IMAGE (Mooncake#3061: "inside the container: vllm serve ..."); ``None`` where none was.
    """

    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    line: int = 0
    proxy_role: str | None = None
    proxies: tuple[tuple[str, ...], ...] = ()
    wrapper: tuple[str, ...] = ()
    repeats: str = ""
    inside: tuple[int, str] | None = None
    #: the program that starts the engine where it is not ``vllm`` / ``python -m``: the :data:`RUST_FRONTEND` word as
    #: written for a ``vllm-rs serve`` launch (:func:`frontend`), else ``None``.
    frontend: str | None = None


def frontend(words: Sequence[str]) -> str | None:
    """The program word as written (``vllm-rs``, ``/opt/venv/lib/python3.12/site-packages/vllm/vllm-rs``) where
    ``words`` start their engine through :data:`RUST_FRONTEND` ``serve`` (the launch :func:`entry_point` reads as
    ``vllm serve``), else ``None``."""
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] == "vllm" and i + 1 < len(words) and words[i + 1] == "serve" or word in ENTRY_MODULES:
            return None
        if word.rsplit("/", 1)[-1] == RUST_FRONTEND and i + 1 < len(words) and words[i + 1] == "serve":
            return word
    return None


def entry_point(words: Sequence[str]) -> list[str]:
    """``words`` from the vLLM entry point on (``vllm serve ...``, or a module of :data:`ENTRY_MODULES` on), or
    ``[]`` when they start no engine. Wrappers before it (``exec``, ``numactl ...``, ``python3 -m``) are dropped.

    A :data:`RUST_FRONTEND` launch (``vllm-rs serve MODEL A... -- B...``) is read as the ``vllm serve MODEL A... B...``
    whose engine it starts: the frontend's flags and the engine's passthrough flags, without the ``--`` that
    separates them."""
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] == "vllm" and i + 1 < len(words) and words[i + 1] == "serve":
            return list(words[i:])
        if word.rsplit("/", 1)[-1] == RUST_FRONTEND and i + 1 < len(words) and words[i + 1] == "serve":
            rest = list(words[i + 2:])
            if "--" in rest:
                del rest[rest.index("--")]
            return [*SERVE, *rest]
        if word in ENTRY_MODULES:
            return list(words[i:])
    return []


#: Long options of vLLM's engine (``EngineArgs.add_cli_args``) that every release from 0.7.0 on defines: those written
#: in vllm/engine/arg_utils.py of the 0.7.0 and 0.9.0 sdists that are also ``EngineArgs`` fields (or options) of the
#: 0.34.0 sdist. A launcher of its own whose options are mostly these, ``--kv-transfer-config`` among them, hands them
#: to vLLM's parser (:func:`launcher_engine`).
ENGINE_FLAGS = frozenset({
    "--allowed-local-media-path", "--block-size", "--code-revision", "--collect-detailed-traces", "--compilation-config",
    "--config-format", "--cpu-offload-gb", "--disable-custom-all-reduce", "--disable-log-stats",
    "--disable-sliding-window", "--distributed-executor-backend", "--download-dir", "--dtype", "--enable-chunked-prefill",
    "--enable-lora", "--enforce-eager", "--fully-sharded-loras", "--gpu-memory-utilization", "--hf-overrides",
    "--ignore-patterns", "--kv-cache-dtype", "--kv-transfer-config", "--limit-mm-per-prompt", "--load-format",
    "--lora-dtype", "--max-cpu-loras", "--max-logprobs", "--max-lora-rank", "--max-loras", "--max-model-len",
    "--max-num-batched-tokens", "--max-num-seqs", "--max-parallel-loading-workers", "--mm-processor-kwargs", "--model",
    "--model-loader-extra-config", "--num-gpu-blocks-override", "--otlp-traces-endpoint", "--pipeline-parallel-size",
    "--quantization", "--ray-workers-use-nsight", "--revision", "--scheduling-policy", "--seed",
    "--skip-tokenizer-init", "--tensor-parallel-size", "--tokenizer", "--tokenizer-mode", "--tokenizer-revision",
    "--trust-remote-code", "--worker-cls"})
#: The Python interpreter as a program word (``python``, ``python3``, ``python3.12``, ``/usr/bin/python3``).
_PYTHON = re.compile(r"^(?:\S*/)?python3?(?:\.\d+)?$")


def launcher_engine(words: Sequence[str]) -> tuple[int, list[str]] | None:
    """``(index of the python word, the vllm serve argv)`` for a command that runs a Python program of its own with
    vLLM engine options, ``python3 prefill_worker.py --model M --max-model-len 100 --kv-transfer-config '{...}'``
    (triton-inference-server/triton_distributed's examples/python_rs/llm/vllm_disaggregated_prefill workers at
    6ea0e774 hand them to ``AsyncEngineArgs.add_cli_args`` / ``from_cli_args`` and build ``AsyncLLMEngine``: set 130),
    else ``None``. It counts as such where its options include ``--kv-transfer-config`` and at least two other
    :data:`ENGINE_FLAGS`, and those are at least half of its long options. The argv is ``vllm serve [MODEL]`` with
    the :data:`ENGINE_FLAGS` options and their values as written (``--model`` as the positional model); options the
    program adds itself are left out (not known: never judged as vLLM's). Pure."""
    at = next((i for i, w in enumerate(words[:-1]) if _PYTHON.match(w)), None)
    if at is None:
        return None
    j = at + 1
    while j < len(words) and words[j].startswith("-") and words[j] != "-m":  # interpreter options: -u, -O, -X dev
        j += 1
    if j >= len(words) or not words[j].endswith(".py"):
        return None
    groups: list[list[str]] = []
    for w in words[j + 1:]:
        if w.startswith("--"):
            groups.append([w])
        elif groups:
            groups[-1].append(w)
    names = [g[0].split("=", 1)[0].replace("_", "-") for g in groups]
    known = [g for g, n in zip(groups, names, strict=True) if n in ENGINE_FLAGS]
    if "--kv-transfer-config" not in names or len(known) < 3 or 2 * len(known) < len(groups):
        return None
    argv = list(SERVE)
    for g in known:
        name = g[0].split("=", 1)[0].replace("_", "-")
        if name == "--model" and len(g) > 1:
            argv[2:2] = [g[1]]
        elif name == "--model" and "=" in g[0]:
            argv[2:2] = [g[0].split("=", 1)[1]]
        else:
            argv += g
    return at, argv


@lru_cache(maxsize=1)
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def launches(script: str, env: ContainerEnv | None = None, positional: Sequence[str] = ()) -> list[Launch]:
    """Every engine process ``script`` starts, in order (see the module docstring).

    ``env``: the container's environment (what the script's variables start from); ``None``: nothing defined.
    ``positional``: the script's ``$1``, ``$2``, ... (``sh -c SCRIPT NAME ARG1 ARG2``), which ``$@``/``$*`` give too.

    Where conditions are not known the script is run once per way through its undecided branches
    (:func:`_paths`) and the engines of those runs are merged (:func:`_merged`): a flag they start with different
    values is given :func:`~pdd_operator.vllm.expansion.unknown` of the condition's variable.
    """
    runs = _paths(script, env or ContainerEnv(), positional)
    found = [(shell.launches, shell.proxy_roles) for shell in runs if shell.launches]
    if not found:
        return []
    names = [name for shell in runs for name in shell.undecided]
    merged = _merged([x for x, _ in found], names[0] if names else BRANCH)
    proxies = tuple(dict.fromkeys(words for shell in runs if shell.launches for words in shell.proxies))
    if proxies:
        merged = [replace(x, proxies=proxies) for x in merged]
    roles = found[0][1]
    if not roles:
        return merged
    return dp_group_roles([replace(x, proxy_role=roles.get(_http_port(x.argv))) for x in merged])


#: Node types of a word that the shell gives as written or from a variable (no command runs to make it): a bare word,
#: a quoted string, a number, a parameter expansion, and their concatenation.
_PLAIN_WORDS = frozenset({"word", "raw_string", "string", "string_content", "number", "concatenation",
                          "simple_expansion", "expansion", "variable_name", "special_variable_name", '"', "'", "$", "${",
                          "}"})


def simple_commands(script: str) -> list[list[str]] | None:
    """The simple commands of a shell script that is only a list of them (joined by newlines, ``;``, ``&&`` or
    ``||``; POSIX Shell Command Language 2.9.3 "Lists"), in order, each as its words with their quotes removed; ``None``
    where the script holds anything else a command could hide in: a pipeline, a compound command (loop, ``if``,
    subshell, group), a function, a redirection, a ``NAME=value`` prefix or assignment, a command or process
    substitution, or a parse error. A word from a parameter expansion (``echo $HOSTNAME``) is kept as written.

    Used to tell a placeholder container (``echo 'Prefill Worker on node:' && hostname && sleep infinity``, the
    PodCliques of ai-dynamo/grove's user-guide samples) from one that may start an engine."""
    root = _parser().parse(script.encode()).root_node
    if root.has_error:
        return None
    out: list[list[str]] = []

    def walk(node: tree_sitter.Node) -> bool:
        for child in node.named_children:
            if child.type == "comment":
                continue
            if child.type == "list":
                if not walk(child):
                    return False
            elif child.type == "command":
                words = []
                for part in child.named_children:
                    if part.type == "command_name" and len(part.named_children) == 1:
                        part = part.named_children[0]
                    stack = [part]
                    while stack:
                        n = stack.pop()
                        if n.type not in _PLAIN_WORDS:
                            return False
                        stack.extend(n.children)
                    text = _text(part)
                    words.append(text[1:-1] if part.type in ("raw_string", "string") else _unescape(text))
                out.append(words)
            else:
                return False
        return True

    return out if walk(root) and out else None


def _word_value(argv: Sequence[str], flag: str) -> str | None:
    """The value ``argv`` gives ``flag`` (``--flag V`` or ``--flag=V``; the last one wins, as argparse reads it), or
    ``None`` when it is not given."""
    value = None
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif word.startswith(flag + "="):
            value = word[len(flag) + 1:]
    return value


def _dp_group(argv: Sequence[str]) -> tuple[str, str | None] | None:
    """The data-parallel group an engine launch joins: (``--data-parallel-address``, ``--data-parallel-rpc-port``),
    ``None`` where it names no address (a single-node engine)."""
    address = _word_value(argv, "--data-parallel-address")
    return None if address is None else (address, _word_value(argv, "--data-parallel-rpc-port"))


def dp_group_roles(found: Sequence[Launch]) -> list[Launch]:
    """``found`` with each headless data-parallel launch given the proxy role of the leader whose data-parallel
    group it joins.

    A ``vllm serve --headless`` launch (vLLM 0.9.1 on, entrypoints/cli/serve.py ``run_headless``) starts engine
    cores only, no HTTP server: the proxy never names its port, yet its DP ranks are ranks of the one engine whose
    front end listens at ``--data-parallel-address`` / ``--data-parallel-rpc-port`` (the engines' handshake address,
    vllm/v1/engine/utils.py ``launch_core_engines`` 0.10.2 on, v1/utils.py ``wait_for_engine_startup`` 0.9.1), so it
    serves that engine's role (vllm-project/vllm#19008's p_leader / p_worker recipes). A group is matched only where
    exactly one launch with a role names it; otherwise the worker keeps no role."""
    leaders: dict[tuple[str, str | None], set[str]] = {}
    for x in found:
        if x.proxy_role and (group := _dp_group(x.argv)) is not None:
            leaders.setdefault(group, set()).add(x.proxy_role)
    out = []
    for x in found:
        group = _dp_group(x.argv)
        role = leaders.get(group, set()) if group is not None else set()
        if x.proxy_role is None and "--headless" in x.argv and len(role) == 1:
            x = replace(x, proxy_role=next(iter(role)))
        out.append(x)
    return out


def opaque_command(launch: Launch) -> str | None:
    """The variable whose value, not in these files, a script runs as the command itself (``$VLLM_CMD ...``,
    ``exec $CMD``, ``eval "$CMD"``), for such a :class:`Launch`; ``None`` for an engine whose program is known."""
    names = unknown_names(launch.argv[0]) if launch.argv and _UNKNOWN_RE.fullmatch(launch.argv[0]) else []
    return names[0] if names else None


#: What Python (or shell) code given with ``-c`` would need to start or reach an engine: vLLM's entry points or
#: ``serve``, its ``LLM`` classes, another framework's worker, or a way to run another program or module.
_SERVER_CODE = re.compile(r"entrypoints|serve|api_server|\bLLM|AsyncLLM|LLMEngine|dynamo|sglang|subprocess|"
                          r"os\.(?:system|exec|spawn|popen)|runpy|\bexec\b|__import__|importlib|<unknown:", re.I)


def _inline_code_no_server(run: Sequence[str]) -> bool:
    """Whether ``run`` (a command whose program is a value not in these files: ``"$PY" -c "import fastapi"``) is that
    program given ``-c`` and one known piece of code and nothing else, where the code names nothing that starts an
    engine (:data:`_SERVER_CODE`): a Python interpreter (``python -c``) or a shell (``sh -c``) runs only that code, so
    the command is a preflight check (set 129's ``"$PY" -c 'from nixl._api import nixl_agent'``), no engine whose
    program is unknown (:func:`opaque_command`)."""
    return len(run) == 3 and run[1] == "-c" and not _SERVER_CODE.search(run[2])


#: At most this many runs of one script, one per way through its undecided conditions (:func:`_paths`).
MAX_PATHS = 32

#: The name a flag's value is given (``<unknown:branch>``) where branches set it differently and their condition
#: names no variable of unknown value (``if [ -f /etc/x ]``, ``if command -v nvidia-smi``).
BRANCH = "branch"

#: An ordinary command's exit status: not evaluated (its success is not known). ``cmd1 && cmd2`` and
#: ``cmd1 || cmd2`` then run both, as every command of a list did before conditions were evaluated.
_RAN = "ran"


def _paths(script: str, env: ContainerEnv, positional: Sequence[str], limit: int = MAX_PATHS) -> list[_Shell]:
    """The symbolic runs of ``script``: one per way through its undecided branches (``if``/``elif``/``else``,
    ``case`` items, ``&&``/``||`` after a test), depth first, the first taking the first possible branch at every
    undecided point; at most ``limit`` runs (:data:`MAX_PATHS`; the rest are not read)."""
    out: list[_Shell] = []
    pending: list[list[int]] = [[]]
    while pending and len(out) < limit:
        forced = pending.pop()
        shell = _Shell(env, forced)
        shell.positional = list(positional)
        shell.run(script)
        out.append(shell)
        made = [choice for choice, _ in shell.decisions]
        for j in range(len(made) - 1, len(forced) - 1, -1):
            pending += [made[:j] + [alt] for alt in range(shell.decisions[j][1] - 1, 0, -1)]
    return out


#: The name the script's own arguments ``$1`` ... ``$9`` are given where :func:`argument_alternatives` reads them
#: as not known (``<unknown:ARG1>``).
ARGUMENT = "ARG"
#: The name :meth:`_Shell.variable` gives an argument of the script itself (``$5``) that its caller may pass.
_SCRIPT_ARGUMENT = re.compile(ARGUMENT + r"[0-9]+")
#: At most this many runs of a launcher read per argument (:func:`argument_alternatives`): a dispatch ``case`` of a
#: dozen items under a usage test doubles :data:`MAX_PATHS`' ways.
MAX_ARGUMENT_PATHS = 96
#: A read of the script's own arguments: ``$1``-``$9``, ``${1...}``, ``$@``, ``$*``, ``$#``.
_POSITIONAL_READ = re.compile(r"\$(?:\{[#!]?)?[1-9@*#]")


@dataclass(frozen=True)
class Alternative:
    """The engines one invocation (or set of invocations) of a launcher script starts, where which engines it starts
    depends on the script's own arguments (:func:`argument_alternatives`).

    Attributes:
        launches: the engines, by line (deduplicated: ways that start the same engine once).
        invocations: how many of the script's runs (one per argument choice) start them: 1 where one invocation starts
            them all (side by side on its host), more where each is its own invocation (``launch.sh cfg prefill``,
            ``launch.sh cfg decode``), whose hosts are not known.
        functions: the names of the shell functions the engines are started in (the script's names for the
            alternative, ``configC1_prefill``), in order; empty where they start outside functions.
    """

    launches: tuple[Launch, ...]
    invocations: int
    functions: tuple[str, ...] = ()


def _kv_launch(launch: Launch) -> bool:
    """``launch`` configures KV transfer on its command line (``--kv-transfer-config``, a ``kv_connector`` word)."""
    return any(w.startswith("--kv-transfer-config") or "kv_connector" in w for w in launch.argv)


_KV_ROLE_WORD = re.compile(r"[\"']?kv_role[\"']?\s*:\s*[\"']?(kv_producer|kv_consumer)")
_ROLE_WORD = re.compile(r"prefill|decode", re.I)


def _run_role(found: Sequence[Launch], names: Sequence[str | None]) -> str | None:
    """The one P/D role the engines ``found`` of one run serve: ``kv_producer`` / ``kv_consumer`` in their KV
    transfer config, else ``prefill`` / ``decode`` in the names of the functions that start them (``names``, as
    ``found``); ``None`` where they serve none or both."""
    roles = set()
    for launch, name in zip(found, names, strict=True):
        kv = _KV_ROLE_WORD.search(" ".join(launch.argv))
        words = {w.lower() for w in _ROLE_WORD.findall(name or "")}
        if kv:
            roles.add("prefill" if kv.group(1) == "kv_producer" else "decode")
        elif len(words) == 1:
            roles.add(words.pop())
        else:
            return None
    return roles.pop() if len(roles) == 1 else None


def _function_of(script: str, line: int) -> str | None:
    """The name of the shell function whose definition encloses ``line`` of ``script`` (1-based), or ``None``."""
    root = _parser().parse(script.encode()).root_node
    found = None
    stack = [root]
    while stack:
        node = stack.pop()
        if node.start_point[0] + 1 <= line <= node.end_point[0] + 1:
            if node.type == "function_definition" and (name := node.child_by_field_name("name")) is not None:
                found = _text(name)  # the innermost one wins: children are visited after their parent
            stack += node.named_children
    return found


def argument_alternatives(script: str, env: ContainerEnv | None = None) -> list[Alternative] | None:
    """The engines a launcher script starts per invocation, where which engines it starts is chosen by the script's
    own arguments (``bash launch.sh configC1 prefill``: a ``case "$1"`` / ``if [ "$2" = ... ]`` dispatch to
    functions), ``None`` where it is not such a launcher (it reads no argument, or every choice of its arguments
    starts the same engine lines: :func:`launches` reads it as one run).

    The script is run with ``$1`` ... ``$9`` not known (``<unknown:ARG1>``: :data:`ARGUMENT`), once per way through
    the branches they decide (at most :data:`MAX_ARGUMENT_PATHS` runs); runs that start the same engines are one.
    The **role argument** is the argument whose choices alone split the runs into the P/D roles of one deployment:
    leaving the choices that read it aside, the runs that agree on every other choice each start the engines of one
    role (``kv_producer`` / ``kv_consumer``, else ``prefill`` / ``decode`` in the name of the function that starts
    them), a different one per run, all configuring KV transfer. Those runs are one alternative, each role started
    by its own invocation (``configC1 prefill`` and ``configC1 decode``, which the user runs side by side); every
    other run is an alternative of its own (``configA``, a monolithic server). Where no argument splits so, each run
    is its own alternative. An ``exit`` does not end a run here (a usage test doubles the ways; their engines are the
    same). Returns the alternatives in the script's order (by first engine line), cut where
    :data:`MAX_ARGUMENT_PATHS` runs were read (:func:`arguments_truncated` says so)."""
    if not _POSITIONAL_READ.search(script):
        return None
    runs = _paths(script, env or ContainerEnv(), [unknown(f"{ARGUMENT}{i}") for i in range(1, 10)],
                  limit=MAX_ARGUMENT_PATHS)
    if len({tuple(x.line for x in shell.launches) for shell in runs if shell.launches}) < 2:
        return None

    def ident(x: Launch) -> tuple:
        return x.line, x.argv, tuple(sorted(x.env.items())), x.wrapper

    functions: dict[int, str | None] = {}
    started: dict[tuple, _Shell] = {}  # one run per set of engines
    for shell in runs:
        if shell.launches:
            started.setdefault(tuple(ident(x) for x in shell.launches), shell)
            for x in shell.launches:
                functions.setdefault(x.line, _function_of(script, x.line))
    roles = {key: _run_role(shell.launches, [functions[x.line] for x in shell.launches])
             if all(_kv_launch(x) for x in shell.launches) else None for key, shell in started.items()}

    def grouped(role_argument: str) -> dict[tuple, list[tuple]]:
        groups: dict[tuple, list[tuple]] = {}
        for key, shell in started.items():
            kept = tuple(c for (c, _), names in zip(shell.decisions, shell.decision_names, strict=True)
                         if role_argument not in names)
            groups.setdefault(kept if roles[key] else (key,), []).append(key)
        return groups

    def splits(groups: dict[tuple, list[tuple]]) -> bool:
        multi = [g for g in groups.values() if len(g) > 1]
        return bool(multi) and all(len({roles[k] for k in g}) == len(g) for g in multi)

    read = dict.fromkeys(n for shell in started.values() for names in shell.decision_names for n in names
                         if n.startswith(ARGUMENT))
    candidates = [g for n in read if splits(g := grouped(n))]
    groups = max(candidates, key=lambda g: sum(len(m) > 1 for m in g.values())) if candidates else {
        (key,): [key] for key in started}
    out = []
    for members in groups.values():
        engines = sorted({ident(x): x for key in members for x in started[key].launches}.values(), key=lambda x: x.line)
        names = tuple(dict.fromkeys(n for x in engines if (n := functions[x.line])))
        out.append(Alternative(tuple(engines), len(members), names))
    return sorted(out, key=lambda a: a.launches[0].line)


def arguments_truncated(script: str, env: ContainerEnv | None = None) -> bool:
    """:func:`argument_alternatives` read :data:`MAX_ARGUMENT_PATHS` runs of ``script`` and more ways remain."""
    return len(_paths(script, env or ContainerEnv(), [unknown(f"{ARGUMENT}{i}") for i in range(1, 10)],
                      limit=MAX_ARGUMENT_PATHS + 1)) > MAX_ARGUMENT_PATHS


def _merged(runs: list[list[Launch]], name: str) -> list[Launch]:
    """One list of engines from the engines each run of a script starts (runs that start none left out): the
    same in every run, or each engine's flags merged (:func:`_merged_launch`) where every run starts as many;
    where the runs start different numbers of engines, which ones start is decided at runtime and the first
    run's are read (as for a condition this reader cannot follow)."""
    first = runs[0]
    if all(run == first for run in runs) or any(len(run) != len(first) for run in runs):
        return first
    return [_merged_launch([run[i] for run in runs], name) for i in range(len(first))]


def _merged_launch(launches: list[Launch], name: str) -> Launch:
    """One engine as the runs of a script start it: each flag, the model and each env variable they give the
    same value keep it; one they give different values (or that only some runs pass) becomes
    ``<unknown:name>``, which the rules read as a value not in the manifest (never one branch's guess)."""
    first = launches[0]
    parsed = [parse_flags(list(x.argv)) for x in launches]
    entry = list(first.argv[: len(first.argv) - len(first.argv[_entry_length(list(first.argv)):])])
    argv = list(entry)
    models = {model for model, _ in parsed}
    if models != {None}:
        argv += ["--model", next(iter(models)) if len(models) == 1 else unknown(name)]
    order = list(dict.fromkeys(flag for _, flags in parsed for flag in flags if flag != "--model"))
    for flag in order:
        values = [flags.get(flag) for _, flags in parsed]
        value = values[0] if all(v == values[0] for v in values) else unknown(name)
        if value is True:
            argv.append(flag)
        elif value is False:
            argv.append(f"--no-{flag[2:]}")
        elif isinstance(value, str):  # a merged value as --flag=VALUE, which a boolean flag reads as its value too
            argv += [flag, value] if value and not value.startswith("-") and value in values else [f"{flag}={value}"]
    keys = list(dict.fromkeys(k for x in launches for k in x.env))
    env = {k: first.env[k] if all(x.env.get(k) == first.env.get(k) for x in launches) else unknown(name)
           for k in keys}
    return Launch(tuple(argv), env, first.line, wrapper=first.wrapper, repeats=first.repeats, frontend=first.frontend)


#: Flags of the P/D proxies vLLM's and LMCache's examples start beside the engines, and the role they name:
#: ``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py`` (``--prefiller-ports 8100 8101 --decoder-ports
#: 8200``, ``--prefiller-port``), ``examples/online_serving/disaggregated_serving/disagg_proxy_demo.py``
#: (``--prefill localhost:8100 --decode localhost:8200``), LMCache's ``disagg_proxy_server.py`` (``--prefiller-port``).
PROXY_ROLE_FLAGS = {"--prefiller-ports": "prefill", "--prefiller-port": "prefill", "--prefill": "prefill",
                    "--decoder-ports": "decode", "--decoder-port": "decode", "--decode": "decode"}


def looks_like_proxy(words: Sequence[str]) -> bool:
    """``words`` start a P/D proxy: a word with ``proxy`` or ``sidecar`` in it among the first three (``python3
    toy_proxy_server.py``, ``./bin/llm-d-routing-sidecar``), or after a launcher's options (``srun -N1 --overlap ...
    python3 toy_proxy_server.py ...``)."""
    if not words:
        return False
    if any("proxy" in w or "sidecar" in w for w in words[:3]):
        return True
    return words[0].rsplit("/", 1)[-1] == "srun" and any(
        ("proxy" in w or "sidecar" in w) and not w.startswith("-") for w in words)


def proxy_roles(words: Sequence[str]) -> dict[int, str]:
    """The engine HTTP ports a proxy command's ``words`` name per role (:data:`PROXY_ROLE_FLAGS`): each value word
    after such a flag up to the next flag, a ``host:port`` read as its port; ``{}`` for a command that is no such
    proxy, or where a port would get both roles."""
    out: dict[int, str] = {}
    role = None
    for word in words:
        if word.startswith("-"):
            flag, _, value = word.partition("=")
            role = PROXY_ROLE_FLAGS.get(flag)
            words_after = [value] if value else []
        else:
            words_after = [word]
        for value in words_after if role else ():
            port = value.rpartition(":")[2]
            if port.isdigit():
                if out.get(int(port), role) != role:
                    return {}
                out[int(port)] = role
    return out


def _http_port(argv: Sequence[str]) -> int:
    """The engine's HTTP port: ``--port N`` / ``--port=N``, else vLLM's default 8000 (a value not in the files: 0)."""
    for i, word in enumerate(argv):
        value = argv[i + 1] if word == "--port" and i + 1 < len(argv) else word[7:] if word.startswith("--port=") else None
        if value is not None:
            return int(value) if value.isdigit() else 0
    return 8000


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: The one word of an array assignment that fills it with the job's node names in order (``($(scontrol show hostnames
#: "$SLURM_JOB_NODELIST"))``: scontrol(1) ``show hostnames`` prints one name per line of the hostlist it is given).
_JOB_HOSTNAMES = re.compile(r"""\$\(\s*scontrol\s+show\s+hostnames?\s+["']?\$\{?SLURM_(?:JOB_)?NODELIST\}?["']?\s*\)""")
#: The value standing for nodes O to O+L-1 of the job (``<unknown:SLURM_JOB_NODES_O_L>``, :func:`job_nodes_token`): an
#: unknown value to every rule (the names are not in the files), which tells where ``srun --nodelist`` runs a step.
JOB_NODES = re.compile(r"<unknown:SLURM_JOB_NODES_(\d+)_(\d+)>")


def job_nodes_token(start: int, count: int) -> str:
    """The :data:`JOB_NODES` value of ``count`` nodes of the job from its node ``start`` (0: the first)."""
    return unknown(f"SLURM_JOB_NODES_{start}_{count}")
#: A segment that ends one field and starts the next (``"${A[@]}"`` between elements); a space when joined.
_FIELD_BREAK = "\x00"
_ASSIGN_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_BRACED = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*|[0-9]+)(?:(:?[-=+?])(.*))?\}$", re.S)
#: bash's case modification of a whole value, without a pattern: ``${V,,}`` ``${V^^}`` ``${V,}`` ``${V^}``.
_CASE_MODIFIED = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)(,,|\^\^|,|\^)\}$")
_ARITH_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.floordiv,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


class _Shell:
    """The state of one script's symbolic run: shell variables, exports, functions, and the launches found."""

    def __init__(self, env: ContainerEnv, forced: Sequence[int] = ()) -> None:
        self.env = env
        #: the branch to take at each undecided point, in order (beyond them: the first possible one).
        self.forced = list(forced)
        #: ``(branch taken, branches possible)`` at each undecided point met, in order.
        self.decisions: list[tuple[int, int]] = []
        #: the names of the variables of unknown value each undecided point's condition read, as :attr:`decisions`.
        self.decision_names: list[tuple[str, ...]] = []
        #: names of the variables of unknown value the undecided conditions read, in order.
        self.undecided: list[str] = []
        self.values: dict[str, str] = dict(env.values)
        self.exported: set[str] = set()
        #: ``set -a`` / ``set -o allexport`` in effect: every variable assigned is exported (POSIX 2.14 ``set``).
        self.allexport = False
        self.functions: dict[str, tree_sitter.Node] = {}
        self.positional: list[str] = []
        self.launches: list[Launch] = []
        #: how many unknown parts :meth:`reread` has held so far (their variables' numbers).
        self.held = 0
        self.proxy_roles: dict[int, str] = {}
        #: the words of each command that looks like a P/D proxy (:func:`looks_like_proxy`), in order.
        self.proxies: list[tuple[str, ...]] = []
        #: indexed arrays: their elements, ``None`` where they are not known (see the module docstring).
        self.arrays: dict[str, list[str] | None] = {}
        #: the arrays of an enclosing shell, certainly unset in the child shell read now (:meth:`child_shell`).
        self.absent: set[str] = set()
        #: the arrays filled with the job's node names (``A=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))``),
        #: whose elements and slices expand to :data:`JOB_NODES` tokens (:meth:`array_expansion`).
        self.node_lists: set[str] = set()
        self.iterations = 0
        self.depth = 0
        #: how deep :meth:`function_output` calls are nested now.
        self.calls = 0
        #: how deep calls of the script's functions (``f args``) are nested now: ``$1`` there is the call's argument.
        self.frames = 0
        #: the words before ``sh -c`` of the command whose script is being read (``srun -w n1 bash -c "..."``).
        self.outer: list[str] = []
        #: the line of the outermost ``eval`` or ``sh -c`` whose text is being read: its engines start there.
        self.outer_line: int | None = None
        self._unknown_read: list[str] = []
        #: the variables taken as unset whose empty default (``${X:-}``) was expanded, in order (:meth:`argument_fields`).
        self.assumed_empty: list[str] = []
        #: why the loop whose body is being read runs an unknown number of times (:attr:`Launch.repeats`), or ``""``.
        self.repeats = ""
        #: the interactive container the commands read now are typed into (:attr:`Launch.inside`), or ``None``.
        self.inside: tuple[int, str] | None = None
        #: ``(index in launches, last row)`` of the engine command just read whose line ended with a backslash
        #: escaping a blank (:func:`_escaped_trailing_blank`): the option lines after it are its (:meth:`command`).
        self.broken: tuple[int, int] | None = None

    def run(self, script: str) -> None:
        if self.depth > 8:
            return
        self.depth += 1
        self.exec(_parser().parse(script.encode()).root_node)
        self.depth -= 1

    # statements -------------------------------------------------------------------------------------------

    def exec(self, node: tree_sitter.Node) -> None:
        kind = node.type
        if kind in ("comment", "file_redirect", "heredoc_redirect", "herestring_redirect", "test_command"):
            return
        if kind == "variable_assignment":
            name = self.assign(node)
            if self.allexport:
                self.exported.add(name)
        elif kind == "declaration_command":
            self.declare(node)
        elif kind == "unset_command":
            self.unset(node)
        elif kind == "subshell":
            self.subshell(node)
        elif kind == "function_definition":
            name = node.child_by_field_name("name")
            body = node.child_by_field_name("body")
            if name is not None and body is not None:
                self.functions[_text(name)] = body
        elif kind == "command":
            self.command(node)
        elif kind == "for_statement":
            self.for_loop(node)
        elif kind in ("while_statement", "c_style_for_statement"):
            saved, line = self.repeats, node.start_point[0] + 1
            keyword = _text(node.child(0)) if node.child_count else "while"
            self.repeats = self.repeats or f"the {keyword} loop at line {line} is read once: how many times it runs is not read"
            for child in node.named_children:
                self.exec(child)
            self.repeats = saved
        elif kind == "if_statement":
            self.if_statement(node)
        elif kind == "case_statement":
            self.case_statement(node)
        elif kind in ("list", "negated_command"):
            self.status(node)
        elif kind == "redirected_statement":
            body = node.child_by_field_name("body")
            if body is not None:
                self.exec(body)
        else:  # program, lists, pipelines, groups, subshells, while/until (condition and body), ERROR nodes
            for child in node.named_children:
                self.exec(child)

    def unset(self, node: tree_sitter.Node) -> None:
        """``unset [-v|-f] NAME...`` (``unsetenv`` alike): each variable loses its value and export attribute, so a
        command started after it does not get it; ``-f`` removes functions (bash's manual, "Bourne Shell Builtins")."""
        words = [_text(c) for c in node.named_children]
        functions = "-f" in words
        for name in (w for w in words if not w.startswith("-")):
            if functions:
                self.functions.pop(name, None)
                continue
            self.values.pop(name, None)
            self.exported.discard(name)
            self.arrays.pop(name, None)

    def subshell(self, node: tree_sitter.Node) -> None:
        """``( list )``: the list runs in a child shell (bash's manual, "Command Grouping"): its assignments,
        exports, ``unset``, functions and ``set -a`` reach the commands inside it and none after it."""
        saved = (dict(self.values), set(self.exported), dict(self.functions), dict(self.arrays), self.allexport,
                 list(self.positional))
        for child in node.named_children:
            self.exec(child)
        self.values, self.exported, self.functions, self.arrays, self.allexport, self.positional = saved

    def declare(self, node: tree_sitter.Node) -> None:
        """``export``/``declare``/``typeset``/``local``/``readonly`` NAME[=value]...: ``export`` and ``-x`` give the
        names the export attribute, ``export -n`` and ``+x`` take it away (bash's manual, "Bash Builtins"); under
        ``set -a`` every name assigned is exported."""
        builtin = _text(node.child(0)) if node.child_count else ""
        options = "".join(_text(c)[1:] for c in node.named_children if c.type == "word" and _text(c).startswith("-"))
        removed = "x" in "".join(_text(c)[1:] for c in node.named_children
                                 if c.type == "word" and _text(c).startswith("+"))
        removed = removed or (builtin == "export" and "n" in options)
        export = not removed and (builtin == "export" or ("x" in options and builtin != "readonly"))
        for child in node.named_children:
            if child.type == "variable_assignment":
                name = self.assign(child, options)
            elif child.type == "variable_name":
                name = _text(child)
                if "A" in options:
                    self.set_array(name, None)
                elif "a" in options and name not in self.arrays:
                    self.set_array(name, [self.values[name]] if name in self.values else [])
            else:
                continue
            if export or (self.allexport and child.type == "variable_assignment" and not removed):
                self.exported.add(name)
            elif removed:
                self.exported.discard(name)

    def for_loop(self, node: tree_sitter.Node) -> None:
        var = node.child_by_field_name("variable")
        body = node.child_by_field_name("body")
        if var is None or body is None:
            return
        values = node.children_by_field_name("value")
        words = [w for v in values for w in (_brace_sequence(v) or self.fields(v))]
        if not values:
            words = list(self.positional)
        # words split from a value not in these files (an unquoted $(seq ...) of unknown bounds, $PORTS): their count
        # is not known either (POSIX 2.6.5, field splitting)
        opaque = [_text(v) for v in values if not _brace_sequence(v)
                  and any(split and unknown_names(text) for text, split in self.segments(v))]
        line = node.start_point[0] + 1
        saved = self.repeats
        if opaque and not self.repeats:
            self.repeats = (f"the for loop at line {line} runs once per word of {' '.join(opaque)}, which these files "
                            "do not give: one pass was read")
        elif self.iterations + len(words) > MAX_ITERATIONS and not self.repeats:
            self.repeats = f"the for loop at line {line} runs more than the {MAX_ITERATIONS} passes read here"
        for word in words:
            if self.iterations >= MAX_ITERATIONS:
                break
            self.iterations += 1
            self.values[_text(var)] = word
            if self.allexport:
                self.exported.add(_text(var))
            self.exec(body)
        self.repeats = saved

    # conditions ------------------------------------------------------------------------------------------

    def decide(self, possible: int, names: Sequence[str] = ()) -> int:
        """Which of ``possible`` branches this run takes at an undecided point (``names``: the variables of unknown
        value its condition read): the forced one (:func:`_paths`), else the first."""
        if possible <= 1:
            return 0
        k = len(self.decisions)
        choice = self.forced[k] if k < len(self.forced) else 0
        self.decisions.append((choice, possible))
        self.decision_names.append(tuple(names))
        self.undecided += [n for n in names if n not in self.undecided]
        return choice

    def take(self, branches: list[tuple[bool | None, list[tuple[tree_sitter.Node, ...]]]], names: list[str]) -> None:
        """Run the branch the shell takes of ``branches`` (``(condition's status, bodies)`` in order, an
        ``else`` as ``True``): the first whose condition is true; where conditions before it are unknown,
        each of those is possible too, and :meth:`decide` picks one for this run."""
        possible: list[list[tuple[tree_sitter.Node, ...]]] = []
        for status, body in branches:
            if status is False:
                continue
            possible.append(body)
            if status is True:
                break
        else:
            possible.append([])  # no branch is taken
        for nodes in possible[self.decide(len(possible), names)] if possible else []:
            for node in nodes:
                self.exec(node)

    def if_statement(self, node: tree_sitter.Node) -> None:
        """``if``/``elif``/``else``: each condition is run (:meth:`status`) up to the first that is true, then
        the branch the shell takes (:meth:`take`)."""
        clauses = [c for c in self.if_clauses(node) if c[0]]
        otherwise = next((body for cond, body in self.if_clauses(node) if not cond), None)
        branches: list[tuple[bool | None, list[tuple[tree_sitter.Node, ...]]]] = []
        names: list[str] = []
        for cond, body in clauses:
            status = self.condition(cond, names)
            branches.append((status, [tuple(body)]))
            if status is True:
                break
        if otherwise is not None and (not branches or branches[-1][0] is not True):
            branches.append((True, [tuple(otherwise)]))
        self.take(branches, names)

    def condition(self, nodes: list[tree_sitter.Node], names: list[str]) -> bool | None:
        """The status of an ``if``/``elif`` condition (its last command's), ``None`` when not known; the names of
        the variables of unknown value it read are added to ``names``."""
        status: bool | str | None = True
        for node in nodes:
            before = len(self.unknown_read)
            status = self.status(node)
            names += [n for n in self.unknown_read[before:] if n not in names]
        return status if isinstance(status, bool) else None

    def case_statement(self, node: tree_sitter.Node) -> None:
        """``case WORD in PATTERN) ...;; esac``: the first item whose pattern matches WORD (POSIX 2.9.4.3, patterns
        as in 2.13); an unknown WORD or pattern makes that item possible, not taken."""
        value = node.child_by_field_name("value")
        word = _joined(self.segments(value)) if value is not None else ""
        names = unknown_names(word)
        branches: list[tuple[bool | None, list[tuple[tree_sitter.Node, ...]]]] = []
        for item in (c for c in node.named_children if c.type == "case_item"):
            patterns, body = [], []
            for j, child in enumerate(item.named_children):
                (patterns if item.field_name_for_named_child(j) == "value" else body).append(child)
            status: bool | None = False
            for pattern in patterns:
                text = _joined(self.segments(pattern))
                if names or unknown_names(text):
                    names += [n for n in unknown_names(text) if n not in names]
                    status = None
                elif fnmatch.fnmatchcase(word, _literal(text) if pattern.type in ("string", "raw_string") else text):
                    status = True
                    break
            branches.append((status, [tuple(c for c in body if c.type != "comment")]))
            if status is True:
                break
        self.take(branches, names)

    def status(self, node: tree_sitter.Node) -> bool | str | None:
        """Run ``node`` and return its exit status as a condition: ``True``/``False`` for a test whose operands
        are known (``[ ]``, ``[[ ]]``, ``test``, ``(( ))``, ``true``/``false``, with ``!``, ``&&``, ``||``),
        ``None`` for one whose operands are not, :data:`_RAN` for any other command (run, status not known).
        ``a && b`` / ``a || b`` run ``b`` as the shell does after a test of known status; after an unknown one,
        both ways are possible (:meth:`decide`); after any other command ``b`` runs."""
        kind = node.type
        if kind == "negated_command":
            inner = next((c for c in node.named_children if c.type != "comment"), None)
            status = self.status(inner) if inner is not None else _RAN
            return not status if isinstance(status, bool) else status
        if kind == "list" and len(node.children) >= 3:
            left, op, right = node.children[0], node.children[1].type, node.children[-1]
            status = self.status(left)
            if status == _RAN:
                return self.status(right)
            if op == "&&":
                go = status if isinstance(status, bool) else self.decide(2, self.unknown_read[-1:]) == 0
                return self.status(right) if go else False
            if op == "||":
                go = (not status) if isinstance(status, bool) else self.decide(2, self.unknown_read[-1:]) == 1
                return self.status(right) if go else True
        if kind == "test_command":
            expr = next((c for c in node.named_children if c.type != "comment"), None)
            return self.test_expression(expr, double=_text(node).startswith("[[")) if expr is not None else False
        if kind == "compound_statement" and _text(node).startswith("(("):
            return self.arithmetic_status(_text(node)[2:-2])
        if kind == "command":
            words = self.command_words(node)
            if words and words[0] in ("test", "[") and not any(c.type == "variable_assignment"
                                                                for c in node.named_children):
                return self.test_words(words[1:-1] if words[0] == "[" and words[-1:] == ["]"] else words[1:])
            if words in (["true"], [":"]):
                return True
            if words == ["false"]:
                return False
        if kind in ("list", "negated_command"):
            for child in node.named_children:
                self.exec(child)
            return _RAN
        self.exec(node)
        return _RAN

    def function_output(self, name: str, args: list[str]) -> str | None:
        """What ``$(name args...)`` prints for a function of this script (``kv() { printf '{"kv_connector":...,
        "kv_role":"%s"}' "$@"; }``, vllm-project/vllm#43509 and #43541's test scripts; ``make_kv_config() { local
        role=$1; printf '...' "${role}" ...; }``, vllm-project/router's ROCm P/D lanes), run as the shell runs it
        in the subshell of a command substitution (bash manual, "Command Substitution", "Shell Functions"): ``args``
        as ``$1``, ``$2``, ... (``$@``, ``$#``, ``shift``), ``local``/``declare``/``typeset`` and plain
        assignments (gone after the call, as the subshell's are), ``printf`` (:func:`_printf`; ``-v NAME``
        assigns), ``echo`` (``-n``; ``-e`` only without backslashes), ``cat <<WORD`` (:meth:`cat_heredoc`), ``:``
        / ``true``, ``return``, ``if``/``elif``/``else`` and ``&&``/``||`` whose tests are known, output redirected
        to stderr, and calls of other such functions; the printed text with trailing newlines removed. ``None``
        (the output unknown, never guessed) where the body does anything else, a test is unknown, or a word printed
        holds an unknown value."""
        if self.calls >= 8:
            return None
        saved = (dict(self.values), set(self.exported), {k: (list(v) if v is not None else None)
                                                         for k, v in self.arrays.items()},
                 self.positional, len(self.decisions), len(self.decision_names), len(self.undecided))
        self.positional = list(args)
        self.calls += 1
        out: list[str] = []
        try:
            done = self.printed(self.functions[name], out)
        finally:
            self.calls -= 1
            self.values, self.exported, self.arrays, self.positional = saved[:4]
            del self.decisions[saved[4]:], self.decision_names[saved[5]:], self.undecided[saved[6]:]
        return "".join(out).rstrip("\n") if done is not None else None

    def printed(self, node: tree_sitter.Node, out: list[str]) -> bool | None:
        """Run ``node`` of a function's body for :meth:`function_output`, appending what it prints to ``out``:
        ``True`` to go on, ``False`` after ``return``, ``None`` where the run cannot be followed."""
        kind = node.type
        if kind == "comment":
            return True
        if kind in ("compound_statement", "subshell"):
            for child in node.named_children:
                step = self.printed(child, out)
                if step is not True:
                    return step
            return True
        if kind == "variable_assignment":
            self.assign(node)
            return True
        if kind == "declaration_command":
            if (_text(node.child(0)) if node.child_count else "") not in ("local", "declare", "typeset"):
                return None
            self.declare(node)
            return True
        if kind == "if_statement":
            for cond, body in self.if_clauses(node):
                status = self.known_status(cond) if cond else True  # no condition: the else
                if status is None:
                    return None
                if status:
                    for child in body:
                        step = self.printed(child, out)
                        if step is not True:
                            return step
                    return True
            return True
        if kind == "list":
            status = self.list_status(node, out)
            return None if status is None else status != "return"
        if kind in ("redirected_statement", "command") and (here := self.cat_heredoc(node)) is not None:
            out.append(here)
            return True
        if kind == "redirected_statement":
            body = node.child_by_field_name("body")
            redirects = [_text(c).replace(" ", "") for c in node.named_children
                         if c.type in ("file_redirect", "heredoc_redirect", "herestring_redirect")]
            if body is None or not all(r.startswith("2>") or r in (">&2", "1>&2") for r in redirects):
                return None
            step = self.printed(body, [] if redirects and redirects[-1] in (">&2", "1>&2") else out)
            return step
        if kind != "command":
            return None
        words = self.command_words(node)
        if not words or any(c.type == "variable_assignment" for c in node.named_children):
            return None
        if words[0] in (":", "true"):
            return True
        if words[0] == "return" and len(words) <= 2:
            return False
        if words[0] == "shift" and len(words) <= 2:
            count = words[1] if len(words) == 2 else "1"
            if not count.isdigit() or int(count) > len(self.positional):
                return None
            self.positional = self.positional[int(count):]
            return True
        if any(unknown_names(w) for w in words):
            return None
        if words[0] in self.functions:
            text = self.function_output(words[0], words[1:])
            if text is None:
                return None
            out.append(text + "\n")  # its trailing newlines are removed only by the substitution around it
            return True
        if words[0] == "printf":
            if words[1:2] == ["-v"] and len(words) > 3 and _NAME.match(words[2]):
                value = _printf(words[3], words[4:])
                if value is None:
                    return None
                self.values[words[2]] = value
                return True
            if len(words) < 2 or words[1].startswith("-"):
                return None
            value = _printf(words[1], words[2:])
            if value is None:
                return None
            out.append(value)
            return True
        if words[0] == "echo":
            rest = words[1:]
            options = ""
            while rest and re.fullmatch(r"-[neE]+", rest[0]):
                options += rest.pop(0)[1:]
            if "e" in options and any("\\" in w for w in rest):
                return None
            out.append(" ".join(rest) + ("" if "n" in options else "\n"))
            return True
        return None

    def list_status(self, node: tree_sitter.Node, out: list[str]) -> bool | str | None:
        """Run ``a && b`` / ``a || b`` (and a part of one) in a function's body for :meth:`printed`: its status,
        ``"return"`` after ``return``, ``None`` where it cannot be followed. A test's status must be known
        (:meth:`known_status`); a command :meth:`printed` runs (``echo``, ``printf``) succeeds."""
        if node.type == "list" and len(node.children) == 3 and node.children[1].type in ("&&", "||"):
            left, op, right = node.children
            status = self.list_status(left, out)
            if status is None or status == "return" or status != (op.type == "&&"):
                return status
            return self.list_status(right, out)
        if (status := self.known_status([node])) is not None:
            return status
        step = self.printed(node, out)
        return None if step is None else True if step else "return"

    def known_status(self, nodes: list[tree_sitter.Node]) -> bool | None:
        """The status of a function's condition (:meth:`printed`) made of tests only (``[ ]``, ``[[ ]]``, ``test``,
        ``(( ))``, ``true``/``false``, ``!``, ``&&``/``||`` of these), ``None`` when it is anything else or not
        known."""
        def tests_only(node: tree_sitter.Node) -> bool:
            if node.type in ("negated_command", "list"):
                return all(tests_only(c) for c in node.named_children if c.type != "comment")
            if node.type == "test_command" or (node.type == "compound_statement" and _text(node).startswith("((")):
                return True
            if node.type == "command":
                name = node.child_by_field_name("name")
                return _text(name) in ("test", "[", "true", "false", ":")
            return False

        if not nodes or not all(tests_only(n) for n in nodes):
            return None
        before = len(self.decisions)
        status = self.condition(nodes, [])
        if len(self.decisions) > before:  # a test of unknown status inside ``&&``/``||``
            return None
        return status

    def if_clauses(self, node: tree_sitter.Node) -> list[tuple[list[tree_sitter.Node], list[tree_sitter.Node]]]:
        """An ``if`` statement's ``(condition, body)`` pairs in order, an ``else`` as an empty condition that
        :meth:`known_status` does not read (it is taken as true by :meth:`if_statement`)."""
        clauses: list[tuple[list[tree_sitter.Node], list[tree_sitter.Node]]] = []
        for clause in [node, *[c for c in node.named_children if c.type in ("elif_clause", "else_clause")]]:
            if clause.type == "else_clause":
                clauses.append(([], [c for c in clause.named_children if c.type != "comment"]))
                continue
            cond: list[tree_sitter.Node] = []
            body: list[tree_sitter.Node] = []
            seen_then = False
            for child in clause.children:
                if child.type == "then":
                    seen_then = True
                elif child.is_named and child.type not in ("comment", "elif_clause", "else_clause"):
                    (body if seen_then else cond).append(child)
            clauses.append((cond, body))
        return clauses

    def command_words(self, node: tree_sitter.Node) -> list[str]:
        """A simple command's words after expansion (assignments and redirections left out)."""
        words: list[str] = []
        for child in node.named_children:
            if child.type == "command_name":
                words += [w for sub in child.named_children for w in self.fields(sub)]
            elif child.type not in ("variable_assignment", "file_redirect", "heredoc_redirect", "herestring_redirect"):
                words += self.fields(child)
        return words

    @property
    def unknown_read(self) -> list[str]:
        """Names of the variables of unknown value the tests of this run read, in order (see :meth:`operand`)."""
        return self._unknown_read

    def operand(self, node: tree_sitter.Node) -> str | None:
        """A test operand's text after expansion, ``None`` (and its names noted) when it holds an unknown value."""
        text = _joined(self.segments(node))
        names = unknown_names(text)
        if names:
            self._unknown_read += names
            return None
        return text

    def emptiness_operand(self, node: tree_sitter.Node) -> str | None:
        """The operand of a ``-z``/``-n`` test: as :meth:`operand`, except that, where the image's ``ENV`` is read
        (:attr:`~pdd_operator.vllm.expansion.ContainerEnv.image`: a listed image, or the base of a Dockerfile among
        the files, whose own ``ENV`` is then the container's), a variable certainly not set when the shell starts
        (:meth:`~pdd_operator.vllm.expansion.ContainerEnv.unset`: no ``env``, ``valueFrom``, unread ``envFrom``,
        platform or image ``ENV`` sets it) expands to nothing, as bash expands an unset name (noted in
        :attr:`assumed_empty`, as a default applied on that assumption is). Where the image's ``ENV`` is not read it
        may set the name, and the operand stays unknown."""
        text = _joined(self.segments(node))
        names = unknown_names(text)
        if names and self.env.image and all(self.env.unset(n) for n in names):
            self.assumed_empty += [n for n in names if n not in self.assumed_empty]
            return _UNKNOWN_RE.sub("", text)
        return self.operand(node)

    def test_expression(self, node: tree_sitter.Node, *, double: bool) -> bool | None:
        """A ``[ ]`` (``double`` False) or ``[[ ]]`` expression as tree-sitter-bash parses it (bash manual,
        "Bash Conditional Expressions"; POSIX ``test``)."""
        kind = node.type
        if kind == "parenthesized_expression":
            inner = next((c for c in node.named_children if c.type != "comment"), None)
            return self.test_expression(inner, double=double) if inner is not None else None
        if kind == "unary_expression":
            op = _text(node.child_by_field_name("operator") or node.child(0))
            arg = next((c for c in node.named_children if c != node.child_by_field_name("operator")), None)
            if op == "!":
                inner = self.test_expression(arg, double=double) if arg is not None else None
                return None if inner is None else not inner
            text = self.emptiness_operand(arg) if arg is not None and op in ("-z", "-n") else \
                self.operand(arg) if arg is not None else ""
            if text is None:
                return None
            return {"-z": text == "", "-n": text != ""}.get(op)  # file tests and others: not known here
        if kind == "binary_expression":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            op = _text(node.child_by_field_name("operator"))
            if op in ("&&", "||", "-a", "-o"):
                a = self.test_expression(left, double=double) if left is not None else None
                if a is (op in ("||", "-o")):
                    return a  # short-circuit: the other side does not change the result
                b = self.test_expression(right, double=double) if right is not None else None
                return b if a is not None else (None if b is not (op in ("||", "-o")) else b)
            a = self.operand(left) if left is not None else ""
            b = self.operand(right) if right is not None else ""
            if op in ("-eq", "-ne", "-gt", "-ge", "-lt", "-le") and double and a is not None and b is not None:
                a, b = self.arithmetic(a or "0"), self.arithmetic(b or "0")  # [[ ]] evaluates them arithmetically
                if unknown_names(a + b):
                    self._unknown_read += unknown_names(a + b)
                    return None
            if a is None or b is None:
                return None
            pattern = double and right is not None and right.type in ("extglob_pattern", "word")
            return _compare(a, op, b, pattern=pattern)
        text = self.operand(node)  # [ WORD ]: true when WORD is not empty
        return None if text is None else text != ""

    def test_words(self, words: list[str]) -> bool | None:
        """``test ARGS`` / ``[ ARGS ]`` on expanded words, as POSIX ``test`` reads 0-4 arguments."""
        if any(unknown_names(w) for w in words):
            self._unknown_read += [n for w in words for n in unknown_names(w)]
            return None
        if words[:1] == ["!"]:
            inner = self.test_words(words[1:])
            return None if inner is None else not inner
        if len(words) == 0:
            return False
        if len(words) == 1:
            return words[0] != ""
        if len(words) == 2:
            return {"-z": words[1] == "", "-n": words[1] != ""}.get(words[0])
        if len(words) == 3:
            return _compare(words[0], words[1], words[2], pattern=False)
        return None

    def arithmetic_status(self, expr: str) -> bool | None:
        """``(( EXPR ))``: true when the expression is not zero (bash manual, "Shell Arithmetic")."""
        value = self.arithmetic(expr)
        if unknown_names(value):
            self._unknown_read += unknown_names(value)
            return None
        return value not in ("0", "")

    def command(self, node: tree_sitter.Node) -> None:
        prefix: dict[str, str] = {}
        words: list[str] = []
        for child in node.named_children:
            if child.type == "variable_assignment":
                name, value = self.assignment(child)
                prefix[name] = value
            elif child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                continue
            elif child.type == "command_name":
                words += [w for sub in child.named_children for w in self.fields(sub)]
            else:
                words += self.argument_fields(child)
        if words and (blank := _escaped_trailing_blank(node)) is not None:
            words.append(blank)
        broken, self.broken = self.broken, None
        if broken is not None and words and words[0].startswith("-") and node.start_point[0] == broken[1] + 1:
            # the options of the lines after a backslash that escaped a blank (_escaped_trailing_blank): bash runs
            # them as a command of their own, but they are the engine's as the user wrote it, kept with its words
            # (the blank word among them, which its parser refuses: pdd_operator.vllm.flags.malformed_options)
            launch = self.launches[broken[0]]
            self.launches[broken[0]] = replace(launch, argv=launch.argv + tuple(words))
            if blank is not None:  # this line too ends so: the next option line is the engine's as well
                self.broken = (broken[0], node.end_point[0])
            return
        if not words:
            self.values.update(prefix)
            if self.allexport:
                self.exported |= set(prefix)
            return
        if words[0] == "set":
            self.set_options(words[1:])
        if words[0] in ("read", "mapfile", "readarray"):
            self.filled_arrays(words)
        if words[0] in self.functions:
            saved, self.positional = self.positional, words[1:]
            saved_values, saved_exported = dict(self.values), set(self.exported)
            self.values.update(prefix)
            self.exported |= set(prefix)
            self.frames += 1
            self.exec(self.functions[words[0]])
            self.frames -= 1
            self.positional = saved
            self.exported -= set(prefix) - saved_exported
            for name in prefix:  # prefix assignments last for the call only
                if name in saved_values:
                    self.values[name] = saved_values[name]
                else:
                    self.values.pop(name, None)
            return
        if words[0] == "eval" or words[:2] == ["exec", "eval"]:
            self.values.update(prefix)  # assignments before a special built-in stay in the shell (POSIX 2.14)
            saved_line, self.outer_line = self.outer_line, self.outer_line or node.start_point[0] + 1
            self.evaluate(words[words.index("eval") + 1:])
            self.outer_line = saved_line
            return
        docker = docker_run(words, lambda name: self.environment().get(name))
        if docker is not None:
            # a container the script starts: its command is the engine's, its environment only what -e gives it; read
            # where it shares the host's network (ports and addresses as a host process's), else left unread
            entry = entry_point(docker.command) or image_engine(docker)
            if not entry and docker.shell and not unknown_names(docker.image):
                self.inside = (self.outer_line or node.start_point[0] + 1, docker.image)
            if entry and docker.host_network and not docker.env_file:
                self.launches.append(Launch(tuple(entry), dict(docker.env), self.outer_line or node.start_point[0] + 1,
                                            wrapper=tuple(self.outer + words[:docker.image_at + 1]),
                                            repeats=self.repeats, frontend=frontend(docker.command)))
            return
        entry = entry_point(words)
        if not entry and (own := launcher_engine(words)) is not None:
            # a Python program of its own that builds the engine from vLLM's options, in its process (no API server)
            self.launches.append(Launch(tuple(own[1]), {**self.environment(), **prefix},
                                        self.outer_line or node.start_point[0] + 1,
                                        wrapper=(IN_PROCESS_ENGINE, *self.outer, *words[:own[0]]), repeats=self.repeats,
                                        inside=self.inside))
            return
        run = words[1:] if words[0] in ("exec", "nohup") else words
        if not entry and run and _UNKNOWN_RE.fullmatch(run[0]) and not _inline_code_no_server(run):
            # the command itself is a value not in these files (``$VLLM_CMD``, ``exec $CMD``, ``eval "$CMD"``): kept as
            # a launch whose argv starts with that unknown (:func:`opaque_command`), so readers say "not checked"
            self.launches.append(Launch(tuple(run), {}, self.outer_line or node.start_point[0] + 1,
                                        repeats=self.repeats, inside=self.inside))
            return
        if entry:
            env = self.environment()
            # the words before the entry point (a vllm-rs launch's entry drops the ``--``: counted from its program)
            start = (next(i for i, w in enumerate(words) if w.rsplit("/", 1)[-1] == RUST_FRONTEND)
                     if frontend(words) else len(words) - len(entry))
            if words[0] == "env" or "env" in words[:start]:
                env.update(m.groups() for w in words[:start] if (m := _ASSIGN_WORD.match(w)))
                # env(1): -u NAME / --unset=NAME removes NAME from the command's environment
                for i, w in enumerate(words[:start]):
                    name = words[i + 1] if w == "-u" and i + 1 < start else w[len("--unset="):] if w.startswith(
                        "--unset=") else None
                    if name:
                        env.pop(name, None)
            env.update(prefix)
            env.update(apptainer_env(words[:start]))
            self.launches.append(Launch(tuple(entry), env, self.outer_line or node.start_point[0] + 1,
                                        wrapper=tuple(self.outer + words[:start]), repeats=self.repeats,
                                        inside=self.inside, frontend=frontend(words)))
            if words[-1] and not words[-1].strip():  # its line ended with a backslash before a blank
                self.broken = (len(self.launches) - 1, node.end_point[0])
            return
        # the proxy's program among its first words, or after a launcher's options (``srun -N1 --overlap ... python3
        # toy_proxy_server.py ...``)
        proxy = looks_like_proxy(words)
        if proxy:
            self.proxies.append(tuple(words))
        named = proxy_roles(words) if proxy else {}
        if named and not set(named) & set(self.proxy_roles):
            self.proxy_roles.update(named)
        remote = _ssh_command(words)
        if remote is not None:
            # ssh(1): the words after the host, joined by spaces, run under the remote user's shell, which gets none
            # of this shell's exported variables (only what the remote command line itself sets)
            host_end, text = remote
            saved_outer, self.outer = self.outer, self.outer + words[:host_end]
            saved_line, self.outer_line = self.outer_line, self.outer_line or node.start_point[0] + 1
            saved_exported, self.exported = self.exported, set()
            saved_inside, self.inside = self.inside, None  # another host: not inside this host's container
            self.child_shell(text)
            self.outer, self.outer_line, self.exported, self.inside = saved_outer, saved_line, saved_exported, saved_inside
            return
        for i, word in enumerate(words[:-1]):
            if word.rsplit("/", 1)[-1] in ("sh", "bash") and words[i + 1] in ("-c", "-lc", "-ec") and i + 2 < len(words):
                saved_outer, self.outer = self.outer, self.outer + words[:i]
                saved_line, self.outer_line = self.outer_line, self.outer_line or node.start_point[0] + 1
                self.child_shell(words[i + 2])
                self.outer, self.outer_line = saved_outer, saved_line
                return

    def set_options(self, args: list[str]) -> None:
        """``set -a`` / ``set -o allexport`` (on) and ``set +a`` / ``set +o allexport`` (off), alone or among other
        options (``set -ea``); the options end at ``--`` or the first operand (POSIX 2.14 ``set``)."""
        for i, word in enumerate(args):
            if word in ("--", "-") or word[:1] not in ("-", "+"):
                return
            if word in ("-o", "+o"):
                if args[i + 1:i + 2] == ["allexport"]:
                    self.allexport = word == "-o"
            elif "a" in word[1:]:
                self.allexport = word[0] == "-"

    def environment(self) -> dict[str, str]:
        """The variables a command started now gets beyond the container's ``env``: those exported (``export``,
        ``declare -x``, ``set -a``), and those the container's environment held when the shell started that the
        script has given a new value: the shell marks every variable it imports from its environment for export
        (POSIX 2.5.3; bash's manual, "Environment"), so ``NAME=value`` alone changes the engine's ``NAME`` there
        and only there. A plain ``NAME=value`` of any other name is a shell variable that no engine sees
        (vllm#40993: a side-channel host assigned without ``export`` never reached vLLM, which used
        ``localhost``). Where only an unread ``envFrom`` source may define ``NAME``, whether the engine gets the new
        value is not known: :func:`~pdd_operator.vllm.expansion.unknown`. (The kubelet's service variables,
        ``<SVC>_PORT``, are not taken to hold a vLLM variable's name.)"""
        out = {name: self.values[name] for name in sorted(self.exported)
               if name in self.values and name not in self.arrays}
        start = self.env
        for name, value in self.values.items():
            if name in out or name in self.arrays or name.startswith("__pdd_eval_"):
                continue
            if name in start.values:
                if value != start.values[name]:
                    out[name] = value
            elif name in start.opaque or name in start.image:
                out[name] = value
            elif start.may_define(name):
                out[name] = unknown(name)
        return out

    def evaluate(self, args: list[str]) -> None:
        """``eval ARGS``: the arguments, joined by single spaces, are read and run as shell input in this shell
        (POSIX Shell Command Language 2.14, "eval"), so ``CMD="vllm serve m --kv-transfer-config '{...}'"; eval
        "$CMD"`` starts the engine with the quotes of the value applied. A part of unknown value
        (``<unknown:NAME>``) is not read as shell text: it is put back through a variable of this shell, so it
        expands to the same unknown and rules reading the flags it may carry say "not checked"."""
        self.reread(" ".join(args))

    def reread(self, text: str) -> None:
        """Run ``text``, a value of this script read again as shell input (``eval``, ``sh -c "$CMD"``), with each
        unknown part (``<unknown:NAME>``) held in a variable of this shell: ``${__pdd_eval_N}`` is never shell
        syntax, where ``<`` and ``>`` would be redirections that drop the word before them
        (``F="$B $a"; eval "$F &"``). Inside single quotes of that text the shell expands nothing, so the same
        unknown is put back where ``${__pdd_eval_N}`` stayed literal in what the text started or set
        (``F="vllm serve m --x '$X'"; eval "$F"``). N counts over the whole script, so a nested ``eval`` holds
        its own."""
        held: dict[str, str] = {}

        def hold(match: re.Match[str]) -> str:
            name = f"__pdd_eval_{self.held}"
            self.held += 1
            held[name] = match.group(0)
            return "${" + name + "}"

        def back(value: str) -> str:
            return _HELD_RE.sub(lambda m: held.get(m.group(1), m.group(0)), value)

        text = _UNKNOWN_RE.sub(hold, text)
        self.values.update(held)
        start, before = len(self.launches), dict(self.values)
        self.run(text)
        for name in held:
            self.values.pop(name, None)
        if not held:
            return
        self.launches[start:] = [
            replace(launch, argv=tuple(map(back, launch.argv)), wrapper=tuple(map(back, launch.wrapper)),
                    env={k: back(v) for k, v in launch.env.items()})
            for launch in self.launches[start:]]
        self.values.update({k: back(v) for k, v in self.values.items() if before.get(k) != v})

    def child_shell(self, text: str) -> None:
        """Run ``text`` as the script of another shell process this one starts (``bash -c '...'``, what ``srun`` or
        ``ssh`` runs): it gets this shell's environment, never its arrays (bash's manual, "Arrays": array variables
        may not be exported), so an array of this shell read there (``${nodes[0]}``, ``${nodes[@]}``) is certainly
        unset and expands to nothing (:attr:`absent`), unless the text sets it itself. The text is read as
        :meth:`reread` reads it; this shell's arrays are back afterwards."""
        hidden = {name: (elements, self.values.get(name)) for name, elements in self.arrays.items()}
        saved_absent, saved_lists = self.absent, set(self.node_lists)
        self.absent, self.node_lists = saved_absent | set(hidden), set()
        for name in hidden:
            del self.arrays[name]
            self.values.pop(name, None)
        self.reread(text)
        self.absent = saved_absent
        for name, (elements, value) in hidden.items():
            self.arrays[name] = elements
            if value is not None:
                self.values[name] = value
        self.node_lists = saved_lists

    def filled_arrays(self, words: list[str]) -> None:
        """``read -a NAME`` / ``mapfile NAME`` / ``readarray NAME`` fill an array from input: its elements are
        not known (``mapfile`` without a name fills ``MAPFILE``). Options are read as bash's builtins do
        (getopt: a letter that takes an argument takes the rest of its word or the next word)."""
        takes = "adinNptu" if words[0] == "read" else "dnOsuCc"
        options: dict[str, str] = {}
        i = 1
        while i < len(words) and words[i].startswith("-") and words[i] != "--":
            word, i = words[i], i + 1
            for j, letter in enumerate(word[1:], 1):
                if letter in takes:
                    options[letter] = word[j + 1:] or (words[i] if i < len(words) else "")
                    i += 0 if word[j + 1:] else 1
                    break
        rest = words[i + (i < len(words) and words[i] == "--"):]
        if words[0] == "read":
            if "a" in options:
                self.set_array(options["a"], None)
            return
        self.set_array(rest[0] if rest else "MAPFILE", None)

    # arrays -----------------------------------------------------------------------------------------------

    def set_array(self, name: str, elements: list[str] | None) -> None:
        """Make ``name`` an indexed array (``None``: elements not known); ``$name`` is its element 0."""
        self.arrays[name] = elements
        self.node_lists.discard(name)
        self.values[name] = unknown(name) if elements is None else elements[0] if elements else ""

    def assign(self, node: tree_sitter.Node, options: str = "") -> str:
        """Run one assignment (``NAME=w``, ``NAME+=w``, ``NAME=(...)``, ``NAME[i]=w``; ``options``: the letters of a
        ``declare``'s options, ``a`` or ``A``) and return the name it sets."""
        target = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        append = any(c.type == "+=" for c in node.children)
        if target is not None and target.type == "subscript":
            name = _text(target.child_by_field_name("name"))
            index = self.index(target.child_by_field_name("index"))
            elements = self.arrays.get(name, [self.values[name]] if name in self.values else [])
            text = _joined(self.segments(value)) if value is not None else ""
            if elements is None or index is None or not -len(elements) <= index <= len(elements) or "A" in options:
                self.set_array(name, None)  # a sparse or associative array: not followed
            elif index == len(elements):
                self.set_array(name, [*elements, text])
            else:
                old = elements[index] if append else ""
                self.set_array(name, [*elements[:index], old + text, *elements[index + 1:]]
                               if index >= 0 else [*elements[:index], old + text, *elements[index:][1:]])
            return name
        name = _text(target)
        if "A" in options:
            self.set_array(name, None)
        elif value is not None and value.type == "array":
            words = [w for w in value.named_children if w.type != "comment"]  # a comment line inside (...)
            if any(re.match(r"^\[[^]]*\]\+?=", _text(w)) for w in words):
                self.set_array(name, None)  # explicit indices inside (...): not followed
            else:
                old = self.arrays.get(name, [self.values[name]] if name in self.values else []) if append else []
                parts = [self.fields_split_unknown(w) for w in words]
                new = [f for got, _ in parts for f in got]
                # an unquoted expansion of unknown value (``($(scontrol show hostnames ...))``) splits into fields
                # whose number is not known: so are the array's elements
                split = any(unsure for _, unsure in parts)
                self.set_array(name, None if old is None or split else [*old, *new])
                if not append and len(words) == 1 and _JOB_HOSTNAMES.fullmatch(_text(words[0])):
                    self.node_lists.add(name)  # the job's nodes, in order (:data:`JOB_NODES`)
        else:
            text = _joined(self.segments(value)) if value is not None else ""
            if name in self.arrays or "a" in options:  # a scalar assigned to an array sets its element 0
                elements = self.arrays.get(name, [self.values[name]] if name in self.values else [])
                first = ((elements[0] if elements else "") + text) if append and elements is not None else text
                self.set_array(name, None if elements is None else [first, *elements[1:]])
            else:
                self.values[name] = self.values.get(name, "") + text if append else text
        return name

    def index(self, node: tree_sitter.Node | None) -> int | None:
        """An indexed array's subscript: arithmetic on known integers (bash evaluates it as ``$((...))``)."""
        if node is None:
            return None
        text = _joined(self.segments(node))
        value = self.arithmetic(text)
        return int(value) if re.fullmatch(r"-?\d+", value) else None

    def array_expansion(self, node: tree_sitter.Node) -> tuple[list[str], bool] | str | None:
        """An ``expansion`` node that names an array element or all elements: ``(fields, all_at)`` for
        ``${A[@]}``/``${!A[@]}`` (``all_at``: ``@``, whose quoted form keeps one field per element) or ``${A[*]}``;
        the text of ``${A[N]}``/``${#A[@]}``/``${#A[N]}``; ``None`` when ``node`` has no subscript."""
        subscript = next((c for c in node.named_children if c.type == "subscript"), None)
        if subscript is None:
            return None
        name = _text(subscript.child_by_field_name("name"))
        index_node = subscript.child_by_field_name("index")
        index_text = _text(index_node)
        prefix = _text(node.child(1)) if node.child_count > 1 and node.child(1).type in ("#", "!") else ""
        rest = [c for c in node.children[node.children.index(subscript) + 1:] if c.type != "}"]
        elements = self.arrays.get(name, [self.values[name]] if name in self.values else
                                   [] if name in self.absent else None)
        if name in self.node_lists and prefix == "":
            return self.job_nodes(node, subscript, index_node, index_text)
        if elements is None or rest:
            return unknown(name)
        if index_text in ("@", "*"):
            if prefix == "#":
                return str(len(elements))
            fields = [str(i) for i in range(len(elements))] if prefix == "!" else elements
            return fields, index_text == "@"
        index = self.index(index_node)
        if index is None or prefix == "!":
            return unknown(name)
        element = elements[index] if -len(elements) <= index < len(elements) else ""
        return str(len(element)) if prefix == "#" else element

    def job_nodes(self, node: tree_sitter.Node, subscript: tree_sitter.Node, index_node: tree_sitter.Node | None,
                  index_text: str) -> tuple[list[str], bool] | str:
        """An element or slice of an array of the job's nodes (:attr:`node_lists`): ``${A[N]}`` is the token of node
        N, ``${A[@]:O:L}`` / ``${A[*]:O:L}`` (bash's manual, "Shell Parameter Expansion": L elements from index O)
        the token of nodes O to O+L-1 (:func:`job_nodes_token`), with O and L known non-negative integers; anything
        else is the array's unknown value. Node names stay unknown to every rule; only where an engine runs reads
        these tokens (:func:`pdd_operator.compat.script_inputs` ``srun --nodelist``)."""
        name = _text(subscript.child_by_field_name("name"))
        if index_text not in ("@", "*"):
            rest = _text(node)[subscript.end_byte - node.start_byte:]
            index = self.index(index_node)
            return job_nodes_token(index, 1) if rest == "}" and index is not None and index >= 0 else unknown(name)
        match = re.fullmatch(r":([^:}]*):([^:}]*)\}", _text(node)[subscript.end_byte - node.start_byte:])
        if match is None:
            return unknown(name)
        start, count = (self.arithmetic(part.strip()) for part in match.groups())
        if not (start.isdigit() and count.isdigit()) or int(count) == 0:
            return unknown(name)
        return [job_nodes_token(int(start), int(count))], index_text == "@"

    # words ------------------------------------------------------------------------------------------------

    def assignment(self, node: tree_sitter.Node) -> tuple[str, str]:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        return (_text(name) if name is not None else "", _joined(self.segments(value)) if value is not None else "")

    def argument_fields(self, node: tree_sitter.Node) -> list[str]:
        """The fields of one argument of a command (:meth:`fields`), where an empty field that only an empty default
        of a variable taken as unset made (``"${X:-}"``, ``"${X-}"``, ``"${X:=}"``: ``ContainerEnv.unset``) is
        :func:`~pdd_operator.vllm.expansion.unknown` of that variable. Such a default states no value: it is ``$X``
        spelled to survive ``set -u``, and the image's ``ENV``, the pod's env, a sourced file or the caller may set
        ``X``, so the word is no empty argument vLLM's parser would certainly refuse (``cli-option-malformed``); an
        ``X`` the script or the container's env sets to empty stays an empty word, and conditions and assignments
        keep the default (the module docstring)."""
        start = len(self.assumed_empty)
        out = self.fields(node)
        names = self.assumed_empty[start:]
        if not out and (argument := next((n for n in names if _SCRIPT_ARGUMENT.fullmatch(n)), None)):
            return [unknown(argument)]  # an unquoted $N of the script's own arguments: not known, not no word
        return [unknown(names[0]) if not f and names else f for f in out]

    def fields(self, node: tree_sitter.Node) -> list[str]:
        """The fields one argument expands to (unquoted expansions split on blanks, POSIX 2.6.5)."""
        return _split_fields(self.segments(node))

    def fields_split_unknown(self, node: tree_sitter.Node) -> tuple[list[str], bool]:
        """:meth:`fields`, and whether an unquoted expansion of unknown value stands in the argument (so that how
        many fields it gives is not known: ``$(scontrol show hostnames ...)``, not ``--x="$UNKNOWN"``)."""
        segments = self.segments(node)
        return _split_fields(segments), any(splittable and unknown_names(text) for text, splittable in segments)

    def segments(self, node: tree_sitter.Node, quoted: bool = False) -> list[tuple[str, bool]]:
        """``node`` as ``(text, splittable)`` pieces: splittable ones are unquoted expansion results."""
        kind = node.type
        if kind in ("word", "number"):
            return [(_unescape(_text(node)), False)]
        if kind == "raw_string":
            return [(_text(node)[1:-1], False)]
        if kind == "ansi_c_string":
            return [(_text(node)[2:-1], False)]
        if kind in ("string", "translated_string", "concatenation"):
            return self.spliced(node, quoted=quoted or kind != "concatenation")
        if kind == "string_content":
            return [(re.sub(r"\\([$`\"\\])", r"\1", _text(node)), False)]
        if kind == "expansion" and isinstance(array := self.array_expansion(node), tuple):
            fields, all_at = array
            if not quoted:
                return [(" ".join(fields), True)]
            if not all_at:
                return [(" ".join(fields), False)]
            out = [(_FIELD_BREAK, False)] * (2 * len(fields) - 1)
            out[::2] = [(f, False) for f in fields]
            return out
        if kind in ("simple_expansion", "expansion", "command_substitution", "arithmetic_expansion"):
            # tree-sitter-bash gives ``"$B $a"``'s second expansion the blank before it (``' $a'``): that blank is
            # the string's own text, kept as such (:func:`_blank_led`)
            lead, text = _blank_led(node)
            every = text in ("$@", "${@}")  # "$@": one field per positional parameter, even quoted
            value = [(self.expansion(node), (every or not quoted) and kind != "arithmetic_expansion")]
            return [(lead, False)] + value if lead else value
        return [(_text(node), False)]

    def spliced(self, node: tree_sitter.Node, *, quoted: bool) -> list[tuple[str, bool]]:
        """A string or concatenation: its children's pieces, with the source between them (quotes dropped)."""
        src = node.text or b""
        base = node.start_byte
        out: list[tuple[str, bool]] = []
        pos = base + (1 if node.type == "string" else 2 if node.type == "translated_string" else 0)
        end = node.end_byte - (1 if node.type in ("string", "translated_string") else 0)
        for child in node.named_children:
            if child.start_byte > pos:
                out.append((src[pos - base:child.start_byte - base].decode(errors="replace"), False))
            out += self.segments(child, quoted=quoted)
            pos = child.end_byte
        if end > pos:
            out.append((src[pos - base:end - base].decode(errors="replace"), False))
        return out

    def expansion(self, node: tree_sitter.Node) -> str:
        text = _blank_led(node)[1]
        if node.type == "command_substitution":
            words = (text[2:-1] if text.startswith("$(") else text[1:-1]).split()
            inner = node.named_children[0] if node.named_children else None
            if words[:1] == ["seq"] and inner is not None and inner.type == "command":
                counted = _seq(self.command_words(inner)[1:])
                if counted is not None:
                    return "\n".join(counted)
            if inner is not None and inner.type == "command" and words[:1] and words[0] in self.functions:
                called = self.command_words(inner)
                printed = self.function_output(called[0], called[1:])
                if printed is not None:
                    return printed
            if inner is not None and (here := self.cat_heredoc(inner)) is not None:
                return here.rstrip("\n")  # command substitution drops trailing newlines (POSIX 2.6.3)
            if (echoed := self.echoed_nodes(node)) is not None:
                return echoed
            if self.env.gpus is not None and GPU_COUNT_COMMAND.match(text):
                return str(self.env.gpus)  # the GPUs the container was handed
            return unknown(words[0] if words and _NAME.match(words[0]) else "command")
        if node.type == "arithmetic_expansion":
            return self.arithmetic(text[3:-2])
        if node.type == "simple_expansion":
            return self.variable(text[1:], None, None)
        if text in ("${@}", "${*}"):
            return self.variable(text[2], None, None)
        array = self.array_expansion(node)
        if array is not None:
            return array if isinstance(array, str) else " ".join(array[0])
        braced = _BRACED.match(text)
        case = _CASE_MODIFIED.match(text)
        if case:  # ${V,,} ${V^^} ${V,} ${V^} (bash manual, "Shell Parameter Expansion", case modification)
            value = self.variable(case.group(1), None, None)
            if unknown_names(value):
                return value
            change = str.lower if case.group(2)[0] == "," else str.upper
            return change(value) if len(case.group(2)) == 2 else change(value[:1]) + value[1:]
        if not braced:
            return unknown(_first_name(text))
        name, op, _ = braced.groups()
        rest = [c for c in node.named_children if c.type not in ("variable_name", "special_variable_name")]
        word = _joined([t for c in rest for t in self.segments(c, quoted=True)]) if op else None
        return self.variable(name, op, word)

    def echoed_nodes(self, node: tree_sitter.Node) -> str | None:
        """The output of ``$(IFS=,; echo "${A[*]:0:4}")`` (assignments, then one ``echo`` of one word) where that word
        is a :data:`JOB_NODES` token: the token, however ``IFS`` joins the names it stands for; ``None`` otherwise.
        The assignments are the substitution's subshell's (bash's manual, "Command Substitution"): undone after."""
        children = [c for c in node.named_children if c.type != "comment"]
        if not children or children[-1].type != "command" or any(
                c.type != "variable_assignment" for c in children[:-1]):
            return None
        saved = dict(self.values)
        for c in children[:-1]:
            self.assign(c)
        words = self.command_words(children[-1])
        self.values = saved
        return words[1] if len(words) == 2 and words[0] == "echo" and JOB_NODES.fullmatch(words[1]) else None

    def cat_heredoc(self, node: tree_sitter.Node) -> str | None:
        """The output of ``cat <<WORD ... WORD`` (a ``cat`` with no operands reading one here-document, as in
        ``--kv-transfer-config "$(cat <<JSON ... JSON)"``): the here-document's lines, with parameter expansion,
        command substitution and arithmetic expansion applied where WORD is not quoted and taken literally where it
        is (POSIX 2.7.4 "Here-Document"); ``<<-`` strips the lines' leading tabs. ``None`` for any other command."""
        if node.type != "redirected_statement":
            return None
        body = node.child_by_field_name("body")
        redirects = [c for c in node.named_children if c.type == "heredoc_redirect"]
        if (body is None or body.type != "command" or len(redirects) != 1
                or [_text(c) for c in body.named_children] != ["cat"]
                or any(c.type != "heredoc_redirect" for c in node.named_children if c != body)):
            return None
        redirect = redirects[0]
        start = next((c for c in redirect.named_children if c.type == "heredoc_start"), None)
        content = next((c for c in redirect.named_children if c.type == "heredoc_body"), None)
        if start is None:
            return None
        if content is None:
            return ""
        src, base = content.text or b"", content.start_byte
        if re.search(r"['\"\\]", _text(start)):
            text = src.decode(errors="replace")
        else:
            pieces, pos = [], base
            for child in content.named_children:
                if child.type in ("simple_expansion", "expansion", "command_substitution", "arithmetic_expansion"):
                    pieces += [src[pos - base:child.start_byte - base].decode(errors="replace"), self.expansion(child)]
                    pos = child.end_byte
            pieces.append(src[pos - base:].decode(errors="replace"))
            text = "".join(pieces)
        if _text(redirect).startswith("<<-"):
            text = "\n".join(line.lstrip("\t") for line in text.split("\n"))
        return text

    def variable(self, name: str, op: str | None, word: str | None) -> str:
        if name in ("@", "*"):
            return " ".join(self.positional)
        if name == "#" and self.calls:  # inside a function read by function_output: its arguments are all known
            return str(len(self.positional))
        if name.isdigit():
            index = int(name) - 1
            value = self.positional[index] if 0 <= index < len(self.positional) else ""
            if index >= len(self.positional) and op is None and not self.frames and not self.calls:
                # an argument of the script itself, which its caller may give (argument_fields: not an empty word)
                self.assumed_empty.append(f"{ARGUMENT}{name}")
            return word if op in (":-", "-", ":=", "=") and value == "" else value
        if op in (":?", "?"):
            return self.guarded(name, op)
        if name in self.values:
            value = self.values[name]
            if op in (":-", ":=") and value == "":
                if op == ":=":  # assigns the default to an empty variable (POSIX 2.6.2 "Assign Default Values")
                    self.values[name] = word or ""
                return word or ""
            if op in (":+", "+"):
                return word or "" if (value != "" or op == "+") else ""
            return value
        if self.env.unset(name):  # certainly not set (ContainerEnv.unset): the shell applies the default
            if op in (":-", "-", ":=", "=") and not word:
                self.assumed_empty.append(name)  # an empty default applied on the unset assumption (fields_of)
            if op in (":=", "="):
                self.values[name] = word or ""
            return word or "" if op in (":-", "-", ":=", "=") else "" if op in (":+", "+") else unknown(name)
        value = self.env.shell_value(name)
        if op is not None and not unknown_names(value):  # the image's known ENV sets it: as a set variable
            if op in (":-", ":=") and value == "":
                return word or ""
            return (word or "" if (value != "" or op == "+") else "") if op in (":+", "+") else value
        # Set by what these files do not show (valueFrom, envFrom, the platform, the image's ENV): ${X:-d} is X's
        # value or d, ${X:+a} is a or empty, and neither is known, as $X is not (module docstring).
        return value

    def guarded(self, name: str, op: str) -> str:
        """``${NAME:?msg}`` / ``${NAME?msg}`` (in a ``:`` command or anywhere): bash writes msg and exits where
        ``NAME`` is unset, or, with the colon, empty (POSIX 2.6.2 "Indicate Error if Null or Unset"; bash manual,
        "Shell Parameter Expansion"; a non-interactive shell exits), so past this point ``NAME`` is set, and with
        the colon not empty. A known value that passes is kept; one that would stop the script (empty for ``:?``,
        certainly unset for either) is not what any run that goes on holds, so ``NAME`` becomes
        :func:`~pdd_operator.vllm.expansion.unknown` of itself for the rest of the script: no empty word vLLM's
        parser would refuse (``cli-option-malformed``), its value not known. A set, empty ``NAME`` passes ``?``
        and stays an empty word (argparse takes it for a positional argument, ``cli-option-malformed``'s source)."""
        if name in self.values:
            value = self.values[name]
        elif self.env.unset(name):
            value = None
        else:  # set by what these files do not show (kept unknown) or by the image's known ENV
            value = self.env.shell_value(name)
            if unknown_names(value) or value != "" or op == "?":
                return value
        if value is None or (op == ":?" and value == ""):
            self.values[name] = unknown(name)
        return self.values[name]

    def arithmetic(self, expr: str) -> str:
        """``$(( EXPR ))`` on known integers: ``+ - * / %``, comparisons, ``&& || !`` (bash manual, "Shell
        Arithmetic"; a true comparison is 1); :func:`~pdd_operator.vllm.expansion.unknown` of the first variable
        whose value is not a known integer, else of ``arithmetic``."""
        names: list[str] = []

        def value(match: re.Match[str]) -> str:
            got = self.variable(match.group(1), None, None) if match.group(1) in self.values else None
            if got is not None and re.fullmatch(r"-?\d+", got):
                return got
            names.append(match.group(1))
            return "x"

        substituted = re.sub(r"\$?\{?([A-Za-z_][A-Za-z0-9_]*)\}?", value, expr)
        substituted = re.sub(r"!(?!=)", " not ", substituted.replace("&&", " and ").replace("||", " or "))
        try:
            return str(_evaluate(ast.parse(substituted.strip(), mode="eval").body))
        except (SyntaxError, ValueError, ZeroDivisionError):
            return unknown(names[0] if names else "arithmetic")


_COMPARE_OPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
                ast.Gt: operator.gt, ast.GtE: operator.ge}


def _evaluate(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return int(not _evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
        return _ARITH_OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE_OPS:
        return int(_COMPARE_OPS[type(node.ops[0])](_evaluate(node.left), _evaluate(node.comparators[0])))
    if isinstance(node, ast.BoolOp):
        values = [_evaluate(v) for v in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))
    raise ValueError("not integer arithmetic")


#: ``test``'s integer comparisons (POSIX ``test``; an operand that is not an integer is an error, status 2).
_INT_OPS = {"-eq": operator.eq, "-ne": operator.ne, "-gt": operator.gt, "-ge": operator.ge, "-lt": operator.lt,
            "-le": operator.le}


def _compare(a: str, op: str, b: str, *, pattern: bool) -> bool | None:
    """``a OP b`` of ``test`` / ``[[ ]]`` on known operands: ``=``/``==``/``!=`` (``pattern``: ``b`` is an
    unquoted ``[[ ]]`` pattern, matched as a shell glob), ``<``/``>`` (string order), ``=~`` (a regular
    expression), the integer ``-eq ... -le`` (false where an operand is not an integer: ``test`` fails with status
    2); ``None`` for another operator."""
    if op in ("=", "==", "!="):
        equal = fnmatch.fnmatchcase(a, b) if pattern else a == b
        return equal if op != "!=" else not equal
    if op in _INT_OPS:
        ints = [x.strip() for x in (a, b)]
        if not all(re.fullmatch(r"[-+]?\d+", x) for x in ints):
            return False
        return _INT_OPS[op](int(ints[0]), int(ints[1]))
    if op in ("<", ">"):
        return a < b if op == "<" else a > b
    if op == "=~":
        try:
            return re.search(b, a) is not None
        except re.error:
            return None
    return None


def _split_fields(segments: list[tuple[str, bool]]) -> list[str]:
    """The fields of an argument's ``(text, splittable)`` segments (:meth:`_Shell.segments`): splittable text, an
    unquoted expansion's, is split on blanks (POSIX 2.6.5); :data:`_FIELD_BREAK` ends a field."""
    out: list[str] = []
    current: str | None = None
    for text, splittable in segments:
        if text == _FIELD_BREAK:
            out.append(current or "")
            current = ""
            continue
        if not splittable:
            current = (current or "") + text
            continue
        for j, piece in enumerate(re.split(r"[ \t\n]+", text)):
            if j > 0 and current is not None:
                out.append(current)
                current = None
            if piece:
                current = (current or "") + piece
    if current is not None:
        out.append(current)
    return out


def _literal(text: str) -> str:
    """A quoted ``case`` pattern as a glob that matches ``text`` only (POSIX 2.13.1: quoted characters match
    themselves)."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def _joined(segments: list[tuple[str, bool]]) -> str:
    """The text of expanded segments where no field splitting happens (an assignment's value, a default word):
    the elements of ``"${A[@]}"`` joined by a space, as bash does there."""
    return "".join(" " if text == _FIELD_BREAK else text for text, _ in segments)


#: A held unknown part (:meth:`_Shell.reread`) left literal by single quotes.
_HELD_RE = re.compile(r"\$\{(__pdd_eval_[0-9]+)\}")

#: ssh(1) options that take an argument (OpenSSH 9): the host is the first word that is neither an option nor one
#: of these options' arguments.
_SSH_OPTIONS_WITH_ARGUMENT = frozenset("BbcDEeFIiJLlmOoPpQRSWw")


def _ssh_command(words: list[str]) -> tuple[int, str] | None:
    """For a command ``ssh [options] HOST COMMAND...`` (``words``, expanded): the index just past HOST and the remote
    command, COMMAND's words joined by single spaces, which ssh(1) hands to the remote user's shell to read again
    (so ``ssh node2 "VLLM_X=1 vllm serve m ..."`` starts ``vllm serve`` there); ``None`` for another command or an
    ssh without a command (an interactive login). Source: ssh(1) of OpenSSH 9, SYNOPSIS and DESCRIPTION ("If a
    command is specified, it will be executed on the remote host instead of a login shell")."""
    if not words or words[0].rsplit("/", 1)[-1] != "ssh":
        return None
    i = 1
    while i < len(words) and words[i].startswith("-") and words[i] != "--":
        flags = words[i][1:]
        for k, flag in enumerate(flags):
            if flag in _SSH_OPTIONS_WITH_ARGUMENT:
                i += 1 if k + 1 < len(flags) else 2  # ``-p22`` or ``-p 22``
                break
        else:
            i += 1
    if i < len(words) and words[i] == "--":
        i += 1
    if i + 1 >= len(words):
        return None
    return i + 1, " ".join(words[i + 1:])


#: Apptainer's (Singularity's) programs: ``apptainer exec|run ... --env NAME=VALUE ... IMAGE CMD``.
_APPTAINER = ("apptainer", "singularity")
#: One ``NAME=VALUE`` of an Apptainer ``--env`` list (a comma starts the next one only before ``NAME=``).
_ENV_ITEM = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*?)(?=,[A-Za-z_][A-Za-z0-9_]*=|$)")


def apptainer_env(words: Sequence[str]) -> dict[str, str]:
    """The variables an Apptainer or Singularity command among ``words`` (the words before the engine's entry point)
    sets in its container with ``--env NAME=VALUE`` / ``--env=NAME=VALUE`` (a comma-separated list allowed:
    ``--env A=1,B=2``); Apptainer passes the calling shell's environment through as well (unless ``--cleanenv``), and
    an ``--env`` value overrides it (Apptainer's "Environment and Metadata" docs, ``--env``). Empty where no such
    command is among ``words``. Pure."""
    at = next((i for i, w in enumerate(words) if w.rsplit("/", 1)[-1] in _APPTAINER), None)
    if at is None:
        return {}
    out: dict[str, str] = {}
    rest = list(words[at + 1:])
    for i, w in enumerate(rest):
        value = rest[i + 1] if w == "--env" and i + 1 < len(rest) else w[len("--env="):] if w.startswith("--env=") \
            else None
        if value:
            out.update(m.groups() for m in _ENV_ITEM.finditer(value))
    return out


#: ``docker run`` / ``podman run`` options that take a value (Docker 27 ``docker run --help``, Podman 5
#: ``podman-run(1)``); every other option is a switch (``-d``, ``--rm``, ``--privileged``, ``-it``).
_DOCKER_VALUE_OPTIONS = frozenset((
    "-a", "--attach", "--add-host", "--annotation", "--blkio-weight", "--blkio-weight-device", "--cap-add",
    "--cap-drop", "--cgroup-parent", "--cgroupns", "--cidfile", "--cpu-period", "--cpu-quota", "--cpu-rt-period",
    "--cpu-rt-runtime", "-c", "--cpu-shares", "--cpus", "--cpuset-cpus", "--cpuset-mems", "--detach-keys", "--device",
    "--device-cgroup-rule", "--device-read-bps", "--device-read-iops", "--device-write-bps", "--device-write-iops",
    "--dns", "--dns-option", "--dns-search", "--domainname", "--entrypoint", "-e", "--env", "--env-file", "--expose",
    "--gpus", "--group-add", "--health-cmd", "--health-interval", "--health-retries", "--health-start-interval",
    "--health-start-period", "--health-timeout", "-h", "--hostname", "--ip", "--ip6", "--ipc", "--isolation",
    "--kernel-memory", "-l", "--label", "--label-file", "--link", "--link-local-ip", "--log-driver", "--log-opt",
    "--mac-address", "-m", "--memory", "--memory-reservation", "--memory-swap", "--memory-swappiness", "--mount",
    "--name", "--network", "--net", "--network-alias", "--net-alias", "--oom-score-adj", "--pid", "--pids-limit",
    "--platform", "-p", "--publish", "--pull", "--restart", "--runtime", "--security-opt", "--shm-size",
    "--stop-signal", "--stop-timeout", "--storage-opt", "--sysctl", "--tmpfs", "-u", "--user", "--ulimit", "--userns",
    "--uts", "-v", "--volume", "--volume-driver", "--volumes-from", "-w", "--workdir",
))


@dataclass(frozen=True)
class DockerRun:
    """A ``docker run`` (``podman run``, ``docker container run``) command, read as Docker runs it (Docker's "docker
    container run" reference): the options up to the image, the image, and the command the container runs.

    Attributes:
        image_at: the index of the image among the command's words (its options are the words before it).
        image: the image.
        command: the container's command: ``--entrypoint`` (one word, as Docker takes it) then the words after the
            image; without ``--entrypoint``, the words after the image (the image's own ENTRYPOINT, not read here,
            comes first).
        entrypoint: whether ``--entrypoint`` was given.
        env: the container's environment from ``-e NAME=value`` / ``--env``; ``-e NAME`` passes this shell's
            ``NAME`` (its value from ``shell_value``, unknown where the script does not set it). The shell's other
            variables do not reach the container.
        env_file: an ``--env-file`` is given (its variables are not in the script).
        host_network: ``--network host`` (``--net=host``): the container shares the host's ports and addresses.
        detach: ``-d`` / ``--detach`` (alone or among switches, ``-dit``): ``docker run`` returns once the container
            is started, as a command run with ``&`` would, and the container runs on.
        interactive: ``-i`` / ``--interactive`` (alone or among switches, ``-it``): the container's standard input is
            the terminal's.
        gpu_devices: the host GPUs ``--gpus`` hands the container by ordinal (``--gpus '"device=0,1"'``, ``--gpus
            device=1``), in the order the container sees them; ``None`` for ``--gpus all``, a count (Docker's pick is
            not in the script) or no ``--gpus`` (Docker's "docker container run" reference, "Access an NVIDIA GPU").
    """

    image_at: int
    image: str
    command: tuple[str, ...]
    entrypoint: bool
    env: dict[str, str]
    env_file: bool
    host_network: bool
    detach: bool = False
    interactive: bool = False
    gpu_devices: tuple[str, ...] | None = None

    @property
    def shell(self) -> bool:
        """An interactive shell container: ``-i`` (``-it``, ``--interactive``) and a command that is a shell alone
        (``--entrypoint=/bin/bash``, or ``bash``/``sh`` after the image, with no ``-c``), so the commands typed after
        it in a pasted session run inside it (bash(1): an interactive shell reads its commands from its standard
        input)."""
        return (self.interactive and bool(self.command) and self.command[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh")
                and not any(w.startswith("-") and "c" in w[1:] and not w.startswith("--") for w in self.command[1:]))


#: Launchers that run the command after their own options on a node they choose (Slurm's srun(1)): a ``docker run``
#: among a launcher's words further on than its third word is still the container it starts (:func:`docker_run`).
_LAUNCHERS = frozenset(("srun",))

#: Programs a ``docker run``'s words after the image may name instead of an image ENTRYPOINT's arguments.
_PROGRAMS = frozenset(("bash", "sh", "python", "python3", "vllm", "env", "exec"))


def image_engine(docker: DockerRun) -> list[str]:
    """The engine a ``docker run`` starts through its image's ENTRYPOINT (:func:`pdd_operator.vllm.entrypoint.
    image_entrypoint`: ``python3 -m vllm.entrypoints.openai.api_server`` on vLLM's OpenAI images up to 0.11.0, ``vllm
    serve`` from 0.11.1) with only the engine's arguments after the image (``docker run ... vllm/vllm-openai:v0.7.3
    --model /data/llama2/ --tensor-parallel-size 4 ...``, vllm-project/vllm#14118): the ENTRYPOINT's words then the
    arguments, from the entry point on (:func:`entry_point`); ``[]`` where ``--entrypoint`` replaces it, the image's
    ENTRYPOINT was not read, or the words after the image start a program of their own (``bash -c ...``)."""
    if docker.entrypoint:
        return []
    image_entry = image_entrypoint(docker.image)
    if image_entry is None:
        return []
    first = docker.command[0] if docker.command else ""
    if first and not first.startswith("-") and (image_entry != SERVE or first.rsplit("/", 1)[-1] in _PROGRAMS):
        return []
    return entry_point([*image_entry, *docker.command])


def docker_run(words: Sequence[str], shell_value: Callable[[str], str | None] = lambda name: None) -> DockerRun | None:
    """``words`` (expanded) read as :class:`DockerRun`, or ``None`` for another command or a ``docker run`` without
    an image. ``shell_value(NAME)``: this shell's value of an exported ``NAME`` (``-e NAME`` copies it), ``None``
    when the script does not set it."""
    start = next((i for i, w in enumerate(words[:3]) if w.rsplit("/", 1)[-1] in ("docker", "podman")), None)
    if start is None and words and words[0].rsplit("/", 1)[-1] in _LAUNCHERS:
        # a launcher runs the container on its node (``srun --nodelist=n1 --ntasks=1 docker run ... IMAGE vllm serve``,
        # as SemiAnalysis InferenceX's and vLLM's .buildkite/amd-disagg Slurm jobs start one container per node): the
        # first ``docker run`` / ``podman run`` after the launcher's own options
        start = next((i for i in range(1, len(words) - 1) if words[i].rsplit("/", 1)[-1] in ("docker", "podman")
                      and words[i + 1] in ("run", "container")), None)
    if start is None:
        return None
    rest = list(words[start + 1:])
    if rest[:2] == ["container", "run"]:
        rest = rest[1:]
    if rest[:1] != ["run"]:
        return None
    i, base = 1, len(words) - len(rest)
    options: list[tuple[str, str | None]] = []
    while i < len(rest) and rest[i].startswith("-") and rest[i] != "--":
        name, eq, value = rest[i].partition("=")
        if eq or name not in _DOCKER_VALUE_OPTIONS:
            options.append((name, value if eq else None))
            i += 1
        else:
            options.append((name, rest[i + 1] if i + 1 < len(rest) else None))
            i += 2
    if i < len(rest) and rest[i] == "--":
        i += 1
    if i >= len(rest):
        return None
    env: dict[str, str] = {}
    for name, value in options:
        if name in ("-e", "--env") and value is not None:
            key, eq, val = value.partition("=")
            if eq:
                env[key] = val
            elif (known := shell_value(key)) is not None:
                env[key] = known
            else:
                env[key] = unknown(key)
    entry = next((value for name, value in reversed(options) if name == "--entrypoint"), None)
    network = next((value for name, value in reversed(options) if name in ("--network", "--net")), None)
    gpus = next((value for name, value in reversed(options) if name == "--gpus"), None)
    return DockerRun(base + i, rest[i], tuple(([entry] if entry else []) + rest[i + 1:]), entry is not None, env,
                     any(name == "--env-file" for name, _ in options), network == "host",
                     any(name == "--detach" or re.fullmatch(r"-[ditP]*d[ditP]*", name) for name, _ in options),
                     any(name == "--interactive" or re.fullmatch(r"-[ditP]*i[ditP]*", name) for name, _ in options),
                     gpu_devices(gpus))


#: ``--gpus``'s device request naming host GPUs by ordinal: ``device=0,2`` (quoted as ``'"device=0,2"'`` so that
#: Docker's CSV reading keeps the comma inside one field), possibly beside ``capabilities=...``.
_GPU_DEVICES = re.compile(r'(?:^|,)"?device=([\d,]+)"?(?:,|$)')


def gpu_devices(value: str | None) -> tuple[str, ...] | None:
    """The host GPU ordinals a ``docker run --gpus`` value hands the container, in order (``'"device=1,0"'`` gives
    ``("1", "0")``); ``None`` for ``all``, a count, UUIDs, or no value."""
    match = _GPU_DEVICES.search((value or "").strip().strip("'"))
    if match is None:
        return None
    ids = tuple(x for x in match.group(1).split(",") if x)
    return ids or None


def _blank_led(node: tree_sitter.Node) -> tuple[str, str]:
    """``(blanks, expansion)``: an expansion node's text split before its ``$``. In a double-quoted string,
    tree-sitter-bash (0.2x grammar) puts the blank that separates two expansions into the second node's text
    (``"$B $a"`` gives ``$B`` and `` $a``); the blank is literal string text, not part of the parameter's name."""
    text = _text(node)
    stripped = text.lstrip(" \t")
    return text[:len(text) - len(stripped)], stripped


#: What follows a command's last word on its line when a backslash there escapes a blank instead of the newline
#: (``--port 8100 \   ``): bash's "Escape Character" rule makes ``\<blank>`` a word of that blank, and the unescaped
#: newline then ends the command, so the options on the next lines run as a command of their own.
_ESCAPED_BLANK_AT_EOL = re.compile(rb"[ \t]*\\([ \t])[ \t]*")


def _escaped_trailing_blank(node: tree_sitter.Node) -> str | None:
    """The one-blank word (``" "`` or a tab) bash adds to the command ``node`` when its line goes on, after its last
    word, with a backslash followed by blanks up to the newline (bash(1), QUOTING: "A non-quoted backslash (\\) is
    the escape character. It preserves the literal value of the next character that follows, with the exception of
    <newline>"); tree-sitter-bash reads that backslash as a line continuation and drops the word, so the command's
    last words are read from the line itself. ``None`` where the line ends otherwise."""
    root = node
    while root.parent is not None:
        root = root.parent
    text = root.text or b""
    end = text.find(b"\n", node.end_byte)
    match = _ESCAPED_BLANK_AT_EOL.fullmatch(text[node.end_byte:end if end >= 0 else len(text)])
    return match.group(1).decode() if match else None


#: A ``printf`` conversion this reader gives a value for: ``%s``, ``%d`` / ``%i`` (of a decimal integer), ``%%``.
_PRINTF_SPEC = re.compile(r"%(?:%|[sdi])")
#: ``printf``'s backslash escapes in the format that these scripts use (bash manual, "Bash Builtins", printf).
_PRINTF_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}


def _printf(form: str, args: list[str]) -> str | None:
    """What bash's ``printf FORMAT ARGS...`` prints, for formats of ``%s``, ``%d``/``%i`` and ``%%`` conversions
    and the escapes of :data:`_PRINTF_ESCAPES`: each conversion takes the next argument (an empty string, or 0, when
    none is left), and the format is used again while arguments remain (bash manual, "Bash Builtins": "The format
    is reused as necessary to consume all of the arguments"). ``None`` for another conversion or escape, or a
    ``%d`` argument that is no integer."""
    if re.search(r"%(?!%|[sdi])", form.replace("%%", "")) or re.search(r"\\(?![nt\\\"'])", form):
        return None
    form = re.sub(r"\\(.)", lambda m: _PRINTF_ESCAPES[m.group(1)], form)
    parts = _PRINTF_SPEC.split(form)
    specs = _PRINTF_SPEC.findall(form)
    takes = sum(spec != "%%" for spec in specs)
    out: list[str] = []
    rest = list(args)
    while True:
        text = parts[0]
        for spec, after in zip(specs, parts[1:], strict=True):
            if spec == "%%":
                text += "%" + after
                continue
            value, rest = (rest[0], rest[1:]) if rest else ("", [])
            if spec != "%s":
                if not re.fullmatch(r"[+-]?\d*", value):
                    return None
                value = str(int(value or "0"))
            text += value + after
        out.append(text)
        if not rest or not takes:
            return "".join(out)


def _text(node: tree_sitter.Node | None) -> str:
    return (node.text or b"").decode(errors="replace") if node is not None else ""


def _unescape(word: str) -> str:
    return re.sub(r"\\(.)", r"\1", word.replace("\\\n", ""))


def _seq(args: list[str]) -> list[str] | None:
    """What ``seq ARGS`` prints, one number a line (GNU coreutils ``seq [FIRST [INCREMENT]] LAST``), for known
    integer operands and no options; ``None`` otherwise, or for more than :data:`MAX_ITERATIONS` + 1 numbers."""
    if not 1 <= len(args) <= 3 or not all(re.fullmatch(r"-?\d+", a) for a in args):
        return None
    numbers = [int(a) for a in args]
    first, step, last = (1, 1, numbers[0]) if len(numbers) == 1 else (
        (numbers[0], 1, numbers[1]) if len(numbers) == 2 else tuple(numbers))
    if step == 0:
        return None
    out = [str(n) for n in range(first, last + (1 if step > 0 else -1), step)]
    return out if len(out) <= MAX_ITERATIONS + 1 else None


def _brace_sequence(node: tree_sitter.Node) -> list[str] | None:
    """A word that is a brace sequence expression of integers, ``{1..4}`` / ``{0..6..2}`` / ``{3..1}`` (bash's
    manual, "Brace Expansion"), as its words; ``None`` for any other word. Bash expands braces before parameters,
    so ``{1..$N}`` is no sequence (it stays one word)."""
    if node.type != "brace_expression":
        return None
    match = re.fullmatch(r"\{(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?\}", _text(node))
    if not match:
        return None
    first, last = int(match.group(1)), int(match.group(2))
    step = abs(int(match.group(3) or 1)) or 1
    step = step if last >= first else -step
    out = [str(n) for n in range(first, last + (1 if step > 0 else -1), step)]
    return out[:MAX_ITERATIONS + 1]


def _first_name(text: str) -> str:
    match = re.search(r"[A-Za-z_][A-Za-z0-9_]*", text)
    return match.group(0) if match else "expansion"


#: A ``ulimit`` that sets the locked-memory limit: ``ulimit -l N``, ``-Sl``, ``-Hl``, ``-lH`` ... (bash's builtin: ``-l``
#: is RLIMIT_MEMLOCK in KiB; without ``-S``/``-H`` it sets both the soft and the hard limit).
_ULIMIT_L = re.compile(r"(?:^|[;&|]\s*|\bthen\s+|\bdo\s+)ulimit\s+((?:-[A-Za-z]+\s+)*)-([SH]?l[SH]?)\s+([^\s;&|)]+)")


def memlock_ulimit(command: Sequence[str], line: int) -> tuple[str | None, str | None] | None:
    """``(soft, hard)``: the locked-memory limits the ``ulimit -l`` commands of an ``sh``/``bash -c`` script set before
    ``line`` (1-based; 0: anywhere in the script), each as written (``unlimited``, a count of KiB) or ``None`` where
    none sets it; ``None`` when the script runs no ``ulimit -l``. command: the container's command and args as
    written. Commented lines are skipped.
    """
    if len(command) < 3 or command[0].rsplit("/", 1)[-1] not in ("sh", "bash") or not command[1].startswith("-"):
        return None
    lines = command[2].splitlines()
    soft = hard = None
    seen = False
    for text in lines[: line - 1] if line > 0 else lines:
        for match in _ULIMIT_L.finditer(text.split("#", 1)[0].strip()):
            flags, value, seen = match.group(1) + match.group(2), match.group(3), True
            if "H" in flags or "S" not in flags:
                hard = value
            if "S" in flags or "H" not in flags:
                soft = value
    return (soft, hard) if seen else None
