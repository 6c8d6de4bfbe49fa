"""The flags of Dynamo's vLLM worker (``python -m dynamo.vllm``) itself, per Dynamo release: which role and connector
flags a release's parser defines or refuses.

Read in every ``ai-dynamo`` wheel PyPI lists from 0.6.0 to 1.6.1 (``dynamo/vllm/args.py``,
``dynamo/vllm/backend_args.py``, ``dynamo/common/configuration/groups/runtime_args.py``, ``dynamo/common/constants.py``):
0.6.0, 0.6.1, 0.7.0, 0.7.0.post1, 0.7.1, 0.8.0, 0.8.1, 0.8.1.post3, 0.9.0, 0.9.1, 1.0.0, 1.0.1, 1.0.2, 1.1.0, 1.1.1,
1.2.0.post1, 1.2.1, 1.3.0.post1, 1.3.1, 1.4.0, 1.4.1, 1.4.2, 1.5.0, 1.5.1, 1.6.0 and 1.6.1 (no other release between
them; a ``.postN`` wheel reads as the release it extends, and each read agrees with it):

- Parsing: 0.6.0-0.9.1 add vLLM's ``AsyncEngineArgs`` to the worker's own parser and call ``parser.parse_args()``
  (0.9.1 args.py lines 284-285); 1.0.0 on parse the worker's flags with ``parse_known_args`` and hand the rest to
  vLLM's parser (``vllm_parser.parse_args(unknown)``, 1.0.0 args.py lines 94-100, 1.4.0 lines 100-106). Either way a
  flag neither defines ends in argparse's ``unrecognized arguments`` (exit 2) before the engine starts.
- Role flags: ``--is-prefill-worker`` in every release up to 1.3.1 (a deprecated alias of ``--disaggregation-mode
  prefill`` from 1.0.0, 1.3.1 backend_args.py lines 59-72); ``--is-decode-worker`` from 0.6.1 (0.6.0 defines only the
  prefill one) to 1.3.1; both gone from 1.4.0 (ai-dynamo/dynamo#12089, "removed in v1.4.0", #12581) on. 1.0.0-1.3.1
  raise ``ValueError("Cannot combine --is-prefill-worker/--is-decode-worker with --disaggregation-mode")`` when both
  spellings are given (1.0.0 backend_args.py lines 407-413, 1.3.1 lines 358-364).
- ``--disaggregation-mode`` from 1.0.0 (ai-dynamo/dynamo#6483; 1.0.0 backend_args.py line 32), in no release before
  (0.9.1: "Dynamo 0.9 and earlier: --is-prefill-worker / --is-decode-worker", ai-dynamo/aiconfigurator#1443). Its
  argparse ``choices`` are ``DisaggregationMode``'s values (dynamo/common/constants.py): ``agg``, ``prefill``,
  ``decode`` in 1.0.0-1.0.2; ``encode`` added in 1.1.0 (1.1.0 constants.py line 15); ``pd`` (a combined worker, read
  as ``agg``) added in 1.3.0 (1.3.0.post1 backend_args.py lines 23, 46-54; 1.2.1 has none). Any other value stops the
  worker with argparse's ``invalid choice`` (exit 2).
- Connector: 0.6.0-0.9.1 define ``--connector`` with default ``[nixl]`` (0.9.1 lines 138-144) and raise
  ``ValueError("Cannot specify both --kv-transfer-config and --connector flags")`` when a ``--kv-transfer-config`` is
  given too: in 0.6.0-0.7.1 whenever ``args.connector is not None`` (always: the default is a list; 0.7.0 lines
  285-294, 0.7.1 lines 285-294), in 0.8.0-0.9.1 unless the list is empty or ``none`` / ``null`` (0.8.0 lines 364-375,
  0.9.1 lines 430-457). 1.0.0 on still parse ``--connector`` (``DYN_CONNECTOR``, default ``[]``: 1.0.0
  runtime_args.py lines 110-116) but ``_reject_connector_flag`` raises ``ValueError('--connector is no longer
  supported for the vLLM backend ...')`` whenever the list is not empty or ``DYN_CONNECTOR`` is set at all (1.0.0
  args.py lines 190, 404-451, and the wheel's own test ``test_connector_none_raises_error``; 1.1.0 lines 190,
  439-481; 1.6.1 lines 283, 645-690): srt-slurm's ``--connector nixl`` stopped every worker
  (ishandhanani/srt-slurm#223). A bare ``--connector`` (an empty list) without ``DYN_CONNECTOR`` passes. The same
  releases add no connector of their own: a prefill worker without ``--kv-transfer-config`` raises "--connector is
  deprecated and the default is no longer nixl" (1.0.0 args.py lines 192-207).
  :data:`CONNECTOR_REJECTED_SINCE` is the one definition of that boundary
  (:mod:`pdd_operator.compat.dynamo_engine_defaults` reads it too).

Only Dynamo's own runtime images name the release (:func:`~pdd_operator.compat.dynamo_engine_defaults.dynamo_release`);
a worker on any other image is not judged here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pdd_operator.vllm.versions import Version, fmt

#: The ai-dynamo releases whose dynamo.vllm parser was read (oldest first; a ``.postN`` wheel as the release it
#: extends): every release PyPI lists from 0.6.0 to 1.6.1.
RELEASES_READ: tuple[Version, ...] = ((0, 6, 0), (0, 6, 1), (0, 7, 0), (0, 7, 1), (0, 8, 0), (0, 8, 1), (0, 9, 0),
                                      (0, 9, 1), (1, 0, 0), (1, 0, 1), (1, 0, 2), (1, 1, 0), (1, 1, 1), (1, 2, 0),
                                      (1, 2, 1), (1, 3, 0), (1, 3, 1), (1, 4, 0), (1, 4, 1), (1, 4, 2), (1, 5, 0),
                                      (1, 5, 1), (1, 6, 0), (1, 6, 1))


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
    "--is-decode-worker": WorkerFlag((0, 6, 0), (0, 6, 1), (1, 4, 0), "--disaggregation-mode decode"),
    "--disaggregation-mode": WorkerFlag((0, 9, 1), (1, 0, 0), None,
                                        "--is-prefill-worker (prefill) or --is-decode-worker (decode)"),
}

#: The first release whose worker rejects any explicit ``--connector`` and builds no connector of its own (the connector
#: is named by ``--kv-transfer-config`` only); before it ``--connector`` defaults to ``[nixl]``, builds the connector
#: and conflicts with ``--kv-transfer-config``. Read in 1.0.0 (args.py lines 189-210, 404-451) and every release after.
CONNECTOR_REJECTED_SINCE: Version = (1, 0, 0)
#: The first release that lets ``--connector none`` / ``null`` stand beside ``--kv-transfer-config`` (0.8.0 lines
#: 364-375), and the newest that does not (0.7.1 lines 285-294, ``args.connector is not None``): adjacent releases.
CONNECTOR_NONE_ALLOWED_SINCE: Version = (0, 8, 0)
CONNECTOR_NONE_REFUSED_UNTIL: Version = (0, 7, 1)
#: The first release whose worker defines ``--connector`` (0.5.0 args.py l.96-102, default ``["nixl"]``, and the
#: "Cannot specify both" check l.158-161; the same in 0.5.1 l.97-103, 166-169). 0.4.0 and 0.4.1 define no such flag
#: (their parser, args.py 0.4.0 l.54-89 / 0.4.1 l.58-96, is the worker's own flags and vLLM's ``add_cli_args``): they
#: accept ``--kv-transfer-config`` and then replace it (:data:`~pdd_operator.compat.dynamo_engine_defaults.
#: KV_TRANSFER_OVERWRITTEN`), and argparse refuses a ``--connector`` as an unrecognized argument.
CONNECTOR_FLAG_SINCE: Version = (0, 5, 0)
#: ``--disaggregation-mode``'s argparse choices by the first release that takes them (module docstring).
DISAGGREGATION_MODES: tuple[tuple[Version, frozenset[str]], ...] = (
    ((1, 0, 0), frozenset({"agg", "prefill", "decode"})),
    ((1, 1, 0), frozenset({"agg", "prefill", "decode", "encode"})),
    ((1, 3, 0), frozenset({"agg", "prefill", "decode", "encode", "pd"})),
)
#: The releases that define both the legacy role flags and ``--disaggregation-mode`` and refuse the two together.
MIXED_ROLE_FLAGS_REFUSED: tuple[Version, Version] = ((1, 0, 0), (1, 3, 1))


@dataclass(frozen=True)
class FlagRefusal:
    """A worker flag its Dynamo release does not define.

    Attributes:
        flag: the flag as written.
        kind: ``removed`` (the release is past its last), ``not-yet`` (before its first), ``value`` (a value its
            argparse choices lack: ``invalid choice``, exit 2) or ``conflict`` (flags the release defines but refuses
            together: ``ValueError``).
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
    keep it out), ``not-yet`` up to :attr:`WorkerFlag.absent_in` (earlier releases are taken not to have it either);
    then, for the flags the release defines, ``value`` for a ``--disaggregation-mode`` value outside its choices
    (:data:`DISAGGREGATION_MODES`; a value not in the manifest, ``<unknown:...>``, is not judged) and ``conflict`` for
    a legacy role flag beside ``--disaggregation-mode`` on the releases that refuse both
    (:data:`MIXED_ROLE_FLAGS_REFUSED`). Every release between the boundaries was read."""
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
    if any(r.flag == "--disaggregation-mode" for r in out) or "--disaggregation-mode" not in flags:
        return out
    mode = flags["--disaggregation-mode"]
    choices = next((c for since, c in reversed(DISAGGREGATION_MODES) if release >= since), frozenset())
    if isinstance(mode, str) and not mode.startswith("<unknown:") and mode not in choices:
        later = [fmt(since) for since, c in DISAGGREGATION_MODES if mode in c]
        out.append(FlagRefusal(f"--disaggregation-mode {mode}", "value",
                               f"its choices there are {', '.join(sorted(choices))}"
                               + (f"; {mode!r} from Dynamo {later[0]}" if later else ""),
                               "--disaggregation-mode " + ("agg" if mode == "pd" else " | ".join(sorted(choices)))))
    low, high = MIXED_ROLE_FLAGS_REFUSED
    legacy = [f for f in ("--is-prefill-worker", "--is-decode-worker") if f in flags]
    if legacy and low <= release <= high:
        out.append(FlagRefusal(f"{legacy[0]} with --disaggregation-mode", "conflict",
                               "ValueError('Cannot combine --is-prefill-worker/--is-decode-worker with "
                               "--disaggregation-mode. Use only --disaggregation-mode.')",
                               "--disaggregation-mode alone"))
    return out


def connector_refusal(flags: Mapping[str, object], env: Mapping[str, str], release: Version) -> str | None:
    """Why Dynamo ``release``'s worker stops over its connector flags, or ``None``.

    ``flags``: the worker's parsed flags; ``env``: its environment (``DYN_CONNECTOR`` sets ``--connector`` in 1.x).
    From :data:`CONNECTOR_REJECTED_SINCE` any ``--connector`` with names (or any ``DYN_CONNECTOR``) raises, a bare
    ``--connector`` (an empty list) does not; before it a ``--kv-transfer-config`` beside the connector list (default
    ``[nixl]``) raises, unless that list is empty (a bare ``--connector``) or ``none`` / ``null`` on a release from
    :data:`CONNECTOR_NONE_ALLOWED_SINCE` (:data:`CONNECTOR_NONE_REFUSED_UNTIL` and before refuse them too). Before
    :data:`CONNECTOR_FLAG_SINCE` (0.4.x) there is no ``--connector``: only giving one stops the worker."""
    connector = flags.get("--connector")
    if release < CONNECTOR_FLAG_SINCE:
        if connector is None:
            return None  # no --connector to conflict with: the --kv-transfer-config is accepted (and replaced)
        return (f"Dynamo {fmt(release)}'s worker defines no --connector (the flag arrived in 0.5.0): argparse stops it "
                "with 'unrecognized arguments: --connector' before the engine starts")
    if release >= CONNECTOR_REJECTED_SINCE:
        if connector is True:  # nargs="*" with no names: [] (``explicitly_set = bool(connector_list) or env``)
            connector = None
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
