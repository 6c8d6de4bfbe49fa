"""How many data-parallel ranks of an engine run in its own pod, and whether its ranks span nodes.

Read in vLLM 0.32.0 ``vllm/engine/arg_utils.py`` ``EngineArgs.create_engine_config`` (the data-parallel branch),
``vllm/entrypoints/cli/serve.py`` (``--headless``) and ``vllm/v1/engine/utils.py`` ``launch_core_engines``; the
flags are those of 0.9 on (``--nnodes`` is newer). The pod starts ``data_parallel_size_local`` engine cores, each of
TP x PP ranks on its own GPUs, whatever else runs on other nodes:

- ``--data-parallel-rank`` or ``--data-parallel-external-lb``: external load balancing, one rank per process
  (``data_parallel_size_local`` is forced to 1; another value raises);
- ``--data-parallel-size-local`` (``-dpl``): that many, with or without ``--headless`` or a start rank;
- none of them: the whole ``--data-parallel-size`` runs here (the mp backend), unless ``--data-parallel-backend
  ray`` lets Ray place the engines (not known from the manifest).

``--nnodes`` > 1 splits the whole world (TP x PP x DP) over the nodes, TP or PP possibly across them: the pod's
share is ``world // nnodes`` ranks, not a count of engine cores, and is not judged here.

``--data-parallel-address`` only names the head node for the ranks' ZMQ sockets and torch group: it says nothing
about how many ranks run in this pod, nor that any runs elsewhere (the head's own pod sets it too).
"""

from __future__ import annotations

from collections.abc import Mapping

from pdd_operator.vllm.args import int_flag
from pdd_operator.vllm.expansion import unknown_names


def _unknown(flags: Mapping[str, str | bool], name: str) -> bool:
    """``name``'s value is not in the manifest (``<unknown:NAME>``, a boolean flag too: it reads as neither)."""
    return isinstance(flags.get(name), str) and bool(unknown_names(str(flags[name])))


def local_data_parallel(flags: Mapping[str, str | bool]) -> int | None:
    """The data-parallel ranks (engine cores) a ``vllm serve`` with ``flags`` (:func:`~pdd_operator.vllm.args.
    parse_flags`) starts in its own pod, or ``None`` when the manifest does not tell (a value that is not a literal
    integer, ``--nnodes`` > 1 without ``--data-parallel-size-local``, the Ray data-parallel backend, an external-LB
    or DP-backend flag whose value is not in the manifest)."""
    nnodes = int_flag(dict(flags), "--nnodes", 1)
    if nnodes is None or nnodes > 1:
        return None  # the world (TP x PP x DP) is split over the nodes, TP or PP possibly across them
    if any(_unknown(flags, name) for name in ("--data-parallel-external-lb", "--data-parallel-backend")):
        return None  # external LB (1 here) or Ray (placed elsewhere) may be on: neither the default nor "on"
    if "--data-parallel-rank" in flags or flags.get("--data-parallel-external-lb") not in (None, False, "false"):
        return 1
    if "--data-parallel-size-local" in flags:
        return int_flag(dict(flags), "--data-parallel-size-local", None)
    if str(flags.get("--data-parallel-backend", "mp")) == "ray":
        return None
    return int_flag(dict(flags), "--data-parallel-size", 1)


def spans_nodes(flags: Mapping[str, str | bool]) -> bool:
    """True when the engine's ranks run on more nodes than this pod's: ``--nnodes`` > 1, ``--headless`` (a
    secondary node of a head elsewhere), ``--data-parallel-start-rank`` > 0, an external-LB rank of a larger
    data-parallel group, or fewer local ranks than ``--data-parallel-size``. Not for ``--data-parallel-address``
    alone (the head pod names its own address)."""
    f = dict(flags)
    dp = int_flag(f, "--data-parallel-size", 1)
    local = local_data_parallel(flags)
    start = int_flag(f, "--data-parallel-start-rank", 0)
    return ((int_flag(f, "--nnodes", 1) or 1) > 1 or flags.get("--headless") is True or _unknown(flags, "--headless")
            or start is None or start > 0 or dp is None
            or (local is not None and local < dp))


def first_local_rank(flags: Mapping[str, str | bool]) -> int | None:
    """The global data-parallel rank of the first engine core a ``vllm serve`` with ``flags`` starts in its own pod:
    ``--data-parallel-rank`` (an external-LB rank), else ``--data-parallel-start-rank``, else 0 (the head starts
    ranks 0 to ``data_parallel_size_local - 1``: entrypoints/cli/serve.py ``run_headless`` ``start_index``, 0.9.1
    on); ``None`` when the value is not a literal integer."""
    f = dict(flags)
    if "--data-parallel-rank" in f:
        return int_flag(f, "--data-parallel-rank", None)
    return int_flag(f, "--data-parallel-start-rank", 0)


#: ``vllm serve``'s data-parallel load-balancing modes (vllm/entrypoints/cli/serve.py ``ServeSubcommand.cmd``):
#: the flags that select each.
LB_MODE_FLAGS = {
    "external": ("--data-parallel-external-lb", "--data-parallel-rank"),
    "hybrid": ("--data-parallel-hybrid-lb", "--data-parallel-start-rank"),
    "multi-port": ("--data-parallel-multi-port-external-lb",),
}


def lb_modes(flags: Mapping[str, str | bool]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The load-balancing flags a ``vllm serve`` command line gives: ``(switches, ranks)``, the boolean mode flags set
    (``--data-parallel-external-lb``, ``--data-parallel-hybrid-lb``, ``--data-parallel-multi-port-external-lb``) and
    the rank flags present (``--data-parallel-rank``, ``--data-parallel-start-rank``, whatever their value: serve.py
    tests ``is not None``); ``None`` when a mode flag's value is not in the manifest (``<unknown:...>``)."""
    switches, ranks = [], []
    for name in ("--data-parallel-external-lb", "--data-parallel-hybrid-lb", "--data-parallel-multi-port-external-lb"):
        value = flags.get(name)
        if _unknown(flags, name):
            return None
        if value is True or str(value).lower() == "true":
            switches.append(name)
    ranks = [name for name in ("--data-parallel-rank", "--data-parallel-start-rank") if name in flags]
    return tuple(switches), tuple(ranks)


def lb_mode_conflict(switches: tuple[str, ...], ranks: tuple[str, ...], version: tuple[int, ...]) -> tuple[str, ...]:
    """The load-balancing modes (:data:`LB_MODE_FLAGS` keys) that ``vllm serve`` of ``version`` counts as selected
    together, refusing the command line before any engine starts; ``()`` when it accepts it.

    - 0.16.0-0.21.0 (vllm/entrypoints/cli/serve.py, 0.16.0 l.63-80, 0.21.0 l.70-83): external (``--data-parallel-external-lb``
      or ``--data-parallel-rank``) with hybrid (``--data-parallel-hybrid-lb`` or ``--data-parallel-start-rank``):
      ValueError "Cannot use both external and hybrid data parallel load balancing modes";
    - 0.22.0-0.34.0 (serve.py 0.22.0 l.71-98, 0.26.0 l.75-97, 0.34.0 l.101): also ``--data-parallel-multi-port-external-lb``;
      a start rank selects hybrid only when neither the hybrid nor the multi-port flag is given; more than one mode:
      ValueError "Cannot use more than one data parallel load balancing mode";
    - up to 0.14.x serve.py has no such check (EngineArgs.create_engine_config lets a rank override hybrid LB,
      vllm/engine/arg_utils.py 0.11.0 l.1232-1240): ``()``.

    ``version`` is a release from 0.16.0 on or up to 0.14.x; 0.15.x was not read (callers judge it apart)."""
    external = "--data-parallel-external-lb" in switches or "--data-parallel-rank" in ranks
    if version < (0, 16, 0):
        return ()
    if version < (0, 22, 0):
        hybrid = "--data-parallel-hybrid-lb" in switches or "--data-parallel-start-rank" in ranks
        return ("external", "hybrid") if external and hybrid else ()
    multi = "--data-parallel-multi-port-external-lb" in switches
    if "--data-parallel-hybrid-lb" in switches or multi:
        hybrid = "--data-parallel-hybrid-lb" in switches
    else:
        hybrid = "--data-parallel-start-rank" in ranks
    modes = tuple(m for m, on in (("multi-port", multi), ("external", external), ("hybrid", hybrid)) if on)
    return modes if len(modes) > 1 else ()
