"""vLLM's command-line flags as the rules read them: :func:`parse_flags` turns an engine's argv into its model and
flags. Kept apart from :mod:`pdd_operator.vllm.args` so that :mod:`pdd_operator.vllm.script` can compare the flags
of the engines a script's branches start (:func:`~pdd_operator.vllm.script.launches`) without an import cycle.
"""

from __future__ import annotations

import json
import re

from pdd_operator.vllm.expansion import unknown_names

_ALIASES = {
    "-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size", "-dp": "--data-parallel-size",
    "-pcp": "--prefill-context-parallel-size", "-dcp": "--decode-context-parallel-size",
    "-O": "--compilation-config",
    **{"-dpn": "--data-parallel-rank", "-dpr": "--data-parallel-start-rank", "-dpl": "--data-parallel-size-local",
       "-dpa": "--data-parallel-address", "-dpp": "--data-parallel-rpc-port", "-dpb": "--data-parallel-backend",
       "-dph": "--data-parallel-hybrid-lb", "-dpe": "--data-parallel-external-lb",
       "-dpm": "--data-parallel-multi-port-external-lb", "-ep": "--enable-expert-parallel"},
    **{"-cc": "--compilation-config", "-ac": "--attention-config", "-sc": "--speculative-config",
       "-dc": "--diffusion-config"},
    **{"-q": "--quantization", "-n": "--nnodes", "-r": "--node-rank", "-asc": "--api-server-count"},
}
"""Short options of vLLM's parser (vllm/engine/arg_utils.py ``EngineArgs.add_cli_args``): ``-dp``, ``-dpl``,
``-dpa`` and ``-dpp`` in every release read (0.9.0 l.604-616), ``-dpn``, ``-dpr`` and ``-dpb`` from 0.10.0 (absent
from the 0.9.0 sdist; 0.11.0 l.662-688), ``-dph`` and ``-dpe`` from 0.11.1 (absent from the 0.11.0 sdist), ``-ep``
from 0.14.0, ``-dpm`` from 0.24.0 (absent from 0.18.0); ``-cc`` from 0.12.0 (0.11.1 has
``-O`` there, l.1149; 0.12.0 l.1128), ``-ac`` from 0.13.0 (absent from 0.12.0; 0.13.0 l.1137), ``-sc`` from 0.21.0
(absent from 0.18.0), ``-dc`` from 0.24.0 (absent from 0.23.0; 0.24.0 l.1508). Read for any version: a release before
them refuses the short option at argument parsing ('unrecognized arguments'), which :func:`short_options` keeps for the
``cli-flag-not-yet`` rule (:data:`pdd_operator.vllm.added_flags.ADDED_FLAGS`). ``-q`` (``--quantization``;
vllm/engine/arg_utils.py 0.9.0 l.475, 0.11.0 l.548, 0.34.0 l.999) is in every sdist read from 0.9.0 to 0.34.0;
``-asc`` (``--api-server-count``) comes with its long flag in vllm serve's own parser in 0.9.1 (absent from the 0.9.0
sdist; vllm/entrypoints/cli/serve.py 0.9.1 l.88-92), in make_arg_parser from 0.10.0 (vllm/entrypoints/openai/cli_args.py
0.10.0 l.225, 0.14.0 l.282, vllm/entrypoints/common/cli_args.py 0.34.0 l.462);
``-n`` (``--nnodes``) and ``-r`` (``--node-rank``) with theirs in 0.11.1 (absent from the 0.11.0 sdist; 0.11.1
l.759-760, 0.12.0 l.748-749, 0.34.0 l.1192-1193). Every short
option vLLM's engine parser registers in these sdists is here (``add_argument`` calls with a single-dash name in
vllm/engine/arg_utils.py and the entrypoints' cli_args.py, read in 0.9.0, 0.10.0, 0.10.1.1, 0.11.0, 0.11.1,
0.12.0-0.14.0, 0.20.1, 0.20.2, 0.21.0, 0.31.0-0.34.0); ``-O`` is also rewritten by
``FlexibleArgumentParser.parse_args`` (``-O3``), which is not read here. A one-letter
short option takes its value attached as argparse allows (``-qfp8``, ``-n2``: :func:`_split_short`)."""
#: Boolean flags (``--x`` / ``--no-x``) the rules care about; ``--headless`` and the data-parallel load-balancing
#: switches take no value (vllm/engine/arg_utils.py), so the token after them is never read as theirs.
_BOOL_FLAGS = {
    "--trust-remote-code", "--enable-prefix-caching", "--disable-hybrid-kv-cache-manager",
    "--enforce-eager", "--enable-expert-parallel", "--enable-eplb", "--enable-cumem-allocator", "--enable-sleep-mode",
    "--enable-chunked-prefill", "--enable-return-routed-experts", "--disable-sliding-window", "--async-scheduling",
    "--headless", "--data-parallel-hybrid-lb", "--data-parallel-external-lb", "--data-parallel-multi-port-external-lb",
    # 0.34.0 arg_utils.py line 615 (``bool | None``: BooleanOptionalAction, lines 383-385)
    "--enable-extensible-kv-cache",
}
#: Flags that take one or more words (argparse ``nargs="+"``): vLLM's ``get_kwargs`` gives every ``list[...]``-typed
#: field ``nargs="+"`` (vllm/engine/arg_utils.py 0.14.1 l.199, 0.34.0 l.258) and the frontend keeps it for
#: ``api_key`` and ``lora_modules`` (vllm/entrypoints/openai/cli_args.py 0.14.1, vllm/entrypoints/common/cli_args.py
#: 0.34.0 ``_customize_cli_kwargs``, which drops it for ``allowed_origins``/``_methods``/``_headers``, ``middleware``
#: and ``disable_access_log_for_endpoints``, so those take one word). The list fields of ``EngineArgs`` are read from
#: the 0.14.1 and 0.34.0 sdists (``served_model_name`` is ``str | list[str]`` in vllm/config of 0.10.1.1, 0.11.0
#: and 0.12.0 too); a flag a release lacks is refused there anyway (``cli-flag-not-yet``), so one set
#: serves every version. argparse gives such a flag every following word up to the next one that starts with ``-``,
#: so ``vllm serve --served-model-name a b`` has no positional model (``b`` is a second name).
_MANY_FLAGS = {
    "--served-model-name", "--allowed-media-domains", "--cudagraph-capture-sizes",
    "--numa-bind-nodes", "--numa-bind-cpus", "--device-ids", "--lora-target-modules", "--ignore-patterns",
    "--collect-detailed-traces", "--sleep-preserve-parameter-names", "--kv-cache-dtype-skip-layers",
    "--logits-processors", "--api-key", "--lora-modules",
}


def is_bool_flag(name: str) -> bool:
    """Whether the long option ``name`` (``--enable-prefix-caching``) is one of the boolean flags read here
    (:data:`_BOOL_FLAGS`: ``--x`` / ``--no-x``, argparse ``BooleanOptionalAction`` in vllm/engine/arg_utils.py)."""
    return name in _BOOL_FLAGS


def parse_flags(argv: list[str]) -> tuple[str | None, dict[str, str | bool]]:
    """Parse a vLLM server argv into ``(model, flags)``.

    ``flags`` maps long flag names (``--tensor-parallel-size``) to their string value, or to
    ``True``/``False`` for boolean flags (``--no-x`` gives ``{"--x": False}``; ``--x=<unknown:NAME>``, a value not
    in the manifest, stays that string, so that it reads as neither). The model is the
    positional argument of ``vllm serve`` or ``--model``. Tokens after a shell separator (``&&``,
    ``;``, ``|``) are ignored. A flag that takes several words (``_MANY_FLAGS``: ``--served-model-name a b``) maps to
    them joined by one space (``"a b"``), and none of them is the model. Dotted flags
    (``--kv-transfer-config.kv_role kv_both``) are gathered into their flag's JSON object
    (:func:`_dotted_config`), which replaces a JSON value given to the flag itself.
    """
    model: str | None = None
    flags: dict[str, str | bool] = {}
    dotted: dict[str, list[tuple[str, str | None]]] = {}
    for name, value in _words(argv):
        if name is None:
            model = value if model is None else model
        elif name.startswith("--no-") and f"--{name[5:]}" in _BOOL_FLAGS:
            flags[f"--{name[5:]}"] = False
        elif name in _BOOL_FLAGS:
            flags[name] = True if value is None else value if unknown_names(value) else value.lower() not in ("false", "0")
        elif "." in name:
            dotted.setdefault(name.partition(".")[0], []).append((name.partition(".")[2], value))
        else:
            flags[name] = True if value is None else value
    for name, parts in dotted.items():
        flags[name] = json.dumps(_dotted_config(parts))
    if isinstance(flags.get("--model"), str):
        model = str(flags["--model"])
    return model, flags


def flag_values(argv: list[str], name: str) -> list[str]:
    """Every value given to flag ``name`` (a long name, normalized as :func:`parse_flags` reads it) in ``argv``, in
    order: an ``append`` flag such as ``--middleware`` takes each occurrence (argparse ``action="append"``, 0.9.0
    vllm/entrypoints/openai/cli_args.py l.191), where :func:`parse_flags` keeps only the last."""
    return [value for flag, value in _words(argv) if flag == name and isinstance(value, str)]


def _dotted_config(parts: list[tuple[str, str | None]]) -> dict:
    """The JSON object vLLM's ``FlexibleArgumentParser.parse_args`` builds from one flag's dotted arguments
    (vllm/utils/argparse_utils.py 0.14.0 and 0.22.0, vllm/utils/__init__.py 0.10.1.1 and 0.11.0): each
    ``(keys, value)`` (``("kv_connector_extra_config.backends+", "LIBFABRIC")``) nests its value under its
    dot-separated keys; a value is read as JSON, else kept as the string; a key ending in ``+`` takes the
    comma-separated list of its value and appends it to a list already there; a later value of a key wins. vLLM
    then passes the object to the flag as if it were written as JSON (after any JSON the flag itself was given, so
    it wins)."""
    merged: dict = {}
    for path, raw in parts:
        append = path.endswith("+")
        keys = path.removesuffix("+").split(".")
        value: object
        if append:  # a list, as vLLM writes it: json.dumps(value.split(","))
            value = str(raw or "").split(",")
        else:
            try:
                value = json.loads(raw) if raw is not None else True
            except json.JSONDecodeError:
                value = raw
        node = merged
        for key in keys[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        last = keys[-1]
        node[last] = [*node[last], *value] if append and isinstance(node.get(last), list) else value
    return merged


def _words(argv: list[str]):
    """The words of an engine's argv (from its entry point on) as vLLM's argparse reads them, up to the first shell
    separator (``&&``, ``;``, ``|``, ``||``): ``(flag, value)`` for a flag, its long name normalized (``_`` read as
    ``-``, aliases resolved) and its value as written (after ``=``, or the next token unless the flag is boolean or
    that token is a flag or a separator; ``None`` when it has none; for a flag of ``_MANY_FLAGS``, every following token
    up to a flag, a separator or, after the first, a whole unknown expansion (which may hold flags), joined by one
    space), and ``(None, token)`` for a positional word. The one walk :func:`parse_flags` and :func:`loose_unknown` share."""
    tokens = argv[_entry_length(argv):]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in ("&&", ";", "|", "||"):
            return
        if tok.startswith("-"):
            name, eq, value = _split_short(tok) or tok.partition("=")
            if name.startswith("--"):  # vLLM accepts --kv_transfer_config too (not in a dotted flag's keys)
                head, dot, keys = name[2:].partition(".")
                name = "--" + head.replace("_", "-") + dot + keys
            name = _ALIASES.get(name, name)
            boolean = name in _BOOL_FLAGS or (name.startswith("--no-") and f"--{name[5:]}" in _BOOL_FLAGS)
            if eq:
                yield name, value
            elif name in _MANY_FLAGS:
                words = []
                while i + 1 < len(tokens) and not (tokens[i + 1].startswith("-") or tokens[i + 1] in ("&&", ";", "|", "||")
                                                   or (words and _loose_word(tokens[i + 1]))):
                    i += 1
                    words.append(tokens[i])
                yield name, " ".join(words) if words else None
            elif not boolean and i + 1 < len(tokens) and not (tokens[i + 1].startswith("--")
                                                             or tokens[i + 1] in ("&&", ";")):
                i += 1
                yield name, tokens[i]
            else:
                yield name, None
        else:
            yield None, tok
        i += 1


#: The one-letter short options of :data:`_ALIASES` whose value may be attached (``-O`` is left out: vLLM's own parser
#: rewrites ``-O3`` before argparse reads it).
_ATTACHED = frozenset({"-q", "-n", "-r"})


def _split_short(tok: str) -> tuple[str, str, str] | None:
    """``(name, "=", value)`` for a one-letter short option written with its value attached (``-qfp8``, ``-n2``),
    as argparse reads a single-dash word that is no option of its own but starts with a two-character one
    (``ArgumentParser._get_option_tuples``: the word's first two characters, the rest its explicit argument);
    ``None`` for any other word (``-n``, ``-n=2``, ``-tp``, ``--nnodes``)."""
    if tok[:2] in _ATTACHED and len(tok) > 2 and tok[2] != "=" and tok not in _ALIASES:
        return tok[:2], "=", tok[2:]
    return None


def _loose_word(tok: str) -> bool:
    """Whether ``tok`` is, whole, the expansion of a variable whose value is not in the files (``<unknown:NAME>``)."""
    names = unknown_names(tok)
    return bool(names) and tok == f"<unknown:{names[0]}>"


def short_options(argv: list[str]) -> dict[str, str]:
    """The short options of vLLM's parser (the keys of ``_ALIASES``: ``-dpl``, ``-ep``, ...) written in ``argv`` (an
    engine's argv from its entry point on), as written and in order, up to the first shell separator, each mapped to
    the long flag :func:`parse_flags` reads it as (a release without the short option may still define that flag)."""
    found: dict[str, str] = {}
    for tok in argv[_entry_length(argv):]:
        if tok in ("&&", ";", "|", "||"):
            break
        if (name := (_split_short(tok) or tok.partition("="))[0]) in _ALIASES:
            found[name] = _ALIASES[name]
    return found


def _entry_length(argv: list[str]) -> int:
    """How many tokens of ``argv`` (an engine's argv from its entry point on) name the entry point: 2 for ``vllm serve``
    (``/usr/local/bin/vllm serve``, ``vllm.entrypoints.cli.main serve``), 1 for a module run with ``python -m``
    (``vllm.entrypoints.openai.api_server``, ``dynamo.vllm``), whose next token is already a flag or the model."""
    if len(argv) >= 2 and argv[1] == "serve" and (argv[0].rsplit("/", 1)[-1] == "vllm"
                                                   or argv[0] == "vllm.entrypoints.cli.main"):
        return 2
    return 1


#: A word written as an option that vLLM's argument parser can match to no option whatever the release or platform:
#: three or more hyphens (``---max-num-batched-tokens``) or a typographic dash (figure, en or em dash, minus sign)
#: where ``-``/``--`` belongs, as pasted from rendered documentation (``—max-model-len``). vLLM's
#: FlexibleArgumentParser only rewrites ``_`` to ``-`` in words starting with ``--`` (and ``-O``) before handing the
#: list to argparse (vllm/utils.py 0.9.1 l.1440-1531, vllm/utils/__init__.py 0.11.0 l.1848-1981,
#: vllm/utils/argparse_utils.py 0.34.0 l.313-502); argparse takes a word starting with ``-`` that no option string
#: begins with for an unknown optional, and any other word for a positional, and both end in
#: ``parser.error('unrecognized arguments: ...')`` (exit 2) before an engine starts. No option of vLLM starts with
#: ``---`` nor with a non-ASCII dash, so this holds on every platform plugin too, which keeps vLLM's parser.
_MALFORMED_OPTION = re.compile("^(?:-{3,}|[\u2012-\u2015\u2212]{1,2}|-[\u2012-\u2015\u2212]|[\u2012-\u2015\u2212]-)"
                               "[A-Za-z]")


def option_spelling(name: str) -> str:
    """``name`` (an option's name without its dashes: ``tp``, ``max-model-len``) as vLLM's parser takes it: ``-tp``
    for one of its short options (:data:`_ALIASES`), ``--max-model-len`` otherwise."""
    return f"-{name}" if f"-{name}" in _ALIASES else f"--{name}"


def malformed_options(argv: list[str]) -> tuple[str, ...]:
    """The words of ``argv`` (an engine's argv from its entry point on, up to the first shell separator) that
    :data:`_MALFORMED_OPTION` matches, as written (``---max-num-batched-tokens``, ``--max-model-len=4096`` is not
    one), and the words of blanks only (``" "``: a backslash that escapes a trailing blank at a line end instead of
    the newline, :func:`pdd_operator.vllm.script._escaped_trailing_blank`) and empty words (``""``: a quoted empty
    expansion, an empty ``args`` item). vLLM's ``FlexibleArgumentParser.parse_args`` passes such words on unchanged
    (it rewrites only words starting with ``--`` or ``-O``: vllm/utils.py 0.9.1 l.1440-1531, vllm/utils/__init__.py
    0.11.0 l.1848-1981, vllm/utils/argparse_utils.py 0.14.0 and 0.34.0 l.313-502; from 0.9.0 ``vllm serve --model m``
    is moved to ``vllm serve m`` first), and argparse's ``_parse_optional`` takes an empty word (``if not
    arg_string``) and a word not starting with ``-`` for a positional, which vLLM has no place for: ``vllm serve
    [model_tag]`` takes one, the api_server module none, so 'unrecognized arguments', exit 2. ``()`` where there are
    none."""
    return tuple(tok.partition("=")[0] if tok.strip() else tok for _, tok in _malformed_words(argv))


def malformed_option_places(argv: list[str]) -> tuple[str, ...]:
    """For each word :func:`malformed_options` gives, in its order, the word of ``argv`` right before it (``--master-addr``
    for the empty word of ``--master-addr "$ADDR"`` with ``ADDR`` empty; the entry point's last word where it comes
    first), so that a finding can say which word it means: an empty or blank word has no text of its own."""
    return tuple(argv[i - 1] if i > 0 else "" for i, _ in _malformed_words(argv))


def _malformed_words(argv: list[str]) -> list[tuple[int, str]]:
    """``(index in argv, word)`` of each word :func:`malformed_options` reports."""
    found: list[tuple[int, str]] = []
    for i in range(_entry_length(argv), len(argv)):
        tok = argv[i]
        if tok in ("&&", ";", "|", "||"):
            break
        if _MALFORMED_OPTION.match(tok) or not tok.strip():
            found.append((i, tok))
    return found


def loose_unknown(argv: list[str]) -> str | None:
    """The name of a variable whose value is not in the files and whose expansion stands in ``argv`` (an engine's argv
    from its entry point on) where flags stand, not as a flag's value nor as ``vllm serve``'s model: ``vllm serve m
    --enforce-eager $EXTRA_ARGS``, ``python3 -m dynamo.vllm ${VLLM_ARGS}``. Such words may hold any flag, which
    vLLM's argparse then reads (a later flag wins over an earlier one), so no flag of the engine is known from the
    manifest alone; ``None`` when there is none. The tokens are walked as :func:`parse_flags` walks them."""
    takes_model = _entry_length(argv) == 2
    seen_model = False
    for name, word in _words(argv):
        if name is not None:
            continue
        names = unknown_names(word)
        model_here = takes_model and not seen_model
        seen_model = seen_model or takes_model
        if names and word == f"<unknown:{names[0]}>" and not model_here:
            return names[0]
    return None



#: Options that take exactly one argument (argparse's default ``nargs=None``, no ``action``) on every release read: the
#: data-parallel group's, each added with ``type=str`` / ``type=int`` and no ``nargs`` (``--data-parallel-address``
#: ``-dpa``: vllm/engine/arg_utils.py 0.23.0 l.1024, 0.30.0 l.1151, 0.34.0 l.1280, beside ``-dpp``, ``-dpl``, ``-dp``
#: and ``-dpr``).
_ONE_VALUE = frozenset({"--data-parallel-address", "--data-parallel-rpc-port", "--data-parallel-size",
                        "--data-parallel-size-local", "--data-parallel-start-rank"})


def missing_values(argv: list[str]) -> tuple[str, ...]:
    """The options of :data:`_ONE_VALUE` in ``argv`` (an engine's argv from its entry point on, up to the first shell
    separator) written without their argument, as written (``-dpa`` or ``--data-parallel-address``): the next word
    starts with ``--`` (and is not ``--`` alone nor holds a blank) or there is none. argparse's ``_parse_optional``
    reads such a word as an option string, known or not (Python's argparse: a ``-`` prefixed word without a blank
    that is no negative number is an optional), so the option gets zero of its one argument: ``error: argument
    --data-parallel-address/-dpa: expected one argument``, exit 2, before any engine starts. vLLM's
    ``FlexibleArgumentParser.parse_args`` hands the words on to argparse (vllm/utils/argparse_utils.py 0.34.0 l.156
    and l.313-502). ``()`` where there are none."""
    tokens = argv[_entry_length(argv):]
    found: list[str] = []
    for i, tok in enumerate(tokens):
        if tok in ("&&", ";", "|", "||"):
            break
        if "=" in tok or _ALIASES.get(tok, tok) not in _ONE_VALUE:
            continue
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        if after is None or after in ("&&", ";", "|", "||") or (
                after.startswith("--") and after != "--" and " " not in after):
            found.append(tok)
    return tuple(found)
