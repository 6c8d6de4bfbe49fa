"""Command-line flags vLLM removed, by the first release known to refuse each.

``vllm serve`` (and every launcher that hands vLLM's parser the rest of its argv: ``python -m
vllm.entrypoints.openai.api_server``, Dynamo's ``dynamo.vllm``) parses with ``FlexibleArgumentParser``
(``vllm/utils/argparse_utils.py``), an ``argparse.ArgumentParser``: a flag no parser defines ends in
``parser.error('unrecognized arguments: ...')`` and exit status 2 before the engine starts. A flag that
old guides and scripts still carry therefore stops the server outright on the releases that dropped it.

Only flags whose removal is on record are listed, each with the release from which vLLM refuses it and the
record; releases before that one accepted it (deprecated or not), so nothing is said for them. The record is the
flags written out here and those read release by release in vLLM's sdists
(:data:`pdd_operator.vllm.removed_flags_read.READ_REMOVALS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pdd_operator.vllm.removed_flags_read import READ_REMOVALS
from pdd_operator.vllm.versions import Version, fmt


@dataclass(frozen=True)
class RemovedFlag:
    """One removed flag.

    Attributes:
        refused_since: the first vLLM release known to refuse the flag (``(major, minor, patch)``).
        instead: what replaces it (for the fix).
        source: the record of its removal (vLLM pull request, the releases read).
    """

    refused_since: Version
    instead: str
    source: str


#: Long flag name (dashes, as :func:`pdd_operator.vllm.flags.parse_flags` normalises it) -> its removal.
REMOVED_FLAGS: dict[str, RemovedFlag] = {
    "--disable-log-requests": RemovedFlag(
        (0, 17, 0),
        "request logging is off by default; --enable-log-requests turns it on",
        "deprecated for --enable-log-requests by vllm PR #21739 (0.10.1); AsyncEngineArgs.add_cli_args of the 0.12.0, "
        "0.13.0, 0.14.0 and 0.16.0 sdists still defines it ('[DEPRECATED] Disable logging requests.', deprecated=True), "
        "the 0.17.0 sdist no more (vllm PR #29402 had announced the removal for 0.12.0; Dynamo PR #4659, KServe PR "
        "#4883 dropped it); vllm/engine/arg_utils.py of 0.18.0, 0.24.0 and 0.32.0 define only --enable-log-requests",
    ),
    "--task": RemovedFlag(
        (0, 13, 0),
        "vLLM picks the runner from the model; --runner / --convert select a pooling model's",
        "'unrecognized arguments: --task' on vLLM 0.13.0 (gpustack#3991); no parser of 0.18.0, 0.24.0 or 0.32.0 "
        "defines it (0.32.0's FlexibleArgumentParser.error adds a hint to use --runner / --convert instead)",
    ),
    "--worker-use-ray": RemovedFlag(
        (0, 7, 0),
        "--distributed-executor-backend ray",
        "vllm/engine/arg_utils.py of the 0.6.2 sdist defines it (lines 329-332: 'Deprecated, use "
        "--distributed-executor-backend=ray.'); no file of the 0.7.0 or 0.10.1.1 sdists names it (0.6.3-0.6.6 not "
        "read: nothing is said for them); substratusai/vllm-docker's entrypoint.sh still passes it",
    ),
}


REMOVED_FLAGS.update({
    flag: RemovedFlag(without, instead, f"defined in vllm/engine/arg_utils.py of the {fmt(with_)} sdist, in no parser of "
                                         f"the {fmt(without)} sdist nor of any later one read "
                                         "(pdd_operator/vllm/removed_flags_read.py)")
    for flag, (with_, without, instead) in READ_REMOVALS.items() if flag not in REMOVED_FLAGS})


def removed_flags(flags: Mapping[str, object]) -> tuple[str, ...]:
    """The :data:`REMOVED_FLAGS` among an engine's parsed flags (``--no-x`` forms included), in the order of
    :data:`REMOVED_FLAGS`; ``()`` when none.

    flags: the long flag names of :func:`~pdd_operator.vllm.flags.parse_flags` (a boolean ``--no-x`` appears as
    ``--x`` only for the flags it knows, so ``--no-disable-log-requests`` is looked up as written too)."""
    return tuple(name for name in REMOVED_FLAGS
                 if name in flags or f"--no-{name[2:]}" in flags)
