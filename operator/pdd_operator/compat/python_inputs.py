"""Prefill/decode engines started from Python (a launcher script or a Jupyter notebook's code cells), read without
running anything: the literal keywords of vLLM's engine constructors and literal ``vllm serve`` argument lists,
written out as the ``vllm serve`` command lines they stand for, so the script reader
(:mod:`pdd_operator.compat.script_inputs`) and the rules judge them as any other launch.

How vLLM maps the Python API to the CLI's configuration (the same ``EngineArgs`` fields either way):

- ``LLM(model, **kwargs)`` builds ``EngineArgs(model=model, **kwargs)`` (entrypoints/llm.py ``LLM.__init__``:
  0.9.0 lines 243-272, 0.20.0 and 0.34.0 the same), and ``AsyncLLMEngine.from_engine_args(AsyncEngineArgs(...))``
  takes the fields directly; ``vllm serve`` builds the same ``EngineArgs`` from its flags
  (``EngineArgs.from_cli_args``, engine/arg_utils.py of every release 0.9.0-0.34.0), each field ``x_y`` the flag
  ``--x-y`` (``add_cli_args``: ``kwargs = get_kwargs(Config)``, the flag name ``--`` + field with ``-`` for ``_``), a
  bool field a ``BooleanOptionalAction`` (``--x-y`` / ``--no-x-y``), a config field such as ``kv_transfer_config`` a
  JSON value (``--kv-transfer-config '{...}'``), the model the positional ``model_tag``.
- ``KVTransferConfig(kv_connector=..., kv_role=..., ...)`` (vllm/config/kv_transfer.py from 0.10.2, vllm/config.py
  before) or a dict with the same keys is what ``--kv-transfer-config`` parses into; ``KVTransferConfig.from_cli(s)``
  is 0.7.x's (config.py 0.7.3; the 0.9.0 class has no such method), not read.
- The engine's environment is the process's: ``os.environ[...] = ...`` in the function that builds it (or at module
  level) before the constructor runs, as vLLM's offline disaggregated-prefill example sets CUDA_VISIBLE_DEVICES per
  ``multiprocessing.Process``.

Which release runs is stated the way a Python program pins its dependencies: a PEP 723 inline script metadata block
(``# /// script`` ... ``dependencies = ["vllm==0.11.0"]`` ... ``# ///``, what ``uv run`` and ``pipx run`` read) or a
notebook's ``%pip install vllm==X`` / ``!pip install vllm==X`` line; it becomes the ``pip install vllm==X`` line the
script reader takes as the release.

What is not literal (an f-string, a value read from a file, an argument of the function, ``**kwargs``) is not
guessed: :func:`python_launch_script` names it and the file stays "not checked", with that reason.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from dataclasses import dataclass

from pdd_operator.vllm.args import engine_arg_words
from pdd_operator.vllm.script import IN_PROCESS_ENGINE

#: The constructors whose keywords are ``EngineArgs`` fields (``LLM`` passes its keywords on to ``EngineArgs``).
ENGINE_CALLS = ("LLM", "EngineArgs", "AsyncEngineArgs")
#: The constructors whose keywords make the dict a ``--*-config`` JSON flag parses into (vllm/config/*.py).
CONFIG_CALLS = ("KVTransferConfig", "KVEventsConfig", "CompilationConfig", "SpeculativeConfig", "dict")
#: PEP 723 inline script metadata (packaging.python.org "Inline script metadata"): the ``script`` block.
_PEP723 = re.compile(r"^# /// script\s*$(.*?)^# ///\s*$", re.M | re.S)
_PIN = re.compile(r"""(?<![\w.-])vllm\s*==\s*([0-9]+\.[0-9]+(?:\.[0-9]+)*(?:\.post[0-9]+)?)""")
#: A notebook line that IPython runs as a shell command or a magic (``!pip ...``, ``%pip ...``).
_MAGIC = re.compile(r"^(\s*)([!%])")
#: The environment variable prefixes whose value matters to the rules: one that is set but not literal is named.
_ENGINE_ENV = ("VLLM_", "UCX_", "NCCL_", "NIXL_", "CUDA_", "HIP_", "ROCR_", "PYTORCH_")


class NotLiteral(ValueError):
    """A value the file computes when it runs (``node`` is where): not read."""

    def __init__(self, node: ast.AST, what: str) -> None:
        super().__init__(what)
        self.line = getattr(node, "lineno", 0)


@dataclass(frozen=True)
class PythonLaunches:
    """What :func:`python_launch_script` read from a Python file.

    script: the ``vllm serve`` command lines (and the ``pip install vllm==X`` pin) as a shell script whose line N is
        the Python file's line N (so findings name the Python line), ``None`` where no engine was read.
    unread: why an engine constructor or argument list of the file was not read (its line and what is not literal),
        empty where all were read.
    """

    script: str | None
    unread: tuple[str, ...]


def notebook_code(text: str) -> str | None:
    """The Python source of a Jupyter notebook (nbformat 4: a JSON object with ``cells`` and ``nbformat``): its code
    cells' ``source`` joined in order, IPython's ``!cmd`` and ``%magic`` lines kept as comments (``#!pip install
    ...``), a cell magic's cell (``%%bash``, not Python) wholly commented out; ``None`` for text that is no
    notebook. Pure."""
    if not text.lstrip().startswith("{") or '"cells"' not in text or '"nbformat"' not in text:
        return None
    try:
        nb = json.loads(text)
    except ValueError:
        return None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list) or "nbformat" not in nb:
        return None
    cells = []
    for cell in nb["cells"]:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source")
        source = "".join(source) if isinstance(source, list) else str(source or "")
        if source.lstrip().startswith("%%"):  # a cell magic (%%bash, %%writefile): the cell is not Python
            cells.append("\n".join("#" + line for line in source.splitlines()))
            continue
        cells.append("\n".join(_MAGIC.sub(r"\1#\2", line) for line in source.splitlines()))
    return "\n\n".join(cells) + "\n"


def python_vllm_pin(code: str) -> tuple[int, str] | None:
    """``(line, X)`` of the vLLM release the Python source ``code`` pins: ``vllm==X`` in its PEP 723 ``script``
    block, else in a notebook's ``%pip``/``!pip install`` line (kept as ``#%pip``/``#!pip`` by :func:`notebook_code`);
    ``None`` where it pins none. Pure."""
    block = _PEP723.search(code)
    if block and (pin := _PIN.search(block.group(1))):
        return code.count("\n", 0, block.start(1) + pin.start()) + 1, pin.group(1)
    for m in re.finditer(r"^\s*#[!%]\s*(?:uv\s+)?pip3?\s+install\b[^\n]*", code, re.M):
        if pin := _PIN.search(m.group(0)):
            return code.count("\n", 0, m.start()) + 1, pin.group(1)
    return None


def _name(func: ast.AST) -> str | None:
    """``LLM`` for ``LLM``, ``vllm.LLM`` and ``x.LLM``."""
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


#: What in Python source may start a vLLM engine besides :data:`ENGINE_CALLS`: the engine classes themselves and their
#: ``from_engine_args`` / ``from_vllm_config`` builders (vllm/engine/async_llm_engine.py, vllm/v1/engine/async_llm.py of
#: 0.9.0-0.34.0), and the OpenAI server's ``run_server`` (vllm/entrypoints/openai/api_server.py).
_ENGINE_STARTERS = frozenset({*ENGINE_CALLS, "LLMEngine", "AsyncLLMEngine", "AsyncLLM", "from_engine_args",
                              "from_vllm_config", "run_server"})
#: A string that runs vLLM's server as a command: ``vllm serve`` (vllm-rs too), ``-m vllm.entrypoints...``.
_VLLM_COMMAND = re.compile(r"\bvllm(?:-rs)?\s+serve\b|\bvllm\.entrypoints\b")


def starts_no_engine(code: str) -> bool:
    """The Python source ``code`` can start no vLLM engine: it parses, imports no ``vllm`` module, calls none of
    :data:`_ENGINE_STARTERS` and holds no string or argument list that runs vLLM's server (:data:`_VLLM_COMMAND`,
    ``["vllm", "serve", ...]``), as a disaggregation proxy that only forwards HTTP requests to a prefill and a decode
    server started elsewhere (chaojun-zhang/vllm pd_distributed/proxy_server_v2.py at c0405be8, a Quart app; vLLM's
    tests/v1/kv_connector/nixl_integration/toy_proxy_server.py, a FastAPI one). ``False`` for source that does not
    parse, and wherever a vLLM engine may be started (even one built from values read at run time). Pure."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "vllm" for a in node.names):
            return False
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "vllm":
            return False
        if isinstance(node, ast.Call) and _name(node.func) in _ENGINE_STARTERS:
            return False
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _VLLM_COMMAND.search(node.value):
            return False
        if isinstance(node, (ast.List, ast.Tuple)):
            words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            pairs = zip(words, words[1:], strict=False)
            if any(w.rsplit("/", 1)[-1] in ("vllm", "vllm-rs") and nxt == "serve" for w, nxt in pairs):
                return False
    return True


class _Scopes:
    """The simple assignments (``name = value``) of the module and of each function, to look literal names up."""

    def __init__(self, tree: ast.Module) -> None:
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        self.tree = tree

    def chain(self, node: ast.AST) -> list[ast.AST]:
        """The functions around ``node``, innermost first, then the module."""
        out, cur = [], self.parents.get(node)
        while cur is not None:
            if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append(cur)
            cur = self.parents.get(cur)
        return [*out, self.tree]

    def own(self, scope: ast.AST) -> list[ast.stmt]:
        """The statements of ``scope`` (a function or the module), nested blocks included, nested functions not."""
        out, todo = [], list(getattr(scope, "body", []))
        while todo:
            stmt = todo.pop(0)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            out.append(stmt)
            for field in ("body", "orelse", "finalbody", "handlers"):
                todo.extend(s for s in getattr(stmt, field, []) if isinstance(s, (ast.stmt, ast.ExceptHandler)))
        return out

    def lookup(self, name: ast.Name) -> tuple[ast.AST, ast.AST]:
        """The value assigned to ``name`` (its one assignment in the innermost scope that assigns it) and where."""
        for scope in self.chain(name):
            values = [s.value for s in self.own(scope) if isinstance(s, ast.Assign) and len(s.targets) == 1
                      and isinstance(s.targets[0], ast.Name) and s.targets[0].id == name.id]
            values += [s.value for s in self.own(scope) if isinstance(s, ast.AnnAssign) and s.value is not None
                       and isinstance(s.target, ast.Name) and s.target.id == name.id]
            args = scope.args if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
            if args and name.id in {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}:
                raise NotLiteral(name, f"{name.id} is an argument of {scope.name}()")
            if len(values) == 1:
                return values[0], values[0]
            if values:
                raise NotLiteral(name, f"{name.id} is assigned {len(values)} times")
        raise NotLiteral(name, f"{name.id} is not assigned in the file")


def _value(node: ast.AST, scopes: _Scopes, depth: int = 0):
    """The literal value of ``node``; raises :class:`NotLiteral` for anything the file computes when it runs."""
    if depth > 20:
        raise NotLiteral(node, "a value defined through too many names")
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e, scopes, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                raise NotLiteral(node, "a dict built with **")
            out[_value(k, scopes, depth + 1)] = _value(v, scopes, depth + 1)
        return out
    if isinstance(node, ast.Name):
        value, _ = scopes.lookup(node)
        return _value(value, scopes, depth + 1)
    if isinstance(node, ast.Call):
        name = _name(node.func)
        if name == "from_cli":  # KVTransferConfig.from_cli(json): vLLM 0.7.x (config.py 0.7.3), gone by 0.9.0
            raise NotLiteral(node, "KVTransferConfig.from_cli(), which vLLM 0.9.0 and later do not have")
        if name in CONFIG_CALLS and not node.args:
            if any(k.arg is None for k in node.keywords):
                raise NotLiteral(node, f"{name}(**...)")
            return {k.arg: _value(k.value, scopes, depth + 1) for k in node.keywords}
        if name == "dumps" and len(node.args) == 1:  # json.dumps({...})
            return json.dumps(_value(node.args[0], scopes, depth + 1))
        if name == "str" and len(node.args) == 1:
            return str(_value(node.args[0], scopes, depth + 1))
    what = "an f-string" if isinstance(node, ast.JoinedStr) else f"a {type(node).__name__.lower()} expression"
    raise NotLiteral(node, what)


def _environ_key(target: ast.AST) -> ast.AST | None:
    """The key of ``os.environ[KEY]``."""
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute) \
            and target.value.attr == "environ":
        return target.slice
    return None


def _environment(call: ast.Call, scopes: _Scopes) -> tuple[dict[str, str], list[str]]:
    """The variables the file sets in ``os.environ`` before ``call`` runs: at module level (on an earlier line where
    the call is module code too, as a notebook's cells run in order), and in each function around the call on an
    earlier line; and the engine variables (:data:`_ENGINE_ENV`) set to values not literal."""
    env: dict[str, str] = {}
    unread: list[str] = []
    chain = scopes.chain(call)
    for scope in reversed(chain):
        for stmt in scopes.own(scope):
            # a function runs after the whole module (the example's main()); module code runs in order (a notebook)
            if stmt.lineno >= call.lineno and (scope is not scopes.tree or len(chain) == 1):
                continue
            pairs: list[tuple[ast.AST, ast.AST]] = []
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and (key := _environ_key(stmt.targets[0])):
                pairs.append((key, stmt.value))
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                    and isinstance(stmt.value.func, ast.Attribute) \
                    and isinstance(stmt.value.func.value, ast.Attribute) and stmt.value.func.value.attr == "environ":
                method, args = stmt.value.func.attr, stmt.value.args
                if method == "setdefault" and len(args) == 2:
                    pairs.append((args[0], args[1]))
                elif method == "update" and len(args) == 1 and isinstance(args[0], ast.Dict):
                    pairs += [(k, v) for k, v in zip(args[0].keys, args[0].values, strict=True) if k is not None]
            for key, value in pairs:
                try:
                    name = str(_value(key, scopes))
                except NotLiteral:
                    continue
                try:
                    env[name] = str(_value(value, scopes))
                except NotLiteral as exc:
                    env.pop(name, None)
                    if name.startswith(_ENGINE_ENV):
                        unread.append(f"line {exc.line}: os.environ[{name!r}] is {exc}")
    return env, unread


def _engine_words(call: ast.Call, scopes: _Scopes) -> list[str]:
    """``vllm serve MODEL --flag value ...`` for an engine constructor call; raises :class:`NotLiteral`."""
    if any(k.arg is None for k in call.keywords):
        raise NotLiteral(call, "its keywords include **kwargs")
    kwargs = {k.arg: k.value for k in call.keywords}
    if call.args:
        if len(call.args) > 1 or isinstance(call.args[0], ast.Starred):
            raise NotLiteral(call, "positional arguments besides the model")
        kwargs.setdefault("model", call.args[0])
    if "model" not in kwargs:
        raise NotLiteral(call, "no model")
    words = ["vllm", "serve", str(_value(kwargs.pop("model"), scopes))]
    for key, node in kwargs.items():
        words += engine_arg_words(key, _value(node, scopes))
    return words


def _argv_words(node: ast.List, scopes: _Scopes) -> list[str] | None:
    """The words of a literal argument list that starts ``vllm serve`` (``["vllm", "serve", MODEL, ...]``), ``None``
    for a list that is not one; raises :class:`NotLiteral` for such a list with a word not literal."""
    head = [e.value for e in node.elts[:2] if isinstance(e, ast.Constant)]
    if head != ["vllm", "serve"]:
        return None
    return [str(_value(e, scopes)) for e in node.elts]


def python_launch_script(code: str) -> PythonLaunches:
    """The engines the Python source ``code`` starts, read from its literal engine constructor keywords
    (:data:`ENGINE_CALLS` with a ``kv_transfer_config``, written after the
    :data:`~pdd_operator.vllm.script.IN_PROCESS_ENGINE` word: they serve no HTTP) and literal ``vllm serve`` argument
    lists, as a shell script of ``ENV=... vllm serve ... &`` lines (all started together, as the processes a
    launcher starts run side by side), each on its call's line, with the file's vLLM pin (:func:`python_vllm_pin`)
    as a ``pip install vllm==X`` line; see :class:`PythonLaunches`. Source that does not parse gives no script
    and its syntax error. Pure."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return PythonLaunches(None, (f"line {exc.lineno}: it is not Python that parses ({exc.msg})",))
    scopes = _Scopes(tree)
    lines: dict[int, str] = {}
    unread: list[str] = []
    for node in ast.walk(tree):
        words = None
        try:
            if isinstance(node, ast.Call) and _name(node.func) in ENGINE_CALLS \
                    and any(k.arg in ("kv_transfer_config", None) for k in node.keywords):
                words = _engine_words(node, scopes)
            elif isinstance(node, ast.List):
                words = _argv_words(node, scopes)
        except NotLiteral as exc:
            unread.append(f"line {exc.line or node.lineno}: {_name(getattr(node, 'func', None)) or 'an argument list'}"
                          f"(...) is not literal ({exc})")
            continue
        if words is None:
            continue
        call = node if isinstance(node, ast.Call) else scopes.parents.get(node)
        env, env_unread = _environment(call if isinstance(call, ast.Call) else node, scopes)
        unread += env_unread
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        wrapper = [IN_PROCESS_ENGINE] if isinstance(node, ast.Call) else []  # built in-process: no API server
        lines[node.lineno] = (prefix + " " if prefix else "") + " ".join(shlex.quote(w) for w in [*wrapper, *words]) + " &"
    if not lines:
        return PythonLaunches(None, tuple(unread))
    pin = python_vllm_pin(code)
    if pin and pin[0] not in lines:
        lines[pin[0]] = f"pip install vllm=={pin[1]}"
    script = "\n".join(lines.get(n, "") for n in range(1, max(lines) + 1)) + "\n"
    return PythonLaunches(script, tuple(unread))
