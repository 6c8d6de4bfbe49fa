"""Expert parallelism and expert load balancing (EPLB) settings that vLLM refuses while it builds an engine's config.

Read in vllm/config/parallel.py ``ParallelConfig.__post_init__`` and vllm/config/model.py
``ModelConfig._verify_with_expert_parallelism`` of the 0.11.0, 0.11.1, 0.12.0, 0.13.0, 0.14.0, 0.16.0, 0.17.0, 0.17.1,
0.18.0, 0.19.1, 0.20.0, 0.22.0-0.25.0, 0.26.0, 0.27.0, 0.29.0, 0.31.0-0.34.0 sdists (the same checks in each; 0.10
and older were not read, so the rules start at 0.11.0):

- ``--enable-eplb`` without ``--enable-expert-parallel``: ``ValueError("enable_expert_parallel must be True to use
  EPLB.")``;
- ``--enable-eplb`` with TP x (PCP x) DP of 1: ``ValueError("EPLB requires tensor ... or data parallelism ...")``;
- redundant experts (``--eplb-config '{"num_redundant_experts": N}'``, its dotted form, or 0.11's deprecated
  ``--num-redundant-experts``) without ``--enable-eplb``: ``ValueError("num_redundant_experts is set to N but EPLB is
  not enabled. ...")``;
- ``--enable-expert-parallel`` on a model without experts (no positive ``moe_num_experts``, ``num_experts``,
  ``n_routed_experts`` or ``num_local_experts`` in its config.json): ``ValueError("Number of experts in the model must
  be greater than 0 when expert parallelism is enabled.")``;
- from 0.21.0 (vllm/engine/arg_utils.py ``EngineArgs.create_engine_config``; read in the 0.21.0-0.34.0 sdists, absent
  from 0.11.0-0.20.0): external data-parallel load balancing (``--data-parallel-rank``, ``--data-parallel-external-lb``)
  with ``--data-parallel-size`` > 1 on a model without experts: ``ValueError("Non-MoE models do not support external
  data parallel mode. ...")``;
- ``--all2all-backend`` with a value its release's parser does not list (:mod:`pdd_operator.vllm.all2all_backends`).

Each engine on its own: the refused one never starts. A flag value that is not in the files is not judged.
"""

from __future__ import annotations

import json

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.all2all_backends import FLAG_SINCE, accepted_backends
from pdd_operator.vllm.architectures import Architecture
from pdd_operator.vllm.expansion import unknown_names
from pdd_operator.vllm.versions import Version, fmt, rules_version

#: First vLLM release read whose ParallelConfig and ModelConfig refuse the settings above (module docstring).
EXPERT_CHECKS_SINCE: Version = (0, 11, 0)
#: First vLLM release whose EngineArgs refuses external data-parallel load balancing for a model without experts.
EXTERNAL_DP_DENSE_REFUSED_SINCE: Version = (0, 21, 0)


def _flag(r: RoleConfig, name: str) -> str | bool | None:
    return dict(r.moe_flags).get(name)


def _switch(r: RoleConfig, name: str) -> bool | None:
    """A boolean flag as vLLM reads it: True, False (absent or ``--no-``), ``None`` where its value is not known."""
    value = _flag(r, name)
    return value if isinstance(value, bool) else False if value is None else None


def redundant_experts(r: RoleConfig) -> int | None:
    """The ``num_redundant_experts`` engine ``r`` asks for: from ``--eplb-config.num_redundant_experts``, else
    ``--eplb-config`` (a JSON object), else ``--num-redundant-experts``; 0 when none is given, ``None`` where a
    value is not in the files or cannot be read (vLLM's pydantic field takes an int or an int-like string)."""
    raw: object = next((v for k in ("--eplb-config.num_redundant_experts", "--eplb-config.num-redundant-experts")
                        if (v := _flag(r, k)) is not None), None)
    if raw is None and isinstance(config := _flag(r, "--eplb-config"), str):
        if unknown_names(config):
            return None
        try:
            parsed = json.loads(config)
        except ValueError:
            return None
        raw = parsed.get("num_redundant_experts") if isinstance(parsed, dict) else None
    if raw is None:
        raw = _flag(r, "--num-redundant-experts")
    if raw is None:
        return 0
    if isinstance(raw, bool) or (isinstance(raw, str) and unknown_names(raw)):
        return None
    try:
        return int(str(raw))
    except ValueError:
        return None


def eplb_refusal(r: RoleConfig) -> str | None:
    """Why vLLM's ``ParallelConfig`` refuses engine ``r``'s expert load balancing settings, or ``None``."""
    eplb, ep = _switch(r, "--enable-eplb"), _switch(r, "--enable-expert-parallel")
    if eplb is True and ep is False:
        return ("--enable-eplb without --enable-expert-parallel: ParallelConfig raises \"enable_expert_parallel must be "
                "True to use EPLB.\"")
    if eplb is True and ep is True and r.tp is not None and r.dp is not None and r.tp * r.dp * (r.pcp or 1) <= 1:
        return ("--enable-eplb with TP 1 and DP 1: ParallelConfig raises \"EPLB requires tensor, prefill-context, or "
                "data parallelism\" (the expert-parallel group is a single GPU)")
    redundant = redundant_experts(r)
    if eplb is False and redundant:
        return (f"{redundant} redundant experts without --enable-eplb: ParallelConfig raises \"num_redundant_experts is "
                f"set to {redundant} but EPLB is not enabled.\"")
    return None


@rule(
    id="eplb-config-invalid", family="expert-parallel", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"), since=EXPERT_CHECKS_SINCE,
    source=("vllm/config/parallel.py ParallelConfig.__post_init__ (0.11.0-0.34.0): EPLB needs "
            "enable_expert_parallel and TP x DP > 1; num_redundant_experts > 0 needs enable_eplb (ValueError)"),
    example="--enable-eplb on a decode without --enable-expert-parallel (vLLM 0.11.0)",
)
def check_eplb(pair: PDPair) -> list[Violation]:
    """Expert load balancing is set up as vLLM accepts it: ``--enable-eplb`` with ``--enable-expert-parallel`` and
    more than one GPU in the expert group, and redundant experts only with ``--enable-eplb``."""
    out: list[Violation] = []
    for r in pair.roles:
        why = eplb_refusal(r)
        if why is None:
            continue
        version = fmt(r.version) if r.version else "this release"
        out.append((
            f"{r.role}: {why}; vLLM {version} stops while building the engine's config, so this engine never starts.",
            f"On the {r.role} engine, pass --enable-expert-parallel with --enable-eplb (and TP or DP above 1), or drop "
            "--enable-eplb and num_redundant_experts together.",
        ))
    return out


def dense_model(pair: PDPair) -> bool:
    """The pair's model is known to have no experts: its config.json (given or a well-known checkpoint's) names no
    expert count and its family is a dense one."""
    return pair.model.num_experts == 0 and pair.model.architecture == Architecture.DENSE


@rule(
    id="expert-parallel-dense-model", family="expert-parallel", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.model.configMapRef"), since=EXPERT_CHECKS_SINCE,
    source=("vllm/config/model.py ModelConfig._verify_with_expert_parallelism (0.11.0-0.34.0): 'Number of experts in "
            "the model must be greater than 0 when expert parallelism is enabled.' (ValueError)"),
    example="--enable-expert-parallel on a meta-llama/Llama-3.1-8B-Instruct decode (vLLM 0.11.0)",
)
def check_expert_parallel_model(pair: PDPair) -> list[Violation]:
    """``--enable-expert-parallel`` only on a model with experts. Judged where the model's config.json is known
    (given, or a well-known checkpoint's) and its family is a dense one (:func:`dense_model`); a config that names no
    expert count is a model without experts, as vLLM reads it."""
    if not dense_model(pair):
        return []
    out: list[Violation] = []
    for r in pair.roles:
        if _switch(r, "--enable-expert-parallel") is not True:
            continue
        version = fmt(r.version) if r.version else "this release"
        out.append((
            f"{r.role}: --enable-expert-parallel on {r.model or 'the model'}, whose config.json names no experts (a dense "
            f"model): vLLM {version} raises \"Number of experts in the model must be greater than 0 when expert "
            "parallelism is enabled.\" while building the engine's config, so this engine never starts.",
            f"Remove --enable-expert-parallel from the {r.role} engine (expert parallelism applies to MoE models only).",
        ))
    return out


@rule(
    id="external-dp-dense-model", family="expert-parallel", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.model.configMapRef"),
    since=EXTERNAL_DP_DENSE_REFUSED_SINCE,
    source=("vllm/engine/arg_utils.py EngineArgs.create_engine_config (0.21.0-0.34.0): 'Non-MoE models do not support "
            "external data parallel mode.' (ValueError) for --data-parallel-rank or --data-parallel-external-lb with "
            "--data-parallel-size > 1; absent from 0.11.0-0.20.0"),
    example="--data-parallel-size 4 --data-parallel-rank 0 on a meta-llama/Llama-3.1-8B-Instruct prefill (vLLM 0.24.0)",
)
def check_external_dp_model(pair: PDPair) -> list[Violation]:
    """External data-parallel load balancing (one rank per process, ``--data-parallel-rank`` or
    ``--data-parallel-external-lb``) only for a model with experts; a dense model scales by independent engines."""
    if not dense_model(pair):
        return []
    out: list[Violation] = []
    for r in pair.roles:
        external = _flag(r, "--data-parallel-rank") is not None or _switch(r, "--data-parallel-external-lb") is True
        if not external or r.dp is None or r.dp <= 1:
            continue
        version = fmt(r.version) if r.version else "this release"
        out.append((
            f"{r.role}: external data-parallel load balancing (DP {r.dp}, one rank per process) on "
            f"{r.model or 'the model'}, whose config.json names no experts: vLLM {version} raises \"Non-MoE models do "
            "not support external data parallel mode.\" while building the engine's config, so this engine never "
            "starts.",
            f"Run each {r.role} engine on its own without --data-parallel-* arguments (scale with replicas), or keep "
            "internal data parallelism (--data-parallel-size without a rank).",
        ))
    return out


@rule(
    id="all2all-backend-unknown", family="expert-parallel", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"), since=FLAG_SINCE,
    source=("vllm/config/parallel.py All2AllBackend Literal -> argparse choices (vllm/engine/arg_utils.py "
            "literal_to_kwargs), read per release 0.11.1-0.34.0 (pdd_operator.vllm.all2all_backends)"),
    example="--all2all-backend flashinfer_nvlink_two_sided on a vLLM 0.17.1 decode (added in 0.18.0)",
)
def check_all2all_backend(pair: PDPair) -> list[Violation]:
    """``--all2all-backend`` names a backend the engine's release accepts: its parser refuses any other value
    ("invalid choice") and the server never starts. Backends come and go (``mori`` 0.16-0.22 and again 0.34,
    ``mori_high_throughput``/``mori_low_latency`` from 0.23, ``deepep_v2`` from 0.24, ``moonep`` from 0.31). Judged
    only for an engine whose release the files name: for one of unknown release the backend says which releases it
    may run, not that it fails."""
    out: list[Violation] = []
    for r in pair.roles:
        value = _flag(r, "--all2all-backend")
        if r.version_text is None or rules_version(r.version_text) != r.version:
            continue  # a release assumed for an engine of unknown version: a backend bounds it, never refuses it
        accepted = accepted_backends(r.version)
        if not isinstance(value, str) or unknown_names(value) or accepted is None or value in accepted:
            continue
        out.append((
            f"{r.role}: --all2all-backend {value} is not a backend vLLM {fmt(r.version)} accepts (its parser's "
            f"choices: {', '.join(sorted(accepted))}), so the server exits at argument parsing ('invalid choice').",
            f"Name one of those backends on the {r.role} engine, or run a vLLM release that has {value}.",
        ))
    return out
