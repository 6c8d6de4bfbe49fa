"""The flags of Dynamo's vLLM worker (``python -m dynamo.vllm``) itself, per Dynamo release: which role and connector
flags a release's parser defines or refuses.

Read in the ``ai-dynamo`` wheels (``dynamo/vllm/args.py``, ``dynamo/vllm/backend_args.py``,
``dynamo/common/configuration/groups/runtime_args.py``) of 0.6.0, 0.7.0, 0.8.0, 0.8.1, 0.9.0, 0.9.1, 1.0.0, 1.1.0,
1.3.1, 1.4.0 and 1.6.1 (PyPI lists no release between 0.9.1 and 1.0.0, nor between 1.3.1 and 1.4.0):

- Parsing: 0.6.0-0.9.1 add vLLM's ``AsyncEngineArgs`` to the worker's own parser and call ``parser.parse_args()``
  (0.9.1 args.py lines 284-285); 1.0.0 on parse the worker's flags with ``parse_known_args`` and hand the rest to
  vLLM's parser (``vllm_parser.parse_args(unknown)``, 1.0.0 args.py lines 94-100, 1.4.0 lines 100-106). Either way a
  flag neither defines ends in argparse's ``unrecognized arguments`` (exit 2) before the engine starts.
- Role flags: ``--is-prefill-worker`` in every release read up to 1.3.1 (a deprecated alias of
  ``--disaggregation-mode prefill`` from 1.0.0, 1.3.1 backend_args.py lines 59-72); ``--is-decode-worker`` from 0.7.0
  (0.6.0 defines only the prefill one) to 1.3.1; both gone from 1.4.0 (ai-dynamo/dynamo#12089, "removed in v1.4.0",
  #12581) and 1.6.1. ``--disaggregation-mode`` from 1.0.0 (ai-dynamo/dynamo#6483; 1.0.0 backend_args.py line 32), in
  no release read before (0.9.1: "Dynamo 0.9 and earlier: --is-prefill-worker / --is-decode-worker",
  ai-dynamo/aiconfigurator#1443).
- Connector: 0.6.0-0.9.1 define ``--connector`` with default ``[nixl]`` (0.9.1 lines 138-144) and raise
  ``ValueError("Cannot specify both --kv-transfer-config and --connector flags")`` when a ``--kv-transfer-config`` is
  given too: in 0.6.0 and 0.7.0 whenever ``args.connector is not None`` (always: the default is a list; 0.7.0 lines
  285-294), in 0.8.0-0.9.1 unless the list is empty or ``none`` / ``null`` (0.8.0 lines 364-375, 0.9.1 lines
  430-457); 0.7.1 was not read. 1.0.0 on still parse
  ``--connector`` (``DYN_CONNECTOR``, default ``[]``) but ``_reject_connector_flag`` raises ``ValueError('--connector
  is no longer supported for the vLLM backend ...')`` whenever it is set at all (1.0.0 args.py lines 190, 404-435;
  1.6.1 lines 645-690): srt-slurm's ``--connector nixl`` stopped every worker (ishandhanani/srt-slurm#223).

Only Dynamo's own runtime images name the release (:func:`~pdd_operator.compat.dynamo_engine_defaults.dynamo_release`);
a worker on any other image is not judged here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pdd_operator.vllm.versions import Version, fmt

#: The ai-dynamo releases whose dynamo.vllm parser was read (oldest first).
RELEASES_READ: tuple[Version, ...] = ((0, 6, 0), (0, 7, 0), (0, 8, 0), (0, 8, 1), (0, 9, 0), (0, 9, 1), (1, 0, 0),
                                      (1, 1, 0), (1, 3, 1), (1, 4, 0), (1, 6, 1))


@dataclass(frozen=True)
class WorkerFlag:
    """One flag of dynamo.vllm's own parser and the Dynamo releases that define it.

    Attributes:
        absent_in: the newest release read without it before it appeared (``None``: in the oldest release read).
        present_in: the first release read with it.
        gone_in: the first release read without it again (``None``: still in the newest read).
        instead: what replaces it, for the fix.
    """

    absent_in: Version | None
    present_in: Version
    gone_in: Version | None
    instead: str


#: Long flag -> the releases that define it (module docstring for the lines read).
WORKER_FLAGS: dict[str, WorkerFlag] = {
    "--is-prefill-worker": WorkerFlag(None, (0, 6, 0), (1, 4, 0), "--disaggregation-mode prefill"),
    "--is-decode-worker": WorkerFlag((0, 6, 0), (0, 7, 0), (1, 4, 0), "--disaggregation-mode decode"),
    "--disaggregation-mode": WorkerFlag((0, 9, 1), (1, 0, 0), None,
                                        "--is-prefill-worker (prefill) or --is-decode-worker (decode)"),
}

#: The first release read whose worker rejects any explicit ``--connector`` (before it, ``--connector`` defaults to
#: ``[nixl]`` and conflicts with ``--kv-transfer-config``).
CONNECTOR_REJECTED_SINCE: Version = (1, 0, 0)
#: The first release read that lets ``--connector none`` / ``null`` stand beside ``--kv-transfer-config``, and the
#: newest read that does not (0.7.1, between them, was not read: not judged there).
CONNECTOR_NONE_ALLOWED_SINCE: Version = (0, 8, 0)
CONNECTOR_NONE_REFUSED_UNTIL: Version = (0, 7, 0)


@dataclass(frozen=True)
class FlagRefusal:
    """A worker flag its Dynamo release does not define.

    Attributes:
        flag: the flag as written.
        kind: ``removed`` (the release is past its last) or ``not-yet`` (before its first).
        why: the releases read, for the message.
        instead: what to pass instead.
    """

    flag: str
    kind: str
    why: str
    instead: str


def flag_refusals(flags: Mapping[str, object], release: Version) -> list[FlagRefusal]:
    """The worker flags among ``flags`` (long names, as :func:`~pdd_operator.vllm.flags.parse_flags` gives them) that
    Dynamo ``release`` does not define: ``removed`` from :attr:`WorkerFlag.gone_in` on (later releases are taken to
    keep it out), ``not-yet`` up to :attr:`WorkerFlag.absent_in` (earlier releases are taken not to have it either).
    Releases between two read that disagree are not judged (none lies between the boundaries read)."""
    out: list[FlagRefusal] = []
    for flag, spec in WORKER_FLAGS.items():
        if flag not in flags:
            continue
        if spec.gone_in is not None and release >= spec.gone_in:
            out.append(FlagRefusal(flag, "removed", f"defined up to the Dynamo release before {fmt(spec.gone_in)}, "
                                   f"not from {fmt(spec.gone_in)} on", spec.instead))
        elif spec.absent_in is not None and release <= spec.absent_in:
            out.append(FlagRefusal(flag, "not-yet", f"first defined in Dynamo {fmt(spec.present_in)}",
                                   spec.instead))
    return out


def connector_refusal(flags: Mapping[str, object], env: Mapping[str, str], release: Version) -> str | None:
    """Why Dynamo ``release``'s worker stops over its connector flags, or ``None``.

    ``flags``: the worker's parsed flags; ``env``: its environment (``DYN_CONNECTOR`` sets ``--connector`` in 1.x).
    From :data:`CONNECTOR_REJECTED_SINCE` any ``--connector`` (or ``DYN_CONNECTOR``) raises; before it a
    ``--kv-transfer-config`` beside the connector list (default ``[nixl]``) raises, unless that list is empty (a bare
    ``--connector``) or ``none`` / ``null`` on a release from :data:`CONNECTOR_NONE_ALLOWED_SINCE` (not judged between
    :data:`CONNECTOR_NONE_REFUSED_UNTIL` and it)."""
    connector = flags.get("--connector")
    if release >= CONNECTOR_REJECTED_SINCE:
        if connector is not None or "DYN_CONNECTOR" in env:
            given = f"--connector {connector}" if connector is not None else f"DYN_CONNECTOR={env['DYN_CONNECTOR']}"
            return (f"Dynamo {fmt(release)}'s worker rejects {given}: _reject_connector_flag raises ValueError('--connector "
                    "is no longer supported for the vLLM backend ...') before the engine starts (the connector is "
                    "named by --kv-transfer-config from Dynamo 1.0.0)")
        return None
    if "--kv-transfer-config" not in flags:
        return None
    value = str(connector).lower() if isinstance(connector, str) else "nixl (its default)"
    if (connector is True or value in ("none", "null")) and release > CONNECTOR_NONE_REFUSED_UNTIL:
        return None
    return (f"Dynamo {fmt(release)}'s worker builds its own connector from --connector ({value}) and raises "
            "ValueError('Cannot specify both --kv-transfer-config and --connector flags') when --kv-transfer-config "
            "is given too, before the engine starts")
