"""Engine arguments: the argv can be read, and a PDDeployment's extraArgs do not override what the operator renders."""

from __future__ import annotations

import json
from collections.abc import Callable

from pdd_operator.api.status import Finding
from pdd_operator.compat.data_parallel import LB_MODE_FLAGS, lb_mode_conflict
from pdd_operator.compat.dynamo_engine_defaults import dynamo_release
from pdd_operator.compat.dynamo_worker_flags import flag_refusals
from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import NOT_CHECKED, Violation, fix_for, rule
from pdd_operator.vllm.added_flags import ADDED_FLAGS
from pdd_operator.vllm.attention_backends import (
    BACKEND_ENV,
    EXPLICIT_BACKEND_VALIDATED_SINCE,
    backend_env_read,
    backend_name_refusal,
    backend_name_table,
    backend_refusal,
)
from pdd_operator.vllm.block_size import gpu_platform
from pdd_operator.vllm.config_fields import ATTENTION_CONFIG, PASS_CONFIG, refusals
from pdd_operator.vllm.entrypoint import SERVE
from pdd_operator.vllm.expansion import unknown_names
from pdd_operator.vllm.flag_choices import CHOICE_TABLES, ChoiceRefusal, ChoiceTable
from pdd_operator.vllm.flag_choices import refusal as choice_refusal
from pdd_operator.vllm.flags import option_spelling
from pdd_operator.vllm.foreign_flags import FOREIGN_FLAGS
from pdd_operator.vllm.parser_names import PARSER_FLAGS, parser_refusal, parser_table
from pdd_operator.vllm.removed_flags import REMOVED_FLAGS
from pdd_operator.vllm.scheduler_budget import SEQS_REFUSED_SINCE
from pdd_operator.vllm.speculative_methods import method_refusal, method_table
from pdd_operator.vllm.versions import Version, dev_build_floor, fmt

#: Flags the operator renders from the spec -> the field that sets them (a ``{role}`` in it is the role whose
#: extraArgs carry the flag: the fix names the field to change, ``spec.decode.tensorParallelSize``).
_MANAGED_FLAGS = {
    "--tensor-parallel-size": "spec.{role}.tensorParallelSize", "-tp": "spec.{role}.tensorParallelSize",
    "--pipeline-parallel-size": "spec.{role}.pipelineParallelSize", "-pp": "spec.{role}.pipelineParallelSize",
    "--block-size": "spec.{role}.blockSize", "--gpu-memory-utilization": "spec.{role}.gpuMemoryUtilization",
    "--kv-transfer-config": "spec.kvTransfer", "--kv-cache-dtype": "spec.kvCache.dtype",
    "--dtype": "spec.model.dtype", "--model": "spec.model.name", "--max-model-len": "spec.model.maxModelLen",
    "--revision": "spec.model.revision", "--served-model-name": "spec.model.servedModelName",
    "--trust-remote-code": "spec.model.trustRemoteCode", "--speculative-config": "spec.speculative",
    "--port": "spec.port",
}
#: Managed flags that only set the engine's own configuration, which the rules judge from the rendered argv (the
#: last value wins in argparse, and the pair is read back from the rendered pods: ``from_pddeployment``) -> what of
#: :class:`RoleConfig` must then be equal between the roles, or ``None`` where the roles may differ (block sizes are
#: judged by the block-size rules, memory and context per engine). The operator uses none of them outside the engine,
#: so an override is a warning unless it leaves prefill and decode with different values of a must-match setting
#: (a NIXL compatibility hash factor: nixl/metadata.py compute_nixl_compatibility_hash, cache_dtype and dtype in
#: 0.20.2 lines 71-128, 0.28.0 lines 126-180; the EAGLE method and draft model from 0.28.0 lines 83-123). The other
#: managed flags (TP/PP: the pod's GPU request; --port: probes, Service, router; --kv-transfer-config: the
#: connector's identity and ports; --model, --served-model-name: what the router asks for) are wired into objects
#: the operator renders from the spec, and stay errors.
_ENGINE_ONLY_FLAGS: dict[str, Callable[[RoleConfig], object] | None] = {
    "--kv-cache-dtype": lambda r: r.kv_cache_dtype or "auto",
    "--dtype": lambda r: r.dtype or "auto",
    "--revision": lambda r: r.revision,
    "--speculative-config": lambda r: (r.speculative or {}).get("method") and (
        (r.speculative or {}).get("method"), (r.speculative or {}).get("model")),
    "--block-size": None, "--gpu-memory-utilization": None, "--max-model-len": None, "--trust-remote-code": None,
}
#: HMA flags: allowed in extraArgs when both roles give the same one (vLLM hashes is_hma_enabled from 0.18,
#: and the compat hash reads these flags from extraArgs, so a rollout never pairs old and new values);
#: a hybrid SSM model with HMA disabled is refused by ``hybrid-hma-disabled`` on the rendered argv.
_HMA_FLAGS = ("--disable-hybrid-kv-cache-manager", "--no-disable-hybrid-kv-cache-manager")
#: Speculative methods without a draft model: they add no KV cache group, so vLLM leaves them out of the
#: NIXL compatibility factors (nixl/metadata.py _get_speculative_compatibility_factors, 0.28+; vllm#49230)
#: and they may differ between roles, or be set on decode only.
DRAFT_FREE_METHODS = ("ngram", "ngram_gpu", "suffix")


def _speculative_method(args: tuple[str, ...]) -> str | None:
    for i, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith("--speculative-config=") else (
            args[i + 1] if arg == "--speculative-config" and i + 1 < len(args) else None)
        if value is not None:
            try:
                return str((json.loads(value) or {}).get("method"))
            except (ValueError, AttributeError):
                return None
    return None


def _hma_flag(args: tuple[str, ...]) -> str | None:
    flags = [a for a in args if a in _HMA_FLAGS]
    return flags[-1] if flags else None


def _config_field_violations(pair: PDPair, role: RoleConfig) -> list[Violation]:
    """The findings for ``role``'s ``--attention-config`` keys and ``--compilation-config`` ``pass_config`` keys that
    its release refuses (:func:`~pdd_operator.vllm.config_fields.refusals`): an error where the releases read settle
    it, a warning where the version is unknown or lies between releases read that disagree; ``[]`` when none."""
    out: list[Violation] = []
    where = f"vLLM {fmt(role.version)}" if role.version else "this engine's vLLM (version unknown)"
    for flag, table, keys in (("--attention-config", ATTENTION_CONFIG, role.attention_config_keys),
                              ("--compilation-config pass_config", PASS_CONFIG, role.pass_config_keys)):
        for refusal in refusals(table, dict.fromkeys(keys), role.version):
            message = (f"{role.role}: {flag} sets {refusal.key}, which {where} does not define ({refusal.why}). "
                       f"{table.name} forbids unknown fields from {fmt(table.forbids_extra_since)} (pydantic "
                       "extra='forbid'), so reading the engine arguments raises a ValidationError ('Unexpected "
                       f"keyword argument') and the {role.role} server never starts.")
            fix = fix_for(pair, f"Remove {refusal.key} from {flag} in spec.{role.role}.extraArgs, or use a vLLM "
                                "release that has it.",
                          f"Remove {refusal.key} from the {role.role} container's {flag}, or use a vLLM image whose "
                          "release has it.")
            if refusal.certain:
                out.append((message, fix))
            else:
                out.append((message + " Whether this release has it was not read, so this is a warning.", fix,
                            "warning"))
    return out


def _choice_violations(pair: PDPair, role: RoleConfig) -> list[Violation]:
    """The findings for ``role``'s flag values that its release's parser does not list among the flag's ``choices``
    (:func:`~pdd_operator.vllm.flag_choices.refusal`): an error where the releases read settle it, a warning where the
    release lies between releases read that disagree, "not checked" (:data:`NOT_CHECKED`) where the version is
    unknown and some releases accept the value while others refuse it; ``[]`` when none."""
    out: list[Violation] = []
    for flag, value in role.choice_values:
        table = CHOICE_TABLES[flag]
        found = choice_refusal(table, value, role.version, dev_build_floor(role.version_text) if role.version is None
                        else None)
        if found is None:
            continue
        fix = fix_for(pair, f"Give {flag} a value vLLM {fmt(role.version) if role.version else 'of this image'} "
                            f"lists, in spec.{role.role}.extraArgs, or drop it.",
                      f"Give the {role.role} container's {flag} a value its vLLM release lists, or drop the flag "
                      "(vLLM's default applies).")
        stops = (f"its parser refuses it ('argument {flag}: invalid choice: {value!r}', exit 2) and the {role.role} "
                 "server never starts")
        if found.verdict == "not-checked":
            out.append((f"{role.role}: {flag} {value}: {found.why}, and this engine's vLLM version is unknown; on a "
                        f"release that does not list it {stops}.", fix, NOT_CHECKED))
        elif role.version is None:
            out.append((f"{role.role}: {flag} {value}: {found.why}; on any release {stops}.", fix))
        elif found.verdict == "error":
            out.append((f"{role.role}: vLLM {fmt(role.version)}'s {table.literal} does not list {value} ({found.why}):"
                        f" {stops}.", fix))
        else:
            out.append((f"{role.role}: {flag} {value} ({found.why}); vLLM {fmt(role.version)} was not read, and the "
                        f"releases read around it disagree: where it does not list the value {stops}.", fix,
                        "warning"))
    return out


def _unread_release_refusal(role: RoleConfig, table: ChoiceTable, value: str) -> str | None:
    """For an engine whose vLLM version is unknown: which releases read list ``value`` in ``table``, in words, where
    some release read that it may run (from its development build's line on, :func:`~pdd_operator.vllm.versions.
    dev_build_floor`) lacks it; ``None`` where every one of them lists it."""
    found = choice_refusal(table, value, None, dev_build_floor(role.version_text))
    return found.why if found is not None else None


def _listed_value_violations(pair: PDPair, role: RoleConfig, value: str, *, label: str, table: ChoiceTable,
                              refusal: Callable[[Version], ChoiceRefusal | None], lacks: str, may_not: str,
                              stops: str, without: str, unknown_stops: str, fixes: tuple[str, str],
                              judge_fix: str = "") -> list[Violation]:
    """The finding for one value vLLM checks against a list its release defines (parser names, speculative methods,
    attention backend names: ``table`` lists ``value`` per release read, ``refusal`` judges a known version).

    A known version: ``refusal(version)``'s error ("vLLM X {lacks} (...): {stops}.") or warning ("{label} (...); vLLM X
    {may_not}: where it does not, {stops}."), with ``fixes`` (Kubernetes, Docker; :func:`fix_for`). An unknown one: a
    warning where some release read it may run lacks the value (:func:`_unread_release_refusal`), saying that on a
    release {without} {unknown_stops}. ``[]`` when nothing is found."""
    if role.version is None:
        why = _unread_release_refusal(role, table, value)
        return [(f"{role.role}: {label}: {why}, and this engine's vLLM version is unknown; on a release {without} "
                 f"{unknown_stops}.", f"Give the {role.role} engine's vLLM release (its image tag) to have it "
                 f"judged{judge_fix}.", "warning")] if why else []
    found = refusal(role.version)
    if found is None:
        return []
    fix = fix_for(pair, *fixes)
    if found.verdict == "error":
        return [(f"{role.role}: vLLM {fmt(role.version)} {lacks} ({found.why}): {stops}.", fix)]
    return [(f"{role.role}: {label} ({found.why}); vLLM {fmt(role.version)} {may_not}: where it does not, {stops}.",
             fix, "warning")]


def _parser_violations(pair: PDPair, role: RoleConfig) -> list[Violation]:
    """The findings for ``role``'s tool-call and reasoning parser names that its release's OpenAI server does not
    register (:func:`~pdd_operator.vllm.parser_names.parser_refusal`; :attr:`RoleConfig.parser_names` holds only the
    names the server checks): an error where the releases read settle it, a warning where the release was not read
    and those around it disagree or it is newer than the newest read, or where the version is unknown and some
    release read (from its development build's line on) lacks the name (:func:`_unread_release_refusal`); ``[]`` for
    a release before the oldest read (0.18.0)."""
    out: list[Violation] = []
    for flag, name in role.parser_names:
        kind = "tool call" if flag == "--tool-call-parser" else "reasoning"
        raises = f"vllm serve's validate_api_server_args raises KeyError('invalid {kind} parser: {name}') before it serves"
        out += _listed_value_violations(
            pair, role, name, label=f"{flag} {name}", table=parser_table(flag),
            refusal=lambda version, flag=flag, name=name: parser_refusal(flag, name, version),
            lacks=f"registers no {kind} parser named {name!r}", may_not="was not read and may not register it",
            stops=f"{raises} and the {role.role} server never starts", without="that does not register it",
            unknown_stops=raises, judge_fix=", or use a parser name every release you may run registers",
            fixes=(f"Give {flag} a name vLLM {fmt(role.version)} registers in spec.{role.role}.extraArgs, or "
                   f"use a vLLM release that has {name}.",
                   f"Give the {role.role} container's {flag} a name its vLLM release registers, use an image of a "
                   f"release that has {name!r}, or load the parser with {PARSER_FLAGS[flag][1]}."))
    return out


def _speculative_method_violations(pair: PDPair, role: RoleConfig) -> list[Violation]:
    """The finding for ``role``'s ``--speculative-config`` ``method`` that its release's ``SpeculativeConfig`` does
    not accept (:func:`~pdd_operator.vllm.speculative_methods.method_refusal`): an error where the releases read settle
    it, a warning where they do not (a release not read between two that disagree, a name a 0.34.0+ plugin may
    register), or where the version is unknown and some release read lacks it; ``[]`` for no method or a release before
    0.18.0."""
    method = role.speculative.get("method") if isinstance(role.speculative, dict) else None
    if not isinstance(method, str):
        return []
    return _listed_value_violations(
        pair, role, method, label=f"--speculative-config method {method!r}", table=method_table(),
        refusal=lambda version: method_refusal(method, version),
        lacks=f"has no speculative method {method!r}", may_not="may not accept it",
        stops="SpeculativeConfig refuses it (pydantic validation / 'Unknown speculative method') while the engine "
              f"config is built, and the {role.role} engine never starts",
        without="without it", unknown_stops="SpeculativeConfig refuses it while the engine config is built",
        fixes=(f"Use a speculative method vLLM {fmt(role.version)} has in spec.speculative, or a release that "
               f"has {method!r}.",
               f"Give the {role.role} container's --speculative-config a method its vLLM release has, or use an "
               f"image of a release that has {method!r}."))


def _backend_name_violations(pair: PDPair, role: RoleConfig) -> list[Violation]:
    """The finding for ``role``'s attention backend (``--attention-backend`` or ``--attention-config``'s ``backend``)
    that its release's ``AttentionBackendEnum`` lacks (:func:`~pdd_operator.vllm.attention_backends.
    backend_name_refusal`): an error where the releases read settle it, a warning where they do not or where the
    version is unknown and some release read lacks it; ``[]`` for none, a templated value or a release before
    0.18.0."""
    name = role.attention_backend
    if not name or unknown_names(name) or name.lower() == "auto":
        return []
    return _listed_value_violations(
        pair, role, name.upper(), label=f"attention backend {name!r}", table=backend_name_table(),
        refusal=lambda version: backend_name_refusal(name, version),
        lacks=f"has no attention backend {name!r}", may_not="was not read and may not have it",
        stops=f"AttentionBackendEnum[{name.upper()!r}] raises ValueError('Unknown attention backend') while the engine "
              f"config is built, and the {role.role} engine never starts",
        without="without it",
        unknown_stops="AttentionBackendEnum raises ValueError('Unknown attention backend') while the engine config is "
                      "built",
        fixes=(f"Name an attention backend vLLM {fmt(role.version)} has, or drop it (vLLM picks one).",
               f"Give the {role.role} container's --attention-backend a backend its vLLM release has, or drop it "
               "(vLLM picks one)."))


def _dp_lb_violations(pair: PDPair, role: RoleConfig) -> list[Violation]:
    """The finding for a ``vllm serve`` command line that selects more than one data-parallel load-balancing mode
    (:func:`~pdd_operator.compat.data_parallel.lb_mode_conflict`): an error on a release read that refuses it, a
    warning on 0.15.x (not read, between 0.14.x without the check and 0.16.0 with it) or on an unknown version
    unless ``--data-parallel-multi-port-external-lb`` is among them (every release that has that flag refuses);
    ``[]`` otherwise."""
    if not role.dp_lb or not any(role.dp_lb):
        return []
    switches, ranks = role.dp_lb
    newest = lb_mode_conflict(switches, ranks, (0, 34, 0))
    if role.version is not None and not (0, 15, 0) <= role.version < (0, 16, 0):
        modes, certain = lb_mode_conflict(switches, ranks, role.version), True
    else:
        modes = newest or lb_mode_conflict(switches, ranks, (0, 16, 0))
        certain = role.version is None and "multi-port" in newest
    if not modes:
        return []
    given = ", ".join(f for m in modes for f in LB_MODE_FLAGS[m] if (f in switches or f in ranks) and not (
        f == "--data-parallel-start-rank" and "--data-parallel-hybrid-lb" in switches))
    where = f"vLLM {fmt(role.version)}'s" if role.version is not None else "vllm serve's"
    raised = ("more than one data parallel load balancing mode" if role.version is None or role.version >= (0, 22, 0)
              else "both external and hybrid data parallel load balancing modes")
    message = (f"{role.role}: {given} select {' and '.join(modes)} data-parallel load balancing together; {where} "
               f"serve command (vllm/entrypoints/cli/serve.py) raises 'Cannot use {raised}' and the {role.role} "
               "server never starts.")
    fix = fix_for(pair, f"Keep one load-balancing mode in spec.{role.role}.extraArgs.",
                  f"Keep one data-parallel load-balancing mode on the {role.role} container's command line (drop "
                  "--data-parallel-hybrid-lb where --data-parallel-multi-port-external-lb or --data-parallel-rank "
                  "is given).")
    if certain:
        return [(message, fix)]
    why = ("this engine's vLLM version is unknown: releases up to 0.14.x accept it" if role.version is None
           else f"vLLM {fmt(role.version)} was not read (0.14.x accepts it, 0.16.0 refuses it)")
    return [(message + f" Whether it does here was not settled ({why}), so this is a warning.", fix, "warning")]


def _worker_flag_violations(pair: PDPair, kind: str) -> list[Violation]:
    """The findings for the role and connector flags of Dynamo's vLLM worker that its Dynamo release does not define
    (``kind``: ``removed`` or ``not-yet``, :func:`~pdd_operator.compat.dynamo_worker_flags.flag_refusals`); only for a
    ``dynamo.vllm`` worker on a Dynamo runtime image that names its release, ``[]`` otherwise."""
    out: list[Violation] = []
    for r in pair.roles:
        release = dynamo_release(r.image) if r.launcher == "dynamo.vllm" else None
        if release is None:
            continue
        for refusal in flag_refusals(dict(r.launcher_flags), release):
            if refusal.kind != kind:
                continue
            if kind in ("value", "conflict"):
                how = ("stops with argparse's 'invalid choice' (exit 2)" if kind == "value" else
                       f"raises {refusal.why}")
                out.append((f"{r.role}: Dynamo {fmt(release)}'s vLLM worker (python -m dynamo.vllm, {r.image}) "
                            f"refuses {refusal.flag}" + (f" ({refusal.why})" if kind == "value" else "")
                            + f": it {how} and the {r.role} engine never starts.",
                            f"Pass {refusal.instead} in the {r.role} worker's args instead of {refusal.flag}."))
                continue
            out.append((f"{r.role}: Dynamo {fmt(release)}'s vLLM worker (python -m dynamo.vllm, {r.image}) has no "
                        f"{refusal.flag} flag ({refusal.why}); neither its parser nor vLLM's defines it, so the worker "
                        f"stops with 'unrecognized arguments: {refusal.flag}' (exit 2) and the {r.role} engine never "
                        "starts.",
                        f"Pass {refusal.instead} instead of {refusal.flag} in the {r.role} worker's args, or run a "
                        f"Dynamo vllm-runtime image whose release has {refusal.flag}."))
    return out


@rule(
    id="engine-args-invalid", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vLLM argument parser; --attention-config keys against the release's AttentionConfig (fields read in "
            "every release 0.13.0-0.34.0 but 0.15.x, patch releases included; extra fields forbidden from 0.16.0) and "
            "--compilation-config pass_config keys against its PassConfig (0.10.1.1-0.34.0 likewise, forbidden from "
            "0.13.0): pdd_operator/vllm/config_fields.py; values of "
            "Literal-typed flags against the release's argparse choices (vllm/engine/arg_utils.py literal_to_kwargs; "
            "--prefix-caching-hash-algo read 0.9.0-0.34.0): pdd_operator/vllm/flag_choices.py; --tool-call-parser (with "
            "--enable-auto-tool-choice) and --reasoning-parser against ToolParserManager/ReasoningParserManager."
            "list_registered() of the release (vllm serve's validate_api_server_args raises KeyError('invalid tool call "
            "parser' / 'invalid reasoning parser') before it serves: entrypoints/openai/api_server.py 0.18.0 l.495-510, "
            "0.26.0 l.597-612, 0.28.0 l.577-592, entrypoints/launchers/launcher.py 0.29.0 l.229-245, "
            "entrypoints/common/cli_args.py 0.34.0 l.624-642; names of the sdists 0.18.0-0.34.0): "
            "pdd_operator/vllm/parser_names.py; --speculative-config method against the release's SpeculativeMethod "
            "(vllm/config/speculative.py: pydantic Literal, 0.26.0 l.66-94; 0.34.0 _validate_method l.1623-1634; "
            "sdists 0.18.0-0.34.0): pdd_operator/vllm/speculative_methods.py; --attention-backend / --attention-config "
            "backend against the release's AttentionBackendEnum members (ValueError('Unknown attention backend'): "
            "vllm/config/attention.py validate_backend_before 0.26.0 l.116-126, v1/attention/backends/registry.py "
            "l.18-31; sdists 0.18.0-0.34.0): pdd_operator/vllm/attention_backends.py; vllm serve's "
            "data-parallel load-balancing modes, one at most (vllm/entrypoints/cli/serve.py from 0.16.0: external "
            "with hybrid; from 0.22.0 also --data-parallel-multi-port-external-lb): pdd_operator/compat/data_parallel.py; "
            "Dynamo's vLLM worker: --disaggregation-mode choices per release (agg/prefill/decode from ai-dynamo 1.0.0, "
            "encode from 1.1.0, pd from 1.3.0: dynamo/common/constants.py, dynamo/vllm/backend_args.py) and "
            "--is-prefill-worker/--is-decode-worker beside --disaggregation-mode (ValueError in 1.0.0-1.3.1): "
            "pdd_operator/compat/dynamo_worker_flags.py"),
    without_connector=True, one_engine=True,
    example="--attention-config '{\"use_trtllm_ragged_deepseek_prefill\": true}' on vllm-runtime:1.3.0 (vLLM 0.23.0)",
)
def check_engine_args(pair: PDPair) -> list[Violation]:
    """The engine arguments can be read (``--attention-config`` and ``pass_config`` hold only fields their release
    defines, a flag whose values the parser takes as choices gets one its release lists:
    ``--prefix-caching-hash-algo builtin`` ends with 0.10.1.1, and ``vllm serve`` selects one data-parallel
    load-balancing mode at most: ``--data-parallel-multi-port-external-lb`` with ``--data-parallel-hybrid-lb`` stops
    it from 0.22.0). A ``dynamo.vllm`` worker's ``--disaggregation-mode`` takes a value its Dynamo release lists, and
    not beside a legacy role flag on 1.0.0-1.3.1 (:func:`~pdd_operator.compat.dynamo_worker_flags.flag_refusals`)."""
    out: list[Violation] = [(f"{r.role}: {err}.", "Fix the engine arguments.") for r in pair.roles for err in r.errors]
    out.extend(_worker_flag_violations(pair, "value") + _worker_flag_violations(pair, "conflict"))
    for r in pair.roles:
        out.extend(_config_field_violations(pair, r))
        out.extend(_choice_violations(pair, r))
        out.extend(_parser_violations(pair, r))
        out.extend(_speculative_method_violations(pair, r))
        out.extend(_backend_name_violations(pair, r))
        out.extend(_dp_lb_violations(pair, r))
    return out


@rule(
    id="cli-flag-removed", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm/utils/argparse_utils.py FlexibleArgumentParser (argparse: 'unrecognized arguments', exit 2); "
            "the removals in pdd_operator/vllm/removed_flags.py REMOVED_FLAGS (--disable-log-requests: deprecated in "
            "0.10.1, still defined by the 0.16.0 parser, gone from 0.17.0; --task: refused by 0.13.0) and those read "
            "release by release in the sdists 0.10.1.1-0.34.0 (removed_flags_read.py READ_REMOVALS: "
            "--calculate-kv-scales gone from 0.28.0, --swap-space from 0.18.0, the --guided-decoding-* flags from "
            "0.12.0, ...); Dynamo's vLLM worker flags by Dynamo release (pdd_operator/compat/dynamo_worker_flags.py: "
            "--is-prefill-worker / --is-decode-worker gone from ai-dynamo 1.4.0, read in the wheels 0.6.0-1.6.1)"),
    without_connector=True, one_engine=True,
    example="--disable-log-requests on vllm/vllm-openai:v0.32.0; --is-prefill-worker on vllm-runtime:1.4.0",
)
def check_removed_flags(pair: PDPair) -> list[Violation]:
    """No engine passes a flag its vLLM release removed (vLLM's parser refuses it and the server never starts).

    Judged per engine on its own version: from the first release known to refuse the flag it is an error; before it
    nothing is said (the flag was accepted); with an unknown version a warning (harmless on older releases, fatal on
    newer ones), so old guides run on unnamed images are not held unchecked. A ``dynamo.vllm`` worker's own flags are
    judged on the Dynamo release of its runtime image (``--is-prefill-worker`` from 1.4.0), not on vLLM's."""
    out: list[Violation] = _worker_flag_violations(pair, "removed")
    for r in pair.roles:
        for flag in r.removed_flags:
            removal = REMOVED_FLAGS[flag]
            fix = fix_for(pair, f"Remove {flag} from spec.{r.role}.extraArgs ({removal.instead}).",
                          f"Remove {flag} from the {r.role} container's arguments ({removal.instead}).")
            if r.version is None:
                out.append((f"{r.role}: {flag} is a flag vLLM removed: releases from {fmt(removal.refused_since)} on "
                            "refuse it ('unrecognized arguments') and the server exits before it starts; earlier "
                            "releases accept it. This engine's vLLM version is unknown.", fix, "warning"))
            elif r.version >= removal.refused_since:
                out.append((f"{r.role}: vLLM {fmt(r.version)} has no {flag} flag (removed; refused from "
                            f"{fmt(removal.refused_since)}): its argument parser stops with 'unrecognized arguments: "
                            f"{flag}' and the {r.role} server never starts.", fix))
    return out


@rule(
    id="cli-flag-unknown", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm/utils/argparse_utils.py FlexibleArgumentParser.parse_args -> argparse ('unrecognized arguments', "
            "exit 2; vllm/entrypoints/cli/main.py 0.9.0 and 0.34.0 line 110); the flags of Dynamo, SGLang and "
            "TensorRT-LLM read absent from every vLLM parser of 0.9.0, 0.10.1.1, 0.18.0, 0.26.0, 0.27.0, 0.30.0 and "
            "0.34.0 (pdd_operator/vllm/foreign_flags.py FOREIGN_FLAGS)"),
    without_connector=True, one_engine=True,
    example="--max-local-prefill-length 1500 in a PDDeployment's spec.decode.extraArgs; --mem-fraction-static 0.8 on "
            "vllm serve",
)
def check_foreign_flags(pair: PDPair) -> list[Violation]:
    """No vLLM engine passes a flag of another serving framework that vLLM's parser never defined.

    A Dynamo graph's, SGLang's or TensorRT-LLM's setting copied onto ``vllm serve`` (or its ``api_server`` module, or
    a PDDeployment's ``extraArgs``) is refused by argparse before the engine starts, on every release read
    (:data:`~pdd_operator.vllm.foreign_flags.FOREIGN_FLAGS`); a ``dynamo.vllm`` worker's own flags are judged by
    ``cli-flag-removed`` and ``engine-args-invalid`` on its Dynamo release instead."""
    out: list[Violation] = []
    for r in pair.roles:
        for flag in r.foreign_flags:
            foreign = FOREIGN_FLAGS[flag]
            where = f"vLLM {fmt(r.version)}" if r.version else "vLLM (every release from 0.9.0 to 0.34.0 read)"
            out.append((f"{r.role}: {flag} is a flag of {foreign.owner}, not of vLLM: {where} defines no such option, "
                        f"so its argument parser stops with 'unrecognized arguments: {flag}' and the {r.role} server "
                        "never starts.",
                        fix_for(pair, f"Remove {flag} from spec.{r.role}.extraArgs; {foreign.instead}.",
                                f"Remove {flag} from the {r.role} container's arguments; {foreign.instead}.")))
    return out


@rule(
    id="cli-option-malformed", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"), in_manifest=("args", "command"),
    source=("vLLM's FlexibleArgumentParser.parse_args rewrites only '_' to '-' in words starting with '--' (and -O) "
            "before argparse's parse_args (vllm/utils.py 0.9.1 l.1440-1531, vllm/utils/__init__.py 0.11.0 "
            "l.1848-1981, vllm/utils/argparse_utils.py 0.34.0 l.313-502); argparse takes a '-' word no option string "
            "begins with for an unknown optional and any other word for a positional: 'unrecognized arguments', exit "
            "2; an empty or blank word is passed on unchanged and argparse's _parse_optional takes it for a "
            "positional one no entry point has room for. No vLLM option begins with '---' or a non-ASCII dash; a "
            "platform plugin keeps vLLM's parser "
            "(vllm-ascend examples/disaggregated_prefill_v1/run_server.sh at fcea657: ---max-num-batched-tokens)"),
    without_connector=True, one_engine=True, any_release=True,
    example="---max-num-batched-tokens 256 (or \u2014max-model-len pasted from rendered docs) in a vllm serve command",
)
def check_cli_option_malformed(pair: PDPair) -> list[Violation]:
    """No word is written as an option vLLM's parser can match to none on any release: three or more hyphens
    (``---max-num-batched-tokens``) or a typographic dash in place of ``--`` (:func:`~pdd_operator.vllm.flags.
    malformed_options`), or a word that is empty or blanks only (argparse takes it for a positional argument no entry
    point has room for). The engine stops while its arguments are parsed, whatever its platform (plugins such as
    vllm-ascend keep vLLM's parser) or KV connector, so this is judged on every pair, unknown releases included."""
    out: list[Violation] = []
    for r in pair.roles:
        for word, after in zip(r.malformed_options, r.malformed_places or ("",) * len(r.malformed_options), strict=True):
            message, fixed = _malformed(r.role, word, after)
            out.append((message, fix_for(pair, f"{fixed} in spec.{r.role}.extraArgs.", f"{fixed} in the {r.role}'s "
                                         "command line.")))
    return out


@rule(
    id="cli-option-missing-value", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"), in_manifest=("args", "command"),
    source=("the data-parallel options take one argument (vllm/engine/arg_utils.py add_cli_args: --data-parallel-address "
            "-dpa type=str, no nargs, 0.23.0 l.1024, 0.30.0 l.1151, 0.34.0 l.1280; -dpp, -dp, -dpl, -dpr alike); "
            "FlexibleArgumentParser.parse_args hands the words to argparse (vllm/utils/argparse_utils.py 0.34.0 "
            "l.156, l.313-502), whose _parse_optional reads a following '--' word as an option string, so the option "
            "gets no argument: 'expected one argument', exit 2"),
    without_connector=True, one_engine=True, any_release=True,
    example="--data-parallel-address ${gym_nodes[0]} inside srun bash -c '...', where the batch shell's array does not "
            "exist: --data-parallel-address --data-parallel-rpc-port 13345",
)
def check_cli_option_missing_value(pair: PDPair) -> list[Violation]:
    """No option that takes one argument is left without it (:func:`~pdd_operator.vllm.flags.missing_values`): the
    next word is another option, or there is none, as when the word that should hold the value expanded to nothing
    (a batch shell's array read in the ``bash -c`` that ``srun`` runs, where no array crosses). argparse stops with
    'expected one argument' (exit 2) on every release, whatever the connector, so every rank of that role fails to
    start."""
    out: list[Violation] = []
    for r in pair.roles:
        for word in r.missing_values:
            out.append((f"{r.role}: {word} is followed by another option or by nothing, so it gets no "
                        f"value: vLLM's argument parser stops with 'argument {word}: expected one argument' (exit 2) "
                        f"and the {r.role} engine never starts. A value that expands to nothing does this: an unset "
                        "variable, or a bash array of an outer shell read inside 'bash -c' (srun, ssh), where no array "
                        "is exported.",
                        fix_for(pair, f"Give {word} its value in spec.{r.role}.extraArgs.",
                                f"Give {word} its value on the {r.role}'s command line (export a scalar variable "
                                "before srun, or expand it in the outer shell).")))
    return out


def _malformed(role: str, word: str, after: str = "") -> tuple[str, str]:
    """``(message, what to write instead)`` for a malformed option ``word`` of the ``role`` engine: a word with three
    hyphens or a typographic dash, or a word of blanks only, what a backslash before a trailing blank passes
    (:func:`~pdd_operator.vllm.flags.malformed_options`). ``after``: the word right before it on the command line
    (:func:`~pdd_operator.vllm.flags.malformed_option_places`), named for an empty word, which has no text of its own
    ("right after '--master-addr'"). The second part is a sentence to end with where to do it ("Write --max-model-len
    (ASCII hyphens)")."""
    if not word:
        place = f" right after {after!r}" if after.strip() and not unknown_names(after) else ""
        return (f"{role}: its command line holds an empty word (''){place}, which vLLM's argument parser passes to "
                "argparse unchanged; argparse takes it for a positional argument vLLM has no place for ('unrecognized "
                "arguments', exit 2): the engine never starts.",
                "Delete the empty word (an empty args item, or a quoted expansion such as \"$EXTRA\" of an empty "
                "variable: leave it unquoted or drop it)")
    if not word.strip():
        return (f"{role}: its command line holds a word of blanks only ({word!r}), which vLLM's argument parser takes "
                "for a positional argument it has no place for ('unrecognized arguments', exit 2): the engine never "
                "starts. In a shell script that word is what a backslash followed by blanks at a line end gives: the "
                "backslash escapes the blank after it, not the newline (bash: only a backslash right before the "
                "newline continues a line), so the command also ends on that line and the options on the following "
                "lines run as a command of their own.",
                "Delete the blank word (in a script: the blanks after the backslash that ends the line)")
    spelled = option_spelling(word.lstrip("-\u2012\u2013\u2014\u2015\u2212"))
    return (f"{role}: '{word}' is no option vLLM's argument parser can match (it begins with three hyphens or a "
            f"typographic dash), so the parser stops with 'unrecognized arguments' (exit 2) and the {role} engine "
            "never starts.", f"Write {spelled} (ASCII hyphens)")


def malformed_option_findings(role: RoleConfig, where: str) -> tuple[Finding, ...]:
    """The ``cli-option-malformed`` findings of one engine read on its own (``where``: the container's place, for the
    finding's fields), for an engine that is otherwise not checked (a platform plugin's, whose worker and connectors
    these rules do not describe but whose command line vLLM's parser reads as everywhere); ``()`` for none."""
    from pdd_operator.compat.rules import RULES_BY_ID  # the package imports this module

    rule_ = RULES_BY_ID["cli-option-malformed"]
    found = []
    for word, after in zip(role.malformed_options, role.malformed_places or ("",) * len(role.malformed_options),
                             strict=True):
        message, fixed = _malformed(role.role, word, after)
        found.append(Finding(rule=rule_.id, severity="error", fields=[f"{where}.args", f"{where}.command"],
                             message=message, fix=f"{fixed} in the container's command line.",
                             source=rule_.source))
    return tuple(found)


@rule(
    id="entrypoint-repeated", family="engine-args", severity="error",
    fields=("spec.engine",), in_manifest=("args", "command"),
    source=("the ENTRYPOINT of vLLM's images per release (pdd_operator/vllm/entrypoint.py IMAGE_ENTRYPOINTS): vllm "
            "docker/Dockerfile, final vllm-openai stage, python3 -m vllm.entrypoints.openai.api_server up to 0.11.0, "
            "vllm serve from 0.11.1 (read in 0.9.0-0.11.0, 0.11.1-0.14.0, 0.21.0, 0.32.0, 0.34.0), the same in the "
            "vllm-openai stages of Dockerfile.cpu and Dockerfile.xpu, vllm serve in Dockerfile.rocm's (each the "
            "stage .buildkite/release-pipeline.yaml publishes); the one optional positional model_tag "
            "(vllm/entrypoints/openai/cli_args.py make_arg_parser 0.10.1.1-0.11.1, vllm/entrypoints/launchers/"
            "cli_args.py 0.32.0), FlexibleArgumentParser.parse_args moving --model to the front after serve (vllm/"
            "utils/argparse_utils.py 0.11.1 l.201, 0.34.0 l.328) or refusing it there (ValueError, vllm/utils/"
            "__init__.py 0.11.0 l.1857) and ending in argparse's parse_args ('unrecognized arguments', exit 2)"),
    without_connector=True, one_engine=True, any_release=True,
    example='args: [vllm, serve, Qwen/Qwen3-8B, ...] (or [serve, Qwen/Qwen3-8B, ...]) and no command on '
            'vllm/vllm-openai:v0.32.0',
)
def check_entrypoint_repeated(pair: PDPair) -> list[Violation]:
    """A container without ``command`` does not repeat its image's entrypoint in ``args`` (``vllm serve`` on
    vllm/vllm-openai runs ``vllm serve vllm serve <model>``, ``serve <model>`` runs ``vllm serve serve <model>``,
    which vLLM's parser refuses).

    The args are appended to the image's ENTRYPOINT: ``vllm`` (or ``serve``) becomes the one positional (the model)
    and the next word is left over. An error on the images whose ENTRYPOINT is read per release (vllm/vllm-openai,
    vLLM's CPU, ROCm and XPU release images: both the ``vllm serve`` and the older ``api_server`` one refuse the
    extra positional), a warning where the argv parses but serves another model (``serve`` with flags only) and on
    vLLM's other images, whose ENTRYPOINT was not read (``serve ...`` is right for an ENTRYPOINT of ``vllm``
    alone). The engine's other rules read the args from the entry point they write."""
    out: list[Violation] = []
    for r in pair.roles:
        repeated = r.repeated_entrypoint
        if repeated is None:
            continue
        written = " ".join(repeated.written)
        fix = (f"Drop the leading '{written}' from the {r.role} container's args (containers[].args; a Compose "
               f"service's command), so they start with the model or a flag, or move them into command: "
               f"[{', '.join(SERVE)}] and keep the rest in args.")
        if repeated.entrypoint is None:
            out.append((f"{r.role}: the container has no command and its args start with '{written}'; the image "
                        f"({r.image}) runs them after its own ENTRYPOINT, which was not read (not checked: entrypoint "
                        f"of {r.image} unknown). If that ENTRYPOINT is vLLM's ('vllm serve', as in vllm/vllm-openai), "
                        f"the engine runs 'vllm serve {written} ...' and stops with 'unrecognized arguments'"
                        + ("; with an ENTRYPOINT of 'vllm' alone, 'serve ...' is right." if written == "serve"
                           else "."), fix, "warning"))
            continue
        entry = " ".join(repeated.entrypoint)
        head = (f"{r.role}: the container has no command, so {r.image} runs its ENTRYPOINT '{entry}' with the args "
                f"appended: '{entry} {written} ...'. ")
        if not repeated.fails:
            served = "a model named 'serve'" if repeated.entrypoint == SERVE else "its default model"
            out.append((head + f"vLLM's parser takes '{repeated.written[0]}' for its one positional (model_tag) and "
                        f"the {r.role} server starts with {served}, not the one intended.", fix, "warning"))
            continue
        if repeated.left_over == "--model" and repeated.entrypoint != SERVE:
            why = ("vLLM's parser sees 'serve' first and refuses --model there ('With `vllm serve`, you should "
                   "provide the model as a positional argument ...', ValueError)")
        elif repeated.left_over == "serve" and written == "serve":
            why = ("vLLM's parser takes the --model value for the model and stops with 'unrecognized arguments: "
                   "serve' (exit 2)")
        else:
            why = (f"vLLM's parser takes '{repeated.written[0]}' for the model and stops with 'unrecognized "
                   f"arguments: {repeated.left_over} ...' (exit 2)")
        out.append((head + f"{why}; the {r.role} server never starts.", fix))
    return out


@rule(
    id="cli-flag-not-yet", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm/utils/argparse_utils.py FlexibleArgumentParser (argparse: 'unrecognized arguments', exit 2); "
            "the additions in pdd_operator/vllm/added_flags.py ADDED_FLAGS, each read in vllm/engine/arg_utils.py of "
            "the release without it and one with it (-dph, -dpe: absent in 0.11.0, present from 0.11.1; -dpn, -dpr, "
            "-dpb: absent in 0.9.0, present from 0.10.0; -ep: "
            "absent in 0.13.0, present in 0.14.0; -dpm: absent in 0.21.0, present in 0.22.0; -dcp and "
            "--decode-context-parallel-size: absent in 0.10.1.1, present in 0.10.2; -pcp and "
            "--prefill-context-parallel-size: absent in 0.11.1, present in 0.12.0; -cc: absent in 0.11.1, present in "
            "0.12.0; -ac: absent in 0.12.0, present in 0.13.0; -sc: absent in 0.18.0, present in 0.19.0; -dc: absent "
            "in 0.23.0, present in 0.24.0; -tp, -pp, -dp, -dpl, -dpa, -dpp, -q, -O: in every release "
            "read) and the long flags read release by release in the sdists 0.10.1.1-0.34.0 (added_flags_read.py "
            "READ_ADDITIONS: --mm-encoder-tp-mode from 0.10.2, --enable-dbo from 0.11.0, --kv-cache-dtype-skip-layers "
            "from 0.19.0, ...); "
            "Dynamo's vLLM worker flags by Dynamo release (pdd_operator/compat/dynamo_worker_flags.py: "
            "--disaggregation-mode from ai-dynamo 1.0.0, --is-decode-worker from 0.6.1, read in the wheels "
            "0.6.0-1.6.1)"),
    without_connector=True, one_engine=True,
    example="-dph on vllm/vllm-openai:v0.11.0; --disaggregation-mode prefill on vllm-runtime:0.9.1",
)
def check_added_flags(pair: PDPair) -> list[Violation]:
    """No engine passes a flag or short option its vLLM release does not define yet (vLLM's parser refuses it and the
    server never starts).

    Judged per engine on its own version: up to the newest release read without the flag an error (the releases
    before it are taken not to have it either); between that release and the one read with it a warning (not read);
    an unknown version is bounded by the flag instead (:attr:`RoleConfig.flag_floor`). A ``dynamo.vllm`` worker's own
    flags are judged on the Dynamo release of its runtime image (``--disaggregation-mode`` before 1.0.0)."""
    out: list[Violation] = _worker_flag_violations(pair, "not-yet")
    for r in pair.roles:
        if r.version is None:
            continue
        for flag in r.added_flags:
            added = ADDED_FLAGS[flag]
            fix = fix_for(pair, f"Use a vLLM release that has {flag} ({fmt(added.present_in)} has it), or remove it "
                                f"from spec.{r.role}.extraArgs (a short option: write its long name).",
                          f"Use a vLLM image that has {flag} ({fmt(added.present_in)} has it), or remove it from the "
                          f"{r.role} container's arguments (a short option: write its long name).")
            if r.version <= added.absent_in:
                out.append((f"{r.role}: vLLM {fmt(r.version)} has no {flag} option (first read in "
                            f"{fmt(added.present_in)}): its argument parser stops with 'unrecognized arguments: "
                            f"{flag}' and the {r.role} server never starts.", fix))
            elif r.version < added.present_in:
                out.append((f"{r.role}: {flag} is not in vLLM {fmt(added.absent_in)} and is in "
                            f"{fmt(added.present_in)}; whether {fmt(r.version)} has it was not read. If not, its "
                            "argument parser stops with 'unrecognized arguments' and the server never starts.",
                            fix, "warning"))
    return out


#: The first release with ``--attention-backend`` (``EngineArgs.attention_backend``, engine/arg_utils.py 0.13.0 line
#: 546; 0.12.0 has no such flag), and with ``create_engine_config``'s check that it and ``attention_config.backend`` are
#: not both set: ``raise ValueError("attention_backend and attention_config.backend are mutually exclusive")``
#: (arg_utils.py 0.13.0 lines 1646-1651, 0.14.0 and 0.14.1 lines 1692-1697, 0.16.0 lines 1725-1730, 0.17.0 lines
#: 1806-1811, 0.18.0 lines 1839-1844, 0.20.0 lines 1993-1996, 0.24.0 lines 2186-2188, 0.28.0 lines 2376-2378, 0.34.0
#: lines 2767-2769). ``attention_config.backend`` is ``--attention-config``'s ``backend`` and, on 0.13.0-0.14.1,
#: :data:`~pdd_operator.vllm.attention_backends.BACKEND_ENV`, which ``AttentionConfig.__post_init__`` copies into it
#: whenever the variable is set (config/attention.py 0.13.0 and 0.14.1 lines 73-93: ``envs.is_set``), so the flag
#: beside the variable stops the engine there; 0.16.0 on no longer read the variable (0.15.x was not read).
BACKEND_FLAG_EXCLUSIVE_SINCE = (0, 13, 0)


@rule(
    id="attention-backend-set-twice", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.engine.env"),
    source=("vllm/engine/arg_utils.py create_engine_config: ValueError('attention_backend and attention_config.backend "
            "are mutually exclusive') (0.13.0 lines 1646-1651, 0.14.1 lines 1692-1697, 0.18.0 lines 1839-1844, 0.34.0 "
            "lines 2767-2769); vllm/config/attention.py AttentionConfig.__post_init__ copies VLLM_ATTENTION_BACKEND "
            "into backend on 0.13.0-0.14.1 (lines 73-93); the variable is read by no file from 0.16.0"),
    needs=("--attention-backend", "--attention-config", "VLLM_ATTENTION_BACKEND"),
    without_connector=True, one_engine=True,
    example="--attention-backend FLASH_ATTN with VLLM_ATTENTION_BACKEND=FLASHINFER in the env on v0.14.1",
)
def check_attention_backend_set_twice(pair: PDPair) -> list[Violation]:
    """``--attention-backend`` is not given beside another backend setting: ``--attention-config``'s ``backend``
    (every release with the flag), or ``VLLM_ATTENTION_BACKEND`` where vLLM copies it into the same field (0.13.0-0.14.1;
    a warning on 0.15.x and unknown releases, whose reading of it is not known): vLLM refuses the two together."""
    out: list[Violation] = []
    for r in pair.roles:
        version = r.version or pair.version
        if not r.attention_backend_flag or (version is not None and version < BACKEND_FLAG_EXCLUSIVE_SINCE):
            continue
        stops = (f"vLLM refuses the two together ('attention_backend and attention_config.backend are mutually "
                 f"exclusive', create_engine_config), so the {r.role} engine never starts")
        if "backend" in r.attention_config_keys:
            out.append((f"{r.role}: --attention-backend and --attention-config's backend are both given: {stops}.",
                        fix_for(pair, f"Keep one of the two in spec.{r.role}.extraArgs.",
                                f"Keep one of --attention-backend and --attention-config's backend in the {r.role} "
                                "container's arguments.")))
            continue
        value = str(r.env.get(BACKEND_ENV) or "")
        if not value:
            continue
        read = backend_env_read(version)
        if read is False:
            continue  # the variable is ignored there (other rules say so where it matters)
        fix = fix_for(pair, f"Remove {BACKEND_ENV} from the engine's env (--attention-backend names the backend).",
                      f"Remove {BACKEND_ENV} from the {r.role} container's env (--attention-backend names the backend).")
        message = (f"{r.role}: --attention-backend is given and {BACKEND_ENV}={value} is set: vLLM 0.13.0-0.14.1 copy the "
                   f"variable into attention_config.backend (AttentionConfig.__post_init__), and {stops}")
        if read and version is not None:
            out.append((message + ".", fix))
        else:
            where = f"vLLM {fmt(version)}" if version else "this engine's vLLM (version unknown)"
            out.append((message + f"; from 0.16.0 the variable is ignored, and whether {where} still reads it was not "
                        "read, so this is a warning.", fix, "warning"))
    return out


@rule(
    id="attention-backend-unsupported", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.model.architecture"),
    source=("vllm/v1/attention/backend.py validate_configuration ('MLA not supported', 'non-MLA not supported', "
            "'sparse not supported') and vllm/platforms/cuda.py get_attn_backend_cls (a selected backend is validated "
            "alone and raises 'Selected backend ... is not valid for this configuration'), read in 0.18.0, 0.19.1, "
            "0.21.0, 0.24.0 and 0.32.0; earlier releases, other platforms or an unknown version: a warning"),
    needs=("--attention-backend", "--attention-config"),
    without_connector=True, one_engine=True,
    example="--attention-backend FLASHINFER for deepseek-ai/DeepSeek-R1 (MLA) on v0.32.0",
)
def check_attention_backend_fits_model(pair: PDPair) -> list[Violation]:
    """An attention backend named on the command line serves the model's kind of attention (MLA or not, sparse or
    not): vLLM validates a selected backend alone and stops the engine when it does not fit."""
    family = pair.model.architecture
    out: list[Violation] = []
    for r in pair.roles:
        reason = backend_refusal(r.attention_backend, family) if r.attention_backend else None
        if reason is None:
            continue
        kind = "an MLA" if family in ("mla", "sparse-mla") else "a non-MLA"
        message = (f"{r.role}: --attention-backend {r.attention_backend} does not serve {kind} model "
                   f"({pair.model.architecture}): vLLM validates a selected backend alone and refuses it "
                   f"('Selected backend {r.attention_backend.upper()} is not valid for this configuration. Reason: "
                   f"[{reason!r}]'), so the {r.role} engine stops while loading the model.")
        fix = fix_for(pair, f"Drop the backend from spec.{r.role}.extraArgs (vLLM then picks one that fits) or name "
                      "one of the model's kind.",
                      f"Drop --attention-backend from the {r.role} container (vLLM then picks one that fits) or name "
                      "one of the model's kind (the *_MLA backends serve MLA models).")
        certain = (r.version is not None and r.version >= EXPLICIT_BACKEND_VALIDATED_SINCE
                   and gpu_platform(r.image, r.resources) == "cuda")
        if certain:
            out.append((message, fix))
        else:
            where = f"vLLM {fmt(r.version)}" if r.version else "this engine's vLLM (version unknown)"
            out.append((message + f" This was read for CUDA from {fmt(EXPLICIT_BACKEND_VALIDATED_SINCE)} on; whether "
                        f"{where} on its platform does the same was not, so this is a warning.", fix, "warning"))
    return out


@rule(
    id="extra-args-managed-flag", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("PDDeployment API; vllm nixl/metadata.py compute_nixl_compatibility_hash (is_hma_enabled 0.18+; "
            "speculative factors only for draft-model methods, 0.28+)"),
    without_connector=True,
)
def check_extra_args(pair: PDPair) -> list[Violation]:
    """extraArgs do not set flags the operator renders (draft-free speculation and HMA on both roles may).

    Flags wired into what the operator renders besides the engine (TP/PP, port, KV transfer config, model names) are
    errors; flags that only configure the engine (:data:`_ENGINE_ONLY_FLAGS`) are warnings unless the override leaves
    prefill and decode with different values of a must-match setting (set 127: a recipe's ``--kv-cache-dtype fp8``
    copied into both roles, or ``--max-model-len`` on the prefill, runs; vLLM keeps the last value)."""
    if not pair.managed:
        return []
    out = []
    hma = {r.role: _hma_flag(r.extra_args) for r in pair.roles}
    for r in pair.roles:
        for arg in r.extra_args:
            flag = arg.split("=", 1)[0]
            if flag in _HMA_FLAGS and hma["prefill"] != hma["decode"]:
                out.append((
                    f"spec.{r.role}.extraArgs sets {flag} on this role only; vLLM hashes whether HMA is on "
                    "(is_hma_enabled, 0.18+), so the handshake refuses the pair.",
                    f"Pass {flag} in the extraArgs of both roles, or of neither.",
                ))
            elif flag == "--speculative-config" and _speculative_method(r.extra_args) in DRAFT_FREE_METHODS:
                continue  # draft-free methods are not compared between the roles
            elif flag in _ENGINE_ONLY_FLAGS:
                out.append(_engine_only_override(pair, r, flag))
            elif flag in _MANAGED_FLAGS:
                out.append((
                    f"spec.{r.role}.extraArgs sets {flag}, which the operator renders from the spec; a second value "
                    "overrides it on one role only and can break what must match between prefill and decode.",
                    f"Remove {flag} from spec.{r.role}.extraArgs and set {_MANAGED_FLAGS[flag].format(role=r.role)} "
                    "instead.",
                ))
    return out


def _engine_only_override(pair: PDPair, role: RoleConfig, flag: str) -> Violation:
    """The finding for ``flag`` of :data:`_ENGINE_ONLY_FLAGS` in ``role``'s extraArgs: an error when prefill and
    decode then run different values of a setting that must match (each role's effective value, read from its
    rendered argv), else a warning that the flag overrides the spec's field on that role."""
    field_ = _MANAGED_FLAGS[flag].format(role=role.role)
    fix = f"Remove {flag} from spec.{role.role}.extraArgs and set {field_} instead."
    value = _ENGINE_ONLY_FLAGS[flag]
    if value is not None and value(pair.prefill) != value(pair.decode):
        return (f"spec.{role.role}.extraArgs sets {flag}, which the operator renders from the spec; the last value "
                f"wins, so prefill ({value(pair.prefill)}) and decode ({value(pair.decode)}) differ in a setting "
                "that must match between them.", fix)
    return (f"spec.{role.role}.extraArgs sets {flag}, which the operator renders from {field_}; vLLM keeps the last "
            "value, so it overrides the spec on this role (judged here with the value the engine keeps; nothing that "
            "must match between prefill and decode differs).", fix, "warning")


#: First release that keeps an explicit ``--no-enable-chunked-prefill`` (``EngineArgs._set_default_args`` sets
#: ``enable_chunked_prefill`` only when it is None) and so refuses a budget below ``max_model_len``: read in the
#: 0.11.1, 0.12.0, 0.13.0, 0.14.0, 0.18.0, 0.24.0 and 0.32.0 sources. Up to 0.11.0 vLLM 1 forces chunked prefill on for
#: every generating model ("V1 always uses chunked prefills", ``_set_default_args_v1`` in 0.10.1.1 and 0.11.0), so
#: the flag is overridden before ``SchedulerConfig`` checks the budget (set 23).
SCHEDULER_BUDGET_READ_SINCE = (0, 11, 1)


@rule(
    id="max-num-batched-tokens-below-max-model-len", family="engine-args", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm/config/scheduler.py SchedulerConfig.verify_max_model_len (0.11.1-0.14.0, 0.18.0, 0.24.0, 0.32.0): ValueError "
            "'max_num_batched_tokens (N) is smaller than max_model_len (M)' with chunked prefill off, and 'must be "
            "greater than or equal to max_num_seqs' (that one also in _verify_args of 0.9.0-0.11.0)"),
    since=SEQS_REFUSED_SINCE, without_connector=True,
    example="--no-enable-chunked-prefill --max-num-batched-tokens 8192 --max-model-len 32768 on the prefill",
)
def check_scheduler_budget(pair: PDPair) -> list[Violation]:
    """The scheduler's token budget is one vLLM starts with (whole prompts fit in one step when chunked prefill is off).

    A prefill tuned to run whole prompts (``--no-enable-chunked-prefill``) with a ``--max-num-batched-tokens`` below
    its ``--max-model-len`` never starts (:mod:`pdd_operator.vllm.scheduler_budget`), from 0.11.1
    (:data:`SCHEDULER_BUDGET_READ_SINCE`); a ``--max-num-batched-tokens`` below ``--max-num-seqs`` on every release
    from 0.9.0 (:data:`~pdd_operator.vllm.scheduler_budget.SEQS_REFUSED_SINCE`)."""
    return [(f"{r.role}: {refusal}, so the {r.role} engine never serves.",
             fix_for(pair, f"Raise --max-num-batched-tokens to at least the limit in spec.{r.role}.extraArgs, lower "
                     "spec.model.maxModelLen, or drop --no-enable-chunked-prefill.",
                     f"Raise --max-num-batched-tokens to at least the limit on the {r.role} container, lower "
                     "--max-model-len, or drop --no-enable-chunked-prefill."))
            for r in pair.roles
            for refusal in r.scheduler.refusals(r.version is None or r.version >= SCHEDULER_BUDGET_READ_SINCE)]


@rule(
    id="max-num-batched-tokens-unverified", family="engine-args", severity="warning",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm/config/scheduler.py SchedulerConfig.verify_max_model_len (0.11.1-0.14.0, 0.18.0, 0.24.0, 0.32.0) against the "
            "model's own context length (ModelConfig max_model_len when --max-model-len is not given)"),
    since=SCHEDULER_BUDGET_READ_SINCE, without_connector=True,
    example="--no-enable-chunked-prefill --max-num-batched-tokens 8192 without --max-model-len",
)
def check_scheduler_budget_unknown_context(pair: PDPair) -> list[Violation]:
    """With chunked prefill off and a batch budget, the context length the budget must cover is known.

    Without ``--max-model-len`` vLLM uses the model's own context length, which the manifest does not hold: if it
    exceeds ``--max-num-batched-tokens``, the engine refuses to start (the error rule above); this says so instead
    of passing it."""
    return [(f"{r.role}: chunked prefill is off with --max-num-batched-tokens {r.scheduler.max_num_batched_tokens} "
             "and no --max-model-len, so vLLM uses the model's own context length; if that is longer than the budget "
             "(most current models allow 32k tokens or more), vLLM raises 'max_num_batched_tokens ... is smaller than "
             "max_model_len' at startup.",
             fix_for(pair, f"Set spec.model.maxModelLen (at most {r.scheduler.max_num_batched_tokens}), raise "
                     f"--max-num-batched-tokens in spec.{r.role}.extraArgs to the model's context length, or drop "
                     "--no-enable-chunked-prefill.",
                     f"Set --max-model-len (at most {r.scheduler.max_num_batched_tokens}) on the {r.role} container, "
                     "raise --max-num-batched-tokens to the model's context length, or drop --no-enable-chunked-prefill."))
            for r in pair.roles if r.scheduler.context_unknown]
