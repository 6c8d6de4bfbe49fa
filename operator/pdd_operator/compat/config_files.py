"""Engines whose settings come from ``vllm serve --config <file>.yaml``: the file read where it is among the files.

vLLM's ``FlexibleArgumentParser.parse_args`` looks for the word ``--config`` (exactly that word: ``"--config" in
args``; ``--config=<file>`` is taken by argparse's own ``--config`` option and the file is never read) and, through
``_pull_args_from_config``, puts the file's arguments right after the subcommand and its positional model, before the
rest of the command line, so that a flag given on the command line wins over the file ("cli > config > defaults";
vllm/utils.py 0.9.0 l.1409-1410, l.1483-1561; vllm/utils/argparse_utils.py 0.14.1 l.223, l.363-441, 0.20.0 l.298,
l.477-521, 0.34.0 l.371, l.551-600). ``load_config_file`` (``_load_config_file`` in 0.9.x) turns each top-level key of
the YAML mapping into ``--<key>`` as written (``parse_args`` then rewrites ``_`` to ``-`` in the name, as on the
command line) followed by its value, release by release:

- a boolean: ``true`` gives the bare flag; ``false`` gives nothing (the default stays), and from 0.28.0 ``--no-<key>``
  where the parser has that option (0.9.0 l.1604-1607, 0.27.1 and 0.28.0 argparse_utils.py load_config_file);
- a list: ``str(list)`` as one word up to 0.10.1.1; from 0.10.2 the items as words, an empty list nothing
  (vllm/utils/__init__.py 0.10.2 l.2060-2065);
- a mapping: ``str(dict)``, Python's repr with single quotes, up to 0.14.1 (argparse_utils.py 0.14.1 l.489), which
  no JSON-typed flag accepts (``--kv-transfer-config`` goes through ``TypeAdapter(KVTransferConfig).validate_json``,
  vllm/engine/arg_utils.py 0.14.1 l.280-284: "cannot be converted", exit 2; vllm-project/vllm#33196); from 0.16.0
  ``json.dumps(value)`` (argparse_utils.py 0.16.0 l.505, 0.34.0 l.668). 0.15.x was not read: a mapping is read there,
  and on an engine of unknown release, as JSON (the newer behaviour, so no error is promised where none was read),
  and the engine gets the warning ``config-file-mapping-release-dependent`` (:func:`undecided_mappings`);
- anything else: ``str(value)``.

Where the file is a key of a ConfigMap among the files checked, mounted into the container from a ``configMap`` volume
(:func:`~pdd_operator.compat.mounted_scripts.mounted_files`), the container's ``command``/``args`` are rewritten with
the file's arguments in vLLM's place, so every rule reads the engine as vLLM starts it; in an ``sh``/``bash -c``
script, the file's arguments are written, shell-quoted, after the ``serve`` (and model) of the command that names
the file. A ``--config`` whose file is
not there (a ConfigMap not in the files, a file baked into the image, a host path) keeps the word: such an engine is
reported as not checked (:func:`unread_config_file`), never judged from its command line alone.
"""

from __future__ import annotations

import json
import re
import shlex

import yaml

from pdd_operator.compat.config_refs import ConfigMaps
from pdd_operator.compat.mounted_scripts import mounted_files, rewrite_mounting_containers
from pdd_operator.vllm.expansion import runs_shell, shell_operands
from pdd_operator.vllm.flags import is_bool_flag
from pdd_operator.vllm.versions import Version, resolve_version

#: The word vLLM's ``parse_args`` looks for (see the module docstring).
CONFIG = "--config"
#: First release whose ``load_config_file`` gives a list's items as separate words (0.10.2 l.2060-2065; 0.10.1.1 not).
LIST_ITEMS_FROM: Version = (0, 10, 2)
#: Last release read whose ``load_config_file`` writes a mapping as ``str(dict)`` (0.14.1 l.489); 0.15.x not read.
DICT_REPR_UNTIL: Version = (0, 14, 1)
#: First release whose ``load_config_file`` writes ``--no-<key>`` for ``false`` (0.28.0; 0.27.1 drops it).
NO_FLAG_FROM: Version = (0, 28, 0)
#: First release read whose ``load_config_file`` writes a mapping as ``json.dumps`` (argparse_utils.py 0.16.0 l.505).
DICT_JSON_FROM: Version = (0, 16, 0)
#: The key under which :func:`inline_config_files` leaves, on a container it rewrote, the flags whose value was a YAML
#: mapping in the file where the release does not tell how vLLM passes it (unknown, or 0.15.x: not read); read into
#: ``RoleConfig.config_file_mappings`` (rule ``config-file-mapping-release-dependent``).
MAPPINGS_KEY = "x-pdd-config-file-mappings"
#: A line of a shell script that starts vLLM with ``--config <file>``.
_SCRIPT_CONFIG = re.compile(r"\bvllm\b[^\n]*\s--config\s+\S")


def config_file_path(argv: list[str]) -> str | None:
    """The file an engine's ``argv`` gives to ``--config`` (the word after the exact word ``--config``, which is the
    only form vLLM reads), or ``None``."""
    words = [str(w) for w in argv]
    if CONFIG not in words:
        return None
    i = words.index(CONFIG)
    return words[i + 1] if i + 1 < len(words) else None


def unread_config_file(argv: list[str]) -> str | None:
    """Why the engine of ``argv`` cannot be judged, where it still reads its settings from a ``--config`` file that
    was not found among the files checked (:func:`inline_config_files` replaces the ones it finds); else ``None``."""
    path = config_file_path(argv)
    if path is None:
        return None
    return (f"its settings come from the vLLM config file {path} (vllm serve --config), which is not in these files "
            "(a ConfigMap not among them, a file in the image or on the host): the model, parallelism and KV transfer "
            "settings it holds are unknown; give the ConfigMap that holds it with the manifests (or its keys as "
            "command-line flags) to have the engine checked")


def starts_with_config_file(text: str) -> bool:
    """Whether a shell script ``text`` starts vLLM with ``--config <file>`` (its settings, a KV connector among them,
    may all be in that file, so the script is not taken for one that configures no P/D)."""
    return bool(_SCRIPT_CONFIG.search(text))


def config_file_args(text: str, version: Version | None) -> list[str] | None:
    """The words vLLM's ``load_config_file`` makes of the YAML ``text`` on release ``version`` (``None``: unknown,
    read as the newest), in the file's key order (see the module docstring for each value type); ``None`` when the
    text is not a YAML mapping (vLLM then fails in ``config.items()``)."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(config, dict):
        return None
    out: list[str] = []
    for key, value in config.items():
        flag = f"--{key}"
        if isinstance(value, bool):
            if value:
                out.append(flag)
            elif version is not None and version >= NO_FLAG_FROM and is_bool_flag(flag):
                out.append(f"--no-{key}")  # only where the parser has the option as written (dashes)
        elif isinstance(value, list):
            if version is not None and version < LIST_ITEMS_FROM:
                out += [flag, str(value)]
            elif value:
                out += [flag, *(str(item) for item in value)]
        elif isinstance(value, dict):
            out += [flag, str(value) if version is not None and version <= DICT_REPR_UNTIL else json.dumps(value)]
        else:
            out += [flag, str(value)]
    return out


def undecided_mappings(text: str, version: Version | None) -> list[str]:
    """The flags (``--<key>``) whose value in the YAML ``text`` is a mapping, where release ``version`` does not tell
    whether vLLM passes it as ``str(dict)`` (up to 0.14.1) or as JSON (from 0.16.0): ``version`` ``None`` or 0.15.x;
    ``[]`` otherwise or for a text that is no YAML mapping."""
    if version is not None and not DICT_REPR_UNTIL < version < DICT_JSON_FROM:
        return []
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    return [f"--{k}" for k, v in config.items() if isinstance(v, dict)] if isinstance(config, dict) else []


def _note_mappings(container: dict, text: str, version: Version | None) -> None:
    """Record on ``container`` (:data:`MAPPINGS_KEY`) the flags of :func:`undecided_mappings`, if any."""
    if found := undecided_mappings(text, version):
        container[MAPPINGS_KEY] = sorted({*container.get(MAPPINGS_KEY, ()), *found})


def inline_config_files(doc: dict, config_maps: ConfigMaps) -> dict:
    """``doc`` (not changed) with each container whose ``command``/``args`` run vLLM with ``--config <file>``, the file
    a key of a ConfigMap of ``config_maps`` mounted into it, rewritten with the file's arguments where vLLM puts them
    (after ``serve`` and its positional model, or after the entry point, before the rest of the command line) and the
    two ``--config`` words removed. Returns a deep copy where anything changed, else ``doc``."""
    return rewrite_mounting_containers(
        doc, config_maps, lambda container, volumes: _inline_container(container, mounted_files(container, volumes)))


def _insertion(words: list[str], first_arg: int) -> tuple[int, bool]:
    """Where vLLM puts a config file's arguments in ``words`` (command + args; ``first_arg``: where ``args`` begin):
    after ``serve`` and its positional model, after an ``api_server`` module, else at the start of ``args`` (the
    image's entry point runs them); and whether ``serve`` is given a positional model there."""
    for i, word in enumerate(words):
        if word == "serve" or word.endswith("vllm.entrypoints.openai.api_server"):
            at = i + 1
            if word == "serve" and at < len(words) and not words[at].startswith("-"):
                return at + 1, True  # the positional model stays first
            return at, False
    at = first_arg
    return (at + 1, True) if at < len(words) and not words[at].startswith("-") else (at, False)


def _without_model(added: list[str]) -> list[str]:
    """The file's arguments without its ``--model <name>`` (``model`` key), which a positional model overrides: vLLM
    keeps both through parsing and ``serve`` then sets ``args.model = args.model_tag`` (vllm/entrypoints/cli/serve.py
    0.9.0 l.36-37, 0.14.1 l.50-51, 0.34.0 l.56-57)."""
    out, skip = [], False
    for i, word in enumerate(added):
        if skip:
            skip = False
            continue
        if word == "--model" and i + 1 < len(added):
            skip = True
            continue
        out.append(word)
    return out


#: ``--config <file>`` in a shell script: the word and its operand, plain or quoted as a whole.
_SCRIPT_OPERAND = re.compile(r"""(?<![\w-])--config\s+(?:'([^'\s]+)'|"([^"\s]+)"|([^\s'";&|)]+))(?=$|[\s;&|)])""")
#: ``serve`` as a word of a script, then its positional model where one follows (a word not starting with ``-``, not a
#: line continuation or a shell operator).
_SCRIPT_SERVE = re.compile(r"""(?<![\w.-])serve(?![\w.-])(?:[ \t]+(?!-|\\|[;&|)])(?:'[^']*'|"[^"]*"|[^\s;&|)]+))?""")


def _inline_script(container: dict, files: dict[str, str], version: Version | None) -> bool:
    """Splice a mounted config file into the ``sh``/``bash -c`` script of ``container`` (its ``command`` + ``args``):
    each ``--config <file>`` whose file is in ``files`` is removed and the file's arguments, shell-quoted (vLLM reads
    them as words, unexpanded), put right after the ``serve`` (and model) before it on the same command."""
    command = [str(x) for x in container.get("command") or []]
    argv = command + [str(x) for x in container.get("args") or []]
    if not runs_shell(argv):
        return False
    operands = shell_operands(argv)
    if not operands:
        return False
    script = operands[0]
    changed = False
    for match in reversed(list(_SCRIPT_OPERAND.finditer(script))):
        path = next(g for g in match.groups() if g)
        serves = [s for s in _SCRIPT_SERVE.finditer(script, 0, match.start())
                  if not re.search(r"[;&|\n]", script[s.end():match.start()].replace("\\\n", " "))]
        if path not in files or not re.search(r"\.ya?ml$", path) or not serves:
            continue
        added = config_file_args(files[path], version)
        if added is None:
            continue
        _note_mappings(container, files[path], version)
        serve = serves[-1]
        if serve.group(0).strip() != "serve":
            added = _without_model(added)  # a positional model follows serve
        words = " ".join(shlex.quote(a) for a in added)
        script = script[:serve.end()] + " " + words + script[serve.end():match.start()] + script[match.end():]
        changed = True
    if not changed:
        return False
    at = argv.index(operands[0], 2)
    new = [*argv[:at], script, *argv[at + 1:]]
    container["command"], container["args"] = new[:len(command)], new[len(command):]
    if not container["args"]:
        container.pop("args")
    return True


def _inline_container(container: dict, files: dict[str, str]) -> bool:
    command = [str(x) for x in container.get("command") or []]
    args = [str(x) for x in container.get("args") or []]
    words = command + args
    if runs_shell(words):
        return _inline_script(container, files, resolve_version(None, str(container.get("image") or ""))[0])
    path = config_file_path(words)
    if path is None or path not in files or not re.search(r"\.ya?ml$", path):
        return False  # vLLM refuses another extension (ValueError); a file not found stays unread
    version = resolve_version(None, str(container.get("image") or ""))[0]
    added = config_file_args(files[path], version)
    if added is None:
        return False
    _note_mappings(container, files[path], version)
    (at, positional), i = _insertion(words, len(command)), words.index(CONFIG)
    if positional:
        added = _without_model(added)
    new = words[:at] + added + words[at:i] + words[i + 2:]
    into_command = at < len(command) or (at == len(command) and not args)
    cut = len(command) + (len(added) if into_command else 0) - sum(1 for j in (i, i + 1) if j < len(command))
    container["command"] = new[:cut]
    if new[cut:] or "args" in container:
        container["args"] = new[cut:]
    if not container["command"]:
        container.pop("command")
    return True
