"""Command-line flags vLLM added, by the first release that may have each: a floor for an engine of unknown version.

``vllm serve`` and every launcher that hands vLLM's parser its argv (``python -m vllm.entrypoints.openai.api_server``,
Dynamo's ``dynamo.vllm``) parse with ``FlexibleArgumentParser`` (``vllm/utils/argparse_utils.py``), an
``argparse.ArgumentParser``: a flag no parser defines ends in ``parser.error('unrecognized arguments: ...')`` before
the engine starts. An engine that runs with one of these flags therefore runs a release that defines it, and an
engine that would refuse it fails at startup whatever else is checked. Each flag is listed with the newest release
read without it and the release read with it (``vllm/engine/arg_utils.py`` of those sdists/wheels): the floor is
the release after the one read without it, as the releases between were not read. Short options (``-dph``) are listed
as written: vLLM added some after their long flag, so a release may have ``--data-parallel-hybrid-lb`` and still
refuse ``-dph`` (:func:`pdd_operator.vllm.flags.short_options`). ``-tp``, ``-pp``, ``-dp``, ``-dpl``, ``-dpa``,
``-dpp``, ``-q`` and ``-O`` are in every release read (0.9.0 to 0.34.0; ``-O`` as ``--compilation-config``'s alias
up to 0.11.1, then rewritten by ``FlexibleArgumentParser.parse_args`` in vllm/utils/argparse_utils.py), so they set no
floor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pdd_operator.vllm.added_flags_read import READ_ADDITIONS
from pdd_operator.vllm.versions import Version, fmt


@dataclass(frozen=True)
class AddedFlag:
    """One added flag.

    Attributes:
        absent_in: the newest release read whose parser does not define the flag.
        present_in: a release read whose parser defines it.
        source: the files read.
    """

    absent_in: Version
    present_in: Version
    source: str

    @property
    def floor(self) -> Version:
        """The oldest release that may define the flag: the minor release after :attr:`absent_in`, or
        :attr:`present_in` where both are patch releases of one minor line (``-dph``: 0.11.0 without, 0.11.1 with)."""
        if self.present_in[:2] == self.absent_in[:2]:
            return self.present_in
        return (self.absent_in[0], self.absent_in[1] + 1, 0)


#: Long flag name (dashes, as :func:`pdd_operator.vllm.flags.parse_flags` normalises it) -> when it appeared.
ADDED_FLAGS: dict[str, AddedFlag] = {
    "--kda-prefill-backend": AddedFlag(
        (0, 26, 0), (0, 27, 0),
        "vllm/engine/arg_utils.py: no kda_prefill_backend in the 0.24.0, 0.25.x and 0.26.0 sdists; "
        "EngineArgs.kda_prefill_backend and its --kda-prefill-backend argument in the 0.27.0, 0.27.1 sdists and the "
        "0.32.0 wheel (the KDA linear-attention layers of Kimi-K3)"),
    "--kernel-config": AddedFlag(
        (0, 14, 1), (0, 16, 0),
        "vllm/engine/arg_utils.py: no kernel_config in the 0.14.0 and 0.14.1 sdists; EngineArgs.kernel_config in the "
        "0.16.0 (l.540), 0.18.0 and 0.24.0 sdists"),
    "--data-parallel-multi-port-external-lb": AddedFlag(
        (0, 21, 0), (0, 22, 0),
        "vllm/engine/arg_utils.py: no data_parallel_multi_port_external_lb in the 0.18.0, 0.19.x, 0.20.x and 0.21.0 "
        "sdists; the flag and its -dpm short option in the 0.22.0 (l.1049), 0.24.0, 0.26.0, 0.30.0 sdists and the "
        "0.32.0 wheel"),
    **{short: AddedFlag(
        (0, 11, 0), (0, 11, 1),
        f"vllm/engine/arg_utils.py EngineArgs.add_cli_args: --data-parallel-hybrid-lb and --data-parallel-external-lb "
        f"without a short option in the 0.11.0 sdist (l.695); {short} in the 0.11.1, 0.12.0, 0.13.0, 0.14.0, 0.18.0, "
        f"0.24.0 and 0.34.0 sdists and the 0.32.0 wheel")
       for short in ("-dph", "-dpe")},
    **{short: AddedFlag(
        absent, present,
        f"vllm/engine/arg_utils.py EngineArgs.add_cli_args: -dp, -dpl, -dpa and -dpp but no {short} in the 0.9.0 sdist "
        f"(l.604-616){more}; {short} in the 0.10.0 (l.601-629), 0.10.1.1, 0.11.0 (l.662-688, written with single "
        f"quotes) and every later sdist read")
       for short, absent, present, more in (
           ("-dpn", (0, 9, 1), (0, 9, 2), " and the 0.9.1 sdist; -dpn in the 0.9.2 sdist (l.659)"),
           ("-dpr", (0, 9, 2), (0, 10, 0), ", the 0.9.1 and 0.9.2 sdists"),
           ("-dpb", (0, 9, 0), (0, 9, 1), "; -dpb in the 0.9.1 (l.645) and 0.9.2 (l.679) sdists"))},
    "-dpm": AddedFlag(
        (0, 21, 0), (0, 22, 0),
        "vllm/engine/arg_utils.py: no -dpm (nor --data-parallel-multi-port-external-lb) in the 0.18.0-0.21.0 sdists; "
        "present in the 0.22.0 (l.1049), 0.23.0 (l.1054) and 0.24.0 sdists and the 0.32.0 wheel"),
    **{flag: AddedFlag(
        (0, 10, 1), (0, 10, 2),
        "vllm/engine/arg_utils.py: no decode_context_parallel_size in the 0.10.0 wheel and the 0.10.1.1 sdist; "
        "('--decode-context-parallel-size', '-dcp') in the 0.10.2 (l.647), 0.11.0, 0.11.1, 0.12.0, 0.14.0, 0.18.0 and "
        "0.24.0 sdists and the 0.32.0 wheel")
       for flag in ("--decode-context-parallel-size", "-dcp")},
    **{flag: AddedFlag(
        (0, 11, 2), (0, 12, 0),
        "vllm/engine/arg_utils.py: no prefill_context_parallel_size in the 0.11.0, 0.11.1 and 0.11.2 sdists; "
        "('--prefill-context-parallel-size', '-pcp') in the 0.12.0, 0.13.0, 0.14.0, 0.18.0 and 0.24.0 sdists and the "
        "0.32.0 wheel")
       for flag in ("--prefill-context-parallel-size", "-pcp")},
    **{flag: AddedFlag(
        (0, 33, 0), (0, 34, 0),
        f"vllm/engine/arg_utils.py: EngineArgs has no {flag[2:].replace('-', '_')} in the 0.33.0 sdist; the field and "
        f"its {flag} argument in EngineArgs.add_cli_args of the 0.34.0 sdist (lines {lines})")
       for flag, lines in (("--enable-extensible-kv-cache", "615, 1413"), ("--max-num-inflight-kv-loads", "624, 1784"),
                           ("--cache-aware-admission-window", "719, 1830"),
                           ("--cache-aware-admission-threshold", "720, 1834"),
                           ("--checkpoint-prepare-on-startup", "812, 1075"),
                           ("--shuffle-safetensors-files", "844, 1118"))},
    "-cc": AddedFlag(
        (0, 11, 2), (0, 12, 0),
        "vllm/engine/arg_utils.py: ('--compilation-config', '-O') in the 0.11.0, 0.11.1 (l.1149) and 0.11.2 sdists; "
        "('--compilation-config', '-cc') in the 0.12.0 (l.1128), 0.13.0, 0.14.0 and 0.24.0 sdists"),
    "-ac": AddedFlag(
        (0, 12, 0), (0, 13, 0),
        "vllm/engine/arg_utils.py: no attention_config in the 0.12.0 sdist; ('--attention-config', '-ac') in the "
        "0.13.0 (l.1137), 0.14.0 (l.1171) and 0.34.0 sdists"),
    "-sc": AddedFlag(
        (0, 18, 1), (0, 19, 0),
        "vllm/engine/arg_utils.py: '--speculative-config' without '-sc' in the 0.18.0 (l.1267) and 0.18.1 sdists; "
        "('--speculative-config', '-sc') in the 0.19.0 (l.1304), 0.19.1, 0.20.x, 0.21.0 (l.1417), 0.22.0, 0.23.0, "
        "0.24.0 and 0.34.0 sdists"),
    "-dc": AddedFlag(
        (0, 23, 0), (0, 24, 0),
        "vllm/engine/arg_utils.py: no diffusion_config in the 0.23.0 sdist; ('--diffusion-config', '-dc') in the "
        "0.24.0 (l.1508) and 0.34.0 sdists"),
    **{short: AddedFlag(
        (0, 11, 0), (0, 11, 1),
        f"vllm/engine/arg_utils.py EngineArgs.add_cli_args: no nnodes/node_rank (nor -n/-r) in the 0.11.0 sdist; "
        f"('--nnodes', '-n') and ('--node-rank', '-r') in the 0.11.1, 0.12.0 (l.748-749), 0.14.0 (l.779-780) and "
        f"0.34.0 (l.1192-1193) sdists ({short})")
       for short in ("-n", "-r")},
    **{flag: AddedFlag(
        (0, 9, 0), (0, 9, 1),
        "no api_server_count (nor -asc) in any parser of the 0.9.0 sdist; vllm serve's own subcommand parser adds "
        "('--api-server-count', '-asc') in the 0.9.1 (vllm/entrypoints/cli/serve.py l.88-92) and 0.9.2 (l.85-86) "
        "sdists; make_arg_parser has it from the 0.10.0 (vllm/entrypoints/openai/cli_args.py l.225), 0.10.1.1 "
        "(l.247), 0.11.0 (l.252) and 0.14.0 (l.282) sdists, vllm/entrypoints/common/cli_args.py in 0.34.0 (l.462). "
        "The floor is vllm serve's: python -m vllm.entrypoints.openai.api_server on 0.9.1-0.9.2 still lacks it")
       for flag in ("--api-server-count", "-asc")},
    "-ep": AddedFlag(
        (0, 13, 0), (0, 14, 0),
        "vllm/engine/arg_utils.py: --enable-expert-parallel without -ep in the 0.11.0-0.13.0 sdists; "
        "('--enable-expert-parallel', '-ep') in the 0.14.0, 0.18.0 and 0.24.0 sdists and the 0.32.0 wheel"),
}


ADDED_FLAGS.update({
    flag: AddedFlag(without, with_, f"no parser of the {fmt(without)} sdist defines it; vllm/engine/arg_utils.py of the "
                                    f"{fmt(with_)} sdist and of every later one read does "
                                    "(pdd_operator/vllm/added_flags_read.py)")
    for flag, (without, with_) in READ_ADDITIONS.items() if flag not in ADDED_FLAGS})


def added_flags(flags: Mapping[str, object], shorts: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The :data:`ADDED_FLAGS` an engine gives, in the order of :data:`ADDED_FLAGS`: the short options written in its
    argv (``shorts``: short -> long, :func:`~pdd_operator.vllm.flags.short_options`) and its parsed long ``flags``
    (:func:`~pdd_operator.vllm.flags.parse_flags`) other than those a listed short option was read as; ``()`` when
    none."""
    shorts = shorts or {}
    return tuple(name for name in ADDED_FLAGS if name in shorts
                 or (name in flags and not any(shorts[s] == name for s in shorts if s in ADDED_FLAGS)))


def flags_floor(flags: Mapping[str, object]) -> tuple[Version, str] | None:
    """``(floor, flag)``: the highest :attr:`AddedFlag.floor` among the parsed ``flags`` (``--flag`` -> value) and
    the flag that sets it, or ``None`` when no listed flag is given."""
    found = [(ADDED_FLAGS[f].floor, f) for f in flags if f in ADDED_FLAGS]
    return max(found) if found else None
