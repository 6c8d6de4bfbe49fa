"""Evaluate the rules for one P/D pair: which fired, which could not be evaluated, the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.api.status import Finding
from pdd_operator.compat.dstack_inputs import DSTACK_KIND, dstack_fields, in_dstack_terms
from pdd_operator.compat.llmd_values import LLMD_VALUES_KIND, in_values_terms, values_fields
from pdd_operator.compat.pair import PDPair, from_pddeployment
from pdd_operator.compat.ray_serve import RAY_SERVE_KIND, in_ray_terms, ray_fields
from pdd_operator.compat.rules import CHECKS, Rule
from pdd_operator.compat.rules.base import (
    COMPOSE_KIND,
    MODELPLANE_KIND,
    NOT_CHECKED,
    SCRIPT_KIND,
    compose_fields,
    in_compose_terms,
    in_manifest_terms,
    in_modelplane_terms,
    in_script_terms,
    manifest_fields,
    run_check,
    script_fields,
)
from pdd_operator.compat.rules.connector import unparsable_kv_transfer_config
from pdd_operator.compat.rules.mooncake import judged_mooncake_pair
from pdd_operator.compat.rules.moriio_pair import MORIIO, moriio_unjudged
from pdd_operator.compat.rules.multi_connector import NOT_DESCRIBED
from pdd_operator.compat.rules.p2p_nccl_pair import P2P_NCCL, p2p_nccl_unjudged
from pdd_operator.compat.rules.records import (
    ENV_FROM_SOURCE,
    ENV_FROM_UNSEEN,
    MODEL_CONFIG_UNAVAILABLE,
    VERSION_UNKNOWN,
    VERSION_UNVERIFIED,
)
from pdd_operator.compat.rules.sliding_window_flag import without_disabled_window
from pdd_operator.compat.rules.v0_pair import judged_old_v0_pair, judged_v0_pair, old_v0_chunked
from pdd_operator.compat.shared_storage import judged_shared_storage_pair
from pdd_operator.compat.unknown_version import (
    connector_until,
    flag_floor_reason,
    floor_of,
    probe,
    probe_versions,
    spans,
)
from pdd_operator.vllm.model_config import ModelConfigError, parse_config_json
from pdd_operator.vllm.versions import (
    KNOWN_RELEASES,
    NEWEST_RELEASE,
    OLDEST_KNOWN,
    Version,
    fmt,
    parse_version,
    release_candidate,
)


@dataclass(frozen=True)
class CompatReport:
    """The outcome of :func:`evaluate`.

    Attributes:
        version: the vLLM version the rules were evaluated for, ``"unknown"`` if none.
        findings: errors first, then warnings, each in rule order (deterministic).
        not_evaluated: ids of version-bounded rules skipped because the version is unknown.
        not_checked: why no rule was evaluated at all (the pair uses a KV connector these rules do not
            describe), or ``""``. Such a pair is neither compatible nor incompatible: ``pdd check`` reports
            it as "not checked" and exits non-zero unless told to allow it.
        unchecked: why the pair was checked only in part, or ``""``: the vLLM version is unknown and rules
            that refuse this pair on some vLLM releases could not be decided (:func:`_unknown_version`).
            ``pdd check`` reports it as "not checked" beside the findings and exits non-zero unless told
            to allow it; the webhook and the operator admit the pair and say so in the
            ``vllm-version-unknown`` warning. It also holds :attr:`opaque`.
        opaque: why rules that need a flag's value were not run (a role's value of it is not in the manifest:
            ``Rule.needs``, ``RoleConfig.opaque``), or ``""``; part of :attr:`unchecked` too.
    """

    version: str
    findings: list[Finding] = field(default_factory=list)
    not_evaluated: list[str] = field(default_factory=list)
    not_checked: str = ""
    unchecked: str = ""
    opaque: str = ""

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def compatible(self) -> bool:
        """True when no error-severity rule fired."""
        return not self.errors


def _docker(pair: PDPair) -> bool:
    """Whether every engine of ``pair`` is one a script starts in a ``docker run`` container
    (:attr:`~pdd_operator.compat.pair.RoleConfig.script_docker`)."""
    return bool(pair.roles) and all(r.script_docker for r in pair.roles)


def _in_terms(pair: PDPair, fix: str) -> str:
    if pair.managed:
        return fix
    fix = in_manifest_terms(fix)
    if all(r.workload_kind == LLMD_VALUES_KIND for r in pair.roles):
        return in_values_terms(fix, pair.containers)  # llm-d-modelservice values: their keys, not the rendered containers
    if all(r.workload_kind == COMPOSE_KIND for r in pair.roles):
        return in_compose_terms(fix)  # Compose services: their keys, not the synthetic pods
    if all(r.workload_kind == DSTACK_KIND for r in pair.roles):
        return in_dstack_terms(fix)  # dstack replica groups: their commands, not the synthetic pods
    if all(r.workload_kind == MODELPLANE_KIND for r in pair.roles):
        return in_modelplane_terms(fix)  # Modelplane members: their device requests, not the composed pods
    if all(r.workload_kind == RAY_SERVE_KIND for r in pair.roles):
        return in_ray_terms(fix)  # Ray Serve LLMConfigs: their engine_kwargs, not the synthetic containers
    return in_script_terms(fix, _docker(pair)) if all(r.workload_kind == SCRIPT_KIND for r in pair.roles) else fix


def _sentence(text: str) -> str:
    return text if text.startswith("vLLM") else text[0].upper() + text[1:]


def _fields(pair: PDPair, fields: tuple[str, ...], in_manifest: tuple[str, ...] = ()) -> list[str]:
    """``fields`` (PDDeployment paths) where the user wrote them: the manifest's paths (:func:`manifest_fields`), a
    script's lines and what on them (:func:`script_fields`) for engines a shell or Slurm script starts, or the values
    keys (:func:`values_fields`) for engines rendered from llm-d-modelservice values."""
    out = manifest_fields(fields, pair.containers, in_manifest)
    if not pair.managed and pair.roles and all(r.workload_kind == SCRIPT_KIND for r in pair.roles):
        return script_fields(out, pair.containers, _docker(pair))
    if not pair.managed and pair.roles and all(r.workload_kind == LLMD_VALUES_KIND for r in pair.roles):
        return values_fields(fields, out, pair.containers)  # llm-d-modelservice values keys
    if not pair.managed and pair.roles and all(r.workload_kind == COMPOSE_KIND for r in pair.roles):
        return compose_fields(out, pair.containers)  # the Compose services' keys
    if not pair.managed and pair.roles and all(r.workload_kind == DSTACK_KIND for r in pair.roles):
        return dstack_fields(out, pair.containers)  # the dstack replica groups' keys
    if not pair.managed and pair.roles and all(r.workload_kind == RAY_SERVE_KIND for r in pair.roles):
        return ray_fields(out, pair.containers)  # the LLMConfigs' keys
    return out


def _script_message(pair: PDPair, message: str) -> str:
    """``message`` in a script's terms (its hosts and lines, :func:`in_script_terms`) for engines a shell or Slurm
    script starts, else as written."""
    if not pair.managed and pair.roles and all(r.workload_kind == SCRIPT_KIND for r in pair.roles):
        return in_script_terms(message, _docker(pair))
    if not pair.managed and pair.roles and all(r.workload_kind == COMPOSE_KIND for r in pair.roles):
        return in_compose_terms(message)
    if not pair.managed and pair.roles and all(r.workload_kind == DSTACK_KIND for r in pair.roles):
        return in_dstack_terms(message)
    if not pair.managed and pair.roles and all(r.workload_kind == RAY_SERVE_KIND for r in pair.roles):
        return in_ray_terms(message)
    return message


def _finding(pair: PDPair, rule: Rule, message: str, fix: str, severity: str | None = None) -> Finding:
    if severity not in (None, rule.severity, "warning"):
        raise ValueError(f"rule {rule.id} may only lower its severity, not report {severity!r}")
    fields = _fields(pair, rule.fields, rule.in_manifest)
    message = _script_message(pair, message)  # engines of a shell or Slurm script: its hosts, not pods
    return Finding(rule=rule.id, severity=severity or rule.severity, fields=fields, message=message, fix=fix,
                   source=rule.source)


def evaluate(
    target: PDDeploymentSpec | PDPair, rules: tuple[Rule, ...] = CHECKS, model_config: dict | None = None
) -> CompatReport:
    """Check a PDDeployment spec (or an already extracted :class:`PDPair`) against every rule.

    Where a role has no KV connector at all, only the rules that judge an engine on its own run
    (``Rule.without_connector``, ``kv-connector-missing`` among them): no KV moves, so the NIXL rules promise
    nothing until both roles have a connector. A rule bounded to versions (``since``/``until``) runs only when
    the version is known and inside its bounds; with an unknown version :func:`_unknown_version` judges such
    rules on every release instead of passing them silently. A pair whose roles both name ``P2pNcclConnector`` on a
    known release that ships it (0.9.2-0.23.x), or on a host install that pins none (probed on 0.9.2-0.23.x), runs
    only the rules marked ``Rule.p2p_nccl`` and the engine-alone ones
    (:func:`~pdd_operator.compat.rules.p2p_nccl_pair.p2p_nccl_unjudged`), and one whose roles both name
    ``MoRIIOConnector`` on a release whose connector was read (0.14.0-0.34.0), or on an unknown one (probed on every
    release from 0.14.0 on), only the rules marked ``Rule.moriio`` and the engine-alone ones
    (:func:`~pdd_operator.compat.rules.moriio_pair.moriio_unjudged`); a MooncakeConnector
    pair of a release its rules were read from (:func:`~pdd_operator.compat.rules.mooncake.judged_mooncake_pair`) and a
    V0 connector pair under the V0 engine (:func:`~pdd_operator.compat.rules.v0_pair.judged_v0_pair`) and a
    SharedStorageConnector pair of a release whose connector was read
    (:func:`~pdd_operator.compat.shared_storage.judged_shared_storage_pair`) only the
    engine-alone ones, and a V0 connector pair of a release before :data:`OLDEST_KNOWN` whose connector was read
    (:func:`~pdd_operator.compat.rules.v0_pair.judged_old_v0_pair`: 0.7.0-0.8.x) only those read back to its release
    (:func:`_read_back`; the others named in the ``vllm-version-unverified`` warning); any other connector but NIXL,
    a P2pNccl pair of another release or of an image naming none and a MoRIIO pair of another known release, is
    :func:`_foreign_connector`'s.
    ``model_config`` is the model's parsed config.json, if known. Never raises for a schema-valid spec.
    """
    pair = from_pddeployment(target, model_config=model_config) if isinstance(target, PDDeploymentSpec) else target
    pair = without_disabled_window(pair)
    if pair.either_way:
        return _either_way(evaluate(replace(pair, either_way=False), rules), evaluate(pair.mirrored(), rules), pair)
    if pair.env_from:
        return _env_from(pair, rules)
    version = pair.version
    rules = _in_scope(pair, rules)
    unread: tuple[str, ...] | None = None  # the rules not read back to a release before OLDEST_KNOWN (_read_back)
    foreign = sorted({f"{r.role} {r.wrapper or r.connector}"
                      + (f" loaded from {r.third_party_connector}, not vLLM's class" if r.third_party_connector else "")
                      for r in pair.roles if r.connector and not r.nixl})
    if foreign and any(r.nixl for r in pair.roles):
        # NIXL on one role and another connector on the other: no KV moves (kv-connector-mixed, an engine-alone rule).
        rules = tuple(rule for rule in rules if rule.without_connector)
    elif foreign and (judged_mooncake_pair(pair) or judged_v0_pair(pair) or judged_shared_storage_pair(pair)):
        # vLLM's MooncakeConnector on both roles of a release whose connector was read, or a V0 connector pair
        # (PyNccl, MooncakeStore) under the V0 engine of 0.9.0-0.10.0, or a SharedStorageConnector pair of 0.9.0-0.10.1.x
        # with the same KV tensors: the engine-alone rules (the mooncake-* and v0-* ones among them) judge it; no NIXL
        # rule describes its transfer.
        rules = tuple(rule for rule in rules if rule.without_connector)
    elif foreign and version is not None and judged_old_v0_pair(pair):
        # A V0 connector pair of 0.7.0-0.8.x whose connector was read: the engine-alone rules read back to the release.
        rules, unread = _read_back(tuple(rule for rule in rules if rule.without_connector), version)
    elif foreign and (outside := p2p_nccl_unjudged(pair)) is None:
        # Both roles P2pNcclConnector on a release these rules were read from: its own rules and the engine-alone ones.
        rules = tuple(rule for rule in rules if rule.without_connector or rule.p2p_nccl)
    elif foreign and (moriio := moriio_unjudged(pair)) is None:
        # Both roles MoRIIOConnector on a release whose connector was read: its own rules and the engine-alone ones.
        rules = tuple(rule for rule in rules if rule.without_connector or rule.moriio)
    elif foreign:
        return _foreign_connector(pair, rules, (
            f"the KV connector is not vLLM's NixlConnector ({', '.join(foreign)}; no NixlConnector inside): "
            f"{outside or moriio or _release_decides(pair, rules) or NOT_DESCRIBED}"))
    if any(r.connector is None for r in pair.roles):
        # No KV moves between these engines: only what fails an engine on its own is a promise (Rule.without_connector).
        rules = tuple(rule for rule in rules if rule.without_connector)
    rules, opaque = _runnable(pair, rules)
    findings: list[Finding] = []
    undecided: list[str] = []
    for rule in rules:
        if rule.check is None or (rule.version_bounded and version is None) or not rule.applies_to(version):
            continue
        for message, fix, *severity in run_check(rule, pair):
            if severity == [NOT_CHECKED]:
                undecided.append(f"{rule.id} cannot be decided: {message} {_in_terms(pair, fix)}")
                continue
            findings.append(_finding(pair, rule, message, _in_terms(pair, fix), *severity))
    findings, undecided = _assumed_connector(pair, findings, undecided)
    skipped: list[str] = []
    unchecked = ""
    if version is None:
        found, skipped, unchecked = _unknown_version(pair, rules)
        findings += found
    candidate = next((c for r in pair.roles if (c := release_candidate(r.version_text))), None)
    if version is not None and (version not in KNOWN_RELEASES or candidate):
        findings.append(_unverified(pair, version, candidate, unread))
    findings.sort(key=lambda f: 0 if f.severity == "error" else 1)
    unchecked = " ".join(x for x in (opaque, *undecided, unchecked, _unknown_window(pair, rules, findings)) if x)
    return CompatReport(version=fmt(version), findings=findings, not_evaluated=skipped, unchecked=unchecked,
                        opaque=opaque)


def _read_back(rules: tuple[Rule, ...], version: Version) -> tuple[tuple[Rule, ...], tuple[str, ...]]:
    """``(judged, unread)`` for ``version``, a release before :data:`OLDEST_KNOWN`: ``judged`` the ``rules`` that hold
    there (``Rule.any_release``, or ``Rule.since`` before :data:`OLDEST_KNOWN` and ``version`` in their bounds);
    ``unread`` the ids of the others that would otherwise run on it (unbounded, or bounded from :data:`OLDEST_KNOWN`
    because the reading began there: the flag tables ``cli-flag-unknown`` / ``cli-flag-removed``, the connector
    registry, ``engine-args-invalid`` ...), never refusing on a release they were not read for. Rules bounded from a
    later release describe code that came later and are neither."""
    judged = tuple(r for r in rules if r.any_release or (r.since is not None and r.since < OLDEST_KNOWN
                                                          and r.applies_to(version)))
    unread = tuple(r.id for r in rules if r not in judged and r.check is not None
                   and (r.since is None or r.since == OLDEST_KNOWN) and (r.until is None or r.until > OLDEST_KNOWN))
    return judged, unread


def _in_scope(pair: PDPair, rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """``rules`` less those scoped to a KV connector (``Rule.connector``) whose pairs ``pair`` is not one of: the
    ``p2p_nccl`` rules judge only a pair both of whose roles name ``P2pNcclConnector`` on a release that ships it
    (:func:`~pdd_operator.compat.rules.p2p_nccl_pair.p2p_nccl_unjudged` ``None``), the ``moriio`` ones only a MoRIIO
    pair of a read release (:func:`~pdd_operator.compat.rules.moriio_pair.moriio_unjudged` ``None``). So their
    ``needs`` never hold back another connector's pair, nor name them among its "not checked" rules."""
    judged = {P2P_NCCL: p2p_nccl_unjudged(pair) is None, MORIIO: moriio_unjudged(pair) is None}
    return tuple(rule for rule in rules if rule.connector is None or judged[rule.connector])


def _unknown_window(pair: PDPair, rules: tuple[Rule, ...], findings: list[Finding]) -> str:
    """Why the pair is "not checked" because its model's attention layout is unknown, or ``""``.

    vLLM gives a layer a ``SlidingWindowSpec`` from the model's config.json (``ModelConfig.get_sliding_window``, per
    layer windows in gemma2.py / gemma3.py / gpt_oss.py; Mistral-7B-v0.1 and its fine-tunes window every layer,
    Mistral v0.2+ none), and a non-full group makes the NIXL worker follow the hybrid KV cache manager:
    ``_is_hma_required = not disable_hybrid_kv_cache_manager and any(not FullAttentionSpec)`` ("Also handle unlikely
    SW-only model case", nixl_connector.py 0.18.0 lines 567-573; nixl/worker.py 0.20.0, nixl/base_worker.py
    0.27.0-0.34.0), which refuses what the non-HMA path takes (different block sizes before 0.27: "HMA does not
    support different remote block size yet", 0.18.0 lines 2036-2038; PP pull and push limits). Where neither the
    architecture nor a config.json tells the rules the layout (``pair.model.architecture`` unknown, no window read),
    or the architecture takes its window from a config.json that was not read (``pair.model.window_depends``:
    Mistral, Mixtral, Phi-3, Qwen2/3, StarCoder2, ...; :func:`~pdd_operator.vllm.sliding_window.window_depends`), the
    pair is judged again with windowed layers; the rules that refuse only that reading could not be decided.
    Architectures that never window, or window by their code, and checkpoints whose config.json is known (given, or
    in the table of public checkpoints) are judged once. ``findings`` are the pair's as read (a rule refusing both
    readings is already an error there).
    """
    if pair.model.sliding_window or (pair.model.architecture is not None and not pair.model.window_depends):
        return ""
    windowed = evaluate(replace(pair, model=replace(pair.model, sliding_window=True)), rules)
    held = {f.rule for f in findings if f.severity == "error"}
    refusing = sorted({f.rule for f in windowed.errors} - held)
    if not refusing:
        return ""
    why = (f"its architecture, read from {pair.model.source}, takes its sliding window from config.json, and none "
           "was read"
           if pair.model.architecture is not None else "its architecture is not known and no config.json was read")
    return (f"the model's attention layout is unknown ({why}), "
            f"and {', '.join(refusing)} {'refuses' if len(refusing) == 1 else 'refuse'} this deployment if any of its "
            "layers uses a sliding window (vLLM then runs the hybrid KV cache manager's NIXL path). "
            + ("Set spec.model.configMapRef to the model's config.json." if pair.managed and pair.model.architecture
               else "Set spec.model.hfArchitecture, or spec.model.configMapRef to the model's config.json."
               if pair.managed else "Pass the model's config.json (pdd check --model-config)."))


#: The rule that says a Dynamo worker's connector was assumed (compat/rules/connector.py).
_ASSUMED_CONNECTOR = "dynamo-connector-assumed"


def _assumed_connector(pair: PDPair, findings: list[Finding],
                       undecided: list[str]) -> tuple[list[Finding], list[str]]:
    """``(findings, undecided)`` with the ``dynamo-connector-assumed`` warnings made "not checked" where the assumed
    connector decides the verdict: no error was found on the assumed (pre-Dynamo-1.0) reading, while from Dynamo 1.0
    the same worker gets no connector (a prefill worker refuses to start). Where an error was found the verdict holds
    either way, and where a worker of the pair is written with a flag of the releases that build the connector
    themselves (``--connector``, ``--is-prefill-worker``, ``--is-decode-worker``: the only spelling before 1.0,
    refused or gone later; :data:`~pdd_operator.compat.dynamo_engine_defaults.PRE_1_0_FLAGS`) the pre-1.0 reading is
    the one the file is written for: the warning stays."""
    if (any(f.severity == "error" for f in findings) or not any(f.rule == _ASSUMED_CONNECTOR for f in findings)
            or any(r.dynamo_legacy_flag for r in pair.roles)):
        return findings, undecided
    moved = [f"{_ASSUMED_CONNECTOR} cannot be decided: {f.message} {f.fix}" for f in findings
             if f.rule == _ASSUMED_CONNECTOR]
    return [f for f in findings if f.rule != _ASSUMED_CONNECTOR], [*undecided, *moved]


def _release_decides(pair: PDPair, rules: tuple[Rule, ...]) -> str:
    """Why a pair of a connector other than NIXL stays "not checked" where its vLLM release is not one these rules were
    read from (``""`` where it is, or where nothing more than :data:`NOT_DESCRIBED` can be said).

    A release older than :data:`OLDEST_KNOWN` whose connector code was not read (LMCacheConnector, 0.6.x, a pair the
    older V0 reading does not judge: :func:`~pdd_operator.compat.rules.v0_pair.judged_old_v0_pair`).
    An unknown release: each engine-alone rule (``Rule.without_connector``) that refuses the pair on some of the
    releases read, with those releases (:func:`~pdd_operator.compat.unknown_version.probe` on every release line read:
    ``kv-connector-v0-only`` for a V0 connector on 0.9.0-0.10.0's V1 engine, ``kv-connector-unregistered`` for a name
    a release's registry lacks, ``cli-flag-removed`` for a flag a release dropped). Never a verdict: releases before
    :data:`OLDEST_KNOWN` (where the V0 engine ran V0 connectors by default: envs.py 0.7.3 lines 503-504,
    ``VLLM_USE_V1`` "0") were not read, so the pair may run on a release no rule refuses it on; the sentence says
    so, as the P2pNccl pair's does (:func:`~pdd_operator.compat.rules.p2p_nccl_pair.p2p_nccl_unjudged`)."""
    version = pair.version
    names = " / ".join(sorted({r.connector or "" for r in pair.roles}))
    if version is not None:
        if version >= OLDEST_KNOWN:
            return ""
        # the rules read back to it (Rule.since before OLDEST_KNOWN) were judged and found nothing
        older = [r.id for r in rules if r.without_connector and r.since is not None and r.since < OLDEST_KNOWN
                 and r.applies_to(version)]
        return (f"vLLM {fmt(version)} is older than every release these rules were read from ({fmt(OLDEST_KNOWN)} to "
                f"{fmt(NEWEST_RELEASE)}): no rule here was written from its {names} code"
                + (f" (only {', '.join(older)} was read back to it, and finds no error here)" if older else "")
                + old_v0_chunked(pair))
    alone = tuple(rule for rule in rules if rule.without_connector)
    grid = probe_versions(alone)
    refusing = [p for p in probe(pair, alone, grid, bounded_only=False) if p.refuses and p.refuses != tuple(grid)]
    if not refusing:
        return ""
    return ("the vLLM version is unknown, and vLLM's code refuses this pair on some releases read: "
            + ", ".join(f"{p.rule.id} (vLLM {spans(p.refuses, grid)})" for p in refusing)
            + f"; on the others, and on releases before {fmt(OLDEST_KNOWN)} (not read), it may run, so the verdict "
            "depends on the release")


def _foreign_connector(pair: PDPair, rules: tuple[Rule, ...], why: str) -> CompatReport:
    """The report for a pair whose KV connector these rules do not describe (``why`` says which): "not checked",
    unless vLLM refuses one of its engines on its own.

    The rules that judge an engine by itself (``Rule.without_connector``: the argument parser, ``--kv-transfer-config``
    validation, removed flags, the engine's GPUs) hold whatever connector it names, since vLLM stops such an
    engine before any connector is built (``KVTransferConfig.__post_init__`` refuses a ``kv_connector`` without a
    ``kv_role`` while the flag is parsed: vllm/config.py 0.9.2, vllm/config/__init__.py 0.10.1, vllm/config/kv_transfer.py
    0.32.0). Their errors are the report, and the KV path between the engines stays "not checked" (``unchecked``);
    their warnings are left out: only a promise that vLLM fails turns "not checked" into a verdict. Where an error
    rule could only warn (it fails the pair unless something the files do not show holds: ``kv-connector-v0-only``
    where the V1 oracle may run the V0 engine), its message joins the "not checked" reason as what decides it. So is a vLLM
    whose release is unknown or older than :data:`OLDEST_KNOWN`: a build that carries its own connector in the engine
    (vllm#16677's V0 ``DynamoNixlConnector`` branch on 0.8, whose usage passes no ``kv_role``) is not a release these
    rules were read from, so its parser is not known to refuse what a release's refuses; there only the rules that
    hold on every release (``Rule.any_release``: two engines' memory on one GPU) are judged, and on an older release
    those whose own range was read back to it (``Rule.since`` before :data:`OLDEST_KNOWN`: ``v0-pynccl-kv-rank`` from
    0.7.0).
    """
    version = pair.version
    alone = tuple(rule for rule in rules if rule.without_connector)
    if version is None or version < OLDEST_KNOWN:
        # a release these rules were not read from: only what holds on every release (Rule.any_release), and what a
        # rule's own sources were read for before OLDEST_KNOWN
        alone = tuple(rule for rule in alone if rule.any_release or version is not None and rule.since is not None
                      and rule.since < OLDEST_KNOWN)
    runnable, _ = _runnable(pair, alone)
    found = [
        finding for rule in runnable
        if rule.check is not None and (rule.applies_to(version) or version is None and rule.any_release)
        for message, fix, *severity in run_check(rule, pair) if severity != [NOT_CHECKED]
        for finding in (_finding(pair, rule, message, _in_terms(pair, fix), *severity),)
    ]
    errors = [f for f in found if f.severity == "error"]
    if not errors:
        # an error rule lowered to a warning (kv-connector-v0-only where the V1 oracle may pick the V0 engine) is what
        # the verdict hangs on: said in the reason, not reported as a finding
        lowered = [f for f in found if f.severity == "warning" and next(
            (r.severity for r in runnable if r.id == f.rule), "") == "error"]
        if lowered:
            why += "; what decides it: " + " ".join(f"{f.rule}: {f.message}" for f in lowered)
        return CompatReport(version=fmt(version), not_checked=why)
    return CompatReport(version=fmt(version), findings=errors, unchecked=(
        f"the KV transfer between these engines was not checked: {why}"))


def evaluate_alone(pair: PDPair, role: str, rules: tuple[Rule, ...] = CHECKS) -> list[Finding]:
    """The errors that stop one engine with no counterpart at startup: ``pair`` holds the engine on both sides
    (:func:`pdd_operator.compat.manifests.lone_pair`) and ``role`` (``prefill``/``decode``) is the engine's own.

    Only the rules marked ``Rule.one_engine`` run (each engine judged by its own argv and image, nothing read from
    the other role: the argument parser, ``--kv-transfer-config`` and its connector lookup, one engine's config
    checks), as on a pair whose connector these rules do not describe
    (:func:`_foreign_connector`: errors only; a release unknown or older than the rules' oldest runs only
    ``Rule.any_release`` ones). Findings the mirrored side repeats (``decode: ...`` of a prefill engine) are dropped.
    Returns ``[]`` where nothing stops the engine on its own (the pair then stays "not checked").
    """
    own = tuple(rule for rule in rules if rule.one_engine)
    other = "decode" if role == "prefill" else "prefill"
    kept: list[Finding] = []
    for f in _foreign_connector(pair, own, "no counterpart").findings:
        if f.message.startswith(f"{other}:") or any(k.rule == f.rule and k.message == f.message for k in kept):
            continue
        kept.append(f)
    return kept


def unreadable_connector_alone(pair: PDPair, rules: tuple[Rule, ...] = CHECKS) -> list[Finding]:
    """The ``kv-connector-missing`` error of an engine whose role cannot be told because its ``--kv-transfer-config``
    cannot be read (no JSON object: :func:`~pdd_operator.compat.rules.connector.unparsable_kv_transfer_config`):
    ``pair`` holds the engine on both sides (:func:`pdd_operator.compat.manifests.lone_pair`). vLLM's parser reads the
    flag as JSON before anything else (vllm/engine/arg_utils.py 0.12.0 l.276-282: ``TypeAdapter.validate_json``, a
    ValidationError raised as ``argparse.ArgumentTypeError``; ``json.loads`` from 0.9.0), so the engine stops at
    startup whatever role the value was meant to give it and on every release. Returns ``[]`` for an engine whose
    value can be read, and for one some of whose values are not in the files (``RoleConfig.opaque``: a template
    whose arguments or command substitutions fill its flags, which may fill this JSON too, as vllm-ascend's
    run_dp_template.sh fills ``"dp_size": '"$3"'``); the finding names the engine, not a role."""
    if unparsable_kv_transfer_config(pair.prefill.errors) is None or pair.prefill.opaque:
        return []
    own = tuple(replace(rule, one_engine=True) for rule in rules if rule.id == "kv-connector-missing")
    return [f.model_copy(update={"message": "the engine (whose role cannot be told)" + f.message[len("prefill"):],
                                 "fix": f.fix.replace("the prefill container", "the container")})
            if f.message.startswith("prefill:") else f for f in evaluate_alone(pair, "prefill", own)]


def _env_from(pair: PDPair, rules: tuple[Rule, ...]) -> CompatReport:
    """The report for a pair some of whose variables an ``envFrom`` source not in these files may set
    (:attr:`PDPair.env_from`): judged with them unset (as the files read) and with them unknown
    (:meth:`PDPair.env_from_unknown`).

    An error is a promise whatever the source sets: where the unset reading refuses the pair by a rule that the
    unknown reading does not refuse, the unknown reading is the report (that rule is then a warning or "not
    checked"). Otherwise the unset reading is the report, and where the unknown reading differs (a rule reads one of
    those variables) the ``env-from-not-in-files`` warning says which variables were read as unset, and from where
    they may come.
    """
    unset = evaluate(replace(pair, prefill=replace(pair.prefill, env_from=()), decode=replace(pair.decode, env_from=())),
                     rules)
    maybe = evaluate(pair.env_from_unknown(), rules)
    held = {f.rule for f in maybe.errors}
    refused = [f.rule for f in unset.errors if f.rule not in held]
    said = {(f.rule, f.severity) for f in unset.findings}
    if not refused and {(f.rule, f.severity) for f in maybe.findings} == said and maybe.unchecked == unset.unchecked:
        return unset
    where = sorted({why.split(", which", 1)[0].replace("possibly set by the container's ", "")
                    for _, _, why in pair.env_from})
    names = sorted({name for _, name, _ in pair.env_from})
    refusing = sorted(set(refused))
    outcome = (f"with them unset {', '.join(refusing)} {'refuses' if len(refusing) == 1 else 'refuse'} the pair, "
               "which holds only if the source sets none of them: not checked" if refused else
               "the rules read them as unset (vLLM's defaults) and would judge the pair otherwise if the source sets them")
    warning = Finding(
        rule=ENV_FROM_UNSEEN, severity="warning", fields=_fields(pair, ("spec.engine.env",)),
        message=(f"The engines import variables from {', '.join(where)}, which {'is' if len(where) == 1 else 'are'} "
                 f"not in these files and may set {', '.join(names)}; {outcome}."),
        fix=_in_terms(pair, "Include the ConfigMap in the files checked (pdd check reads its data), or write those "
                      "variables in the container's env."),
        source=ENV_FROM_SOURCE)
    base = maybe if refused else unset
    return replace(base, findings=base.findings + [warning])


def _unverified(pair: PDPair, version: Version, candidate: str | None = None,
                unread: tuple[str, ...] | None = None) -> Finding:
    """The ``vllm-version-unverified`` warning for a ``version`` that is not a release the rules were built from
    (:data:`~pdd_operator.vllm.versions.KNOWN_RELEASES`): a release after 0.34.0 (0.35.0), a patch release no table
    knows (0.34.1), or one older than 0.9.0. The rules ran for ``version`` itself, so every
    version bound reads it as its place in the order: after 0.34.0 the newest known rules apply. For a release
    ``candidate`` (``0.35.0rc1``) ``version`` is the last release before it
    (:func:`~pdd_operator.vllm.versions.candidate_rules_version`), whose rules judged it."""
    if candidate is not None:
        return Finding(
            rule=VERSION_UNVERIFIED, severity="warning",
            fields=_fields(pair, ("spec.engine.vllmVersion", "spec.engine.image")),
            message=(f"vLLM {candidate} is a release candidate, unreleased code on its way to "
                     f"{fmt(parse_version(candidate))}: it was judged with the rules of {fmt(version)}, the last "
                     f"release before it; what {fmt(parse_version(candidate))} changed in vLLM's NIXL code may be in "
                     "it or not."),
            fix=_in_terms(pair, f"Use a vLLM release ({fmt(version)}, or {fmt(parse_version(candidate))} once "
                          "released), or review the deployment against the candidate's NIXL code by hand."),
            source="vllm-nixl-facts.md section 0; operator/pdd_operator/vllm/versions.py candidate_rules_version",
        )
    newer = version > NEWEST_RELEASE
    before = max((v for v in KNOWN_RELEASES if v < version), default=None)
    if newer:
        how = (f"it was judged with the newest rules, those of {fmt(NEWEST_RELEASE)}; vLLM's NIXL code after "
               f"{fmt(NEWEST_RELEASE)} may refuse what they pass or pass what they refuse (docs/vllm-source-audit.md "
               "lists what each release read changed)")
    elif unread is not None:
        how = ("its V0 KV connector pair was judged only by the rules read back to it (the connector's own, the model "
               "and GPU ones that hold on every release); "
               + (f"these were not read for it and were not run: {', '.join(unread)}" if unread else "no other rule "
                  "applies"))
    elif before is not None:
        how = f"it was judged as the releases around it (the nearest before is {fmt(before)})"
    else:
        how = f"it was judged with the rules of the oldest known release, {fmt(OLDEST_KNOWN)}"
    return Finding(
        rule=VERSION_UNVERIFIED, severity="warning",
        fields=_fields(pair, ("spec.engine.vllmVersion", "spec.engine.image")),
        message=(f"vLLM {fmt(version)} is not a release whose NIXL code these rules were written from "
                 f"({fmt(OLDEST_KNOWN)} to {fmt(NEWEST_RELEASE)}): {how}."),
        fix=_in_terms(pair, f"Use a vLLM release from {fmt(OLDEST_KNOWN)} to {fmt(NEWEST_RELEASE)}, or review the "
                      "deployment against that release's NIXL code by hand."),
        source="vllm-nixl-facts.md section 0; operator/pdd_operator/vllm/versions.py KNOWN_RELEASES",
    )


def _either_way(first: CompatReport, second: CompatReport, pair: PDPair) -> CompatReport:
    """One report for a pair of two ``kv_both`` engines whose roles nothing names (``PDPair.either_way``), from
    ``first`` (the pair as read: its first engine prefills) and ``second`` (:meth:`PDPair.mirrored`).

    Whichever engine the proxy makes prefill, a rule refusing both orientations refuses the deployment: its
    errors stand (as ``first`` words them). A rule refusing one orientation only is a warning, said to hold only
    with that engine as prefill, since the files do not say which it is. Warnings of either are kept once
    each; ``not_checked`` and ``unchecked`` are the first's, else the second's.
    """
    both = {f.rule for f in first.errors} & {f.rule for f in second.errors}
    findings = [f for f in first.errors if f.rule in both]
    # The pair's source is "<first engine> + <second engine>" (script line included), the first read as prefill.
    engines = pair.source.split(" + ")
    engines = engines if len(engines) == 2 else ["the first engine", "the second engine"]
    for report, where in ((first, engines[0]), (second, engines[1])):
        who = f"the engine at {where}"
        findings += [f.model_copy(update={"severity": "warning", "message": (
            f"Only if {who} is the prefill (both run kv_both and the files do not say which one prefills): "
            f"{f.message}")}) for f in report.errors if f.rule not in both]
    seen: set[tuple[str, str]] = set()
    for f in first.warnings + second.warnings:
        if (f.rule, f.message) not in seen:
            seen.add((f.rule, f.message))
            findings.append(f)
    return CompatReport(version=first.version, findings=findings,
                        not_evaluated=sorted(set(first.not_evaluated) | set(second.not_evaluated)),
                        not_checked=first.not_checked or second.not_checked,
                        unchecked=first.unchecked or second.unchecked, opaque=first.opaque or second.opaque)


def _runnable(pair: PDPair, rules: tuple[Rule, ...]) -> tuple[tuple[Rule, ...], str]:
    """``(rules to run, why the others are not checked)``: a rule that needs a flag's value (``Rule.needs``) is not
    run where a role's value of that flag is not in the manifest (``RoleConfig.opaque``); ``""`` when all run."""
    opaque = {(r.role, flag): why for r in pair.roles for flag, why in r.opaque if not _same_unknown(pair, flag)}
    for r in pair.roles:  # a variable where flags stand may set any flag (RoleConfig.loose)
        opaque.update({(r.role, f): r.loose for rule in rules for f in rule.needs
                       if r.loose and f.startswith("-") and (r.role, f) not in opaque})
    held = [rule for rule in rules if rule.check and any((r.role, f) in opaque for r in pair.roles for f in rule.needs)]
    if not held:
        return rules, ""
    flags = "; ".join(f"{role}'s {flag} is {why}" for (role, flag), why in opaque.items()
                      if any(flag in rule.needs for rule in held))
    why = (f"{_sentence(flags)}, so the rules that read it were not checked: {', '.join(r.id for r in held)}. "
           "Write the value in the manifest to have them checked.")
    return tuple(r for r in rules if r not in held), why


def _same_unknown(pair: PDPair, name: str) -> bool:
    """The two engines' values of ``name`` (a flag or env variable) are equal although neither is known, so a rule
    comparing them may run (it finds them equal): both are processes of one container and read it from the same
    variable of that container's environment (``$MODEL`` on both command lines, one ``valueFrom`` variable), or
    both import the one ``envFrom`` source that may set it (one ConfigMap or Secret of their namespace: it sets the
    same value in both, or sets it in neither)."""
    whys = [dict(r.opaque).get(name, "") for r in pair.roles]
    return whys[0] == whys[1] and (
        (pair.one_container and whys[0].startswith(("the value of $", "set from a valueFrom source")))
        or (whys[0].startswith("possibly set by the container's envFrom")
            and pair.prefill.namespace == pair.decode.namespace)
        or (name == "--model" and whys[0].startswith("computed by a command") and _same_setup(pair)))


def _same_setup(pair: PDPair) -> bool:
    """Both engines' ``--model`` is computed by their scripts, written alike (the same unknown), after the same
    setup (:func:`~pdd_operator.compat.pair.script_setup`: the same lines over the same volumes, image and env) in
    one namespace: the shell computes the same value in both (a loop over one PVC's model-cache snapshots)."""
    p, d = pair.prefill, pair.decode
    return bool(p.setup) and p.setup == d.setup and p.model == d.model and p.namespace == d.namespace


_PIN = "Set spec.engine.vllmVersion (e.g. 0.20.2) or use an image tag that starts with the version."


def _unknown_version(pair: PDPair, rules: tuple[Rule, ...]) -> tuple[list[Finding], list[str], str]:
    """The version-bounded rules for a pair whose vLLM version is unknown: ``(findings, not evaluated,
    unchecked)`` (:class:`CompatReport`), the findings ending with the ``vllm-version-unknown`` warning.

    Each rule is probed on every release (:mod:`~pdd_operator.compat.unknown_version`; from the floor on for
    a development build). When every probed release is refused by at least one rule, the pair fails whatever
    it runs: those rules' errors are reported, each with the releases it holds for. Otherwise the rules that
    refuse the pair on some releases make it unchecked, and rules that warn on some releases only are named
    as not evaluated; a rule that warns on every release is reported as a warning; a rule that reports
    nothing on any release does not apply and passes.

    A pair of a connector that a release dropped (P2pNcclConnector, registered 0.9.2-0.23.x:
    :func:`~pdd_operator.compat.unknown_version.connector_until`) is probed only on the releases that ship it: on
    the later ones the engine refuses the connector at startup, loudly, which the warning says. Where such a pair is
    judged by its connector's rules (a P2pNccl host install that pins no release:
    :func:`~pdd_operator.compat.rules.p2p_nccl_pair.p2p_nccl_unjudged`), a rule of that connector (``Rule.connector``)
    that refuses it on some of those releases only is a warning naming them, not "not checked" (nor an error beside
    a rule that refuses every release): the pair is run on some release of that window, and the warning says which
    fail.
    """
    floor = floor_of(pair)
    dropped = connector_until(pair)
    grid = probe_versions(rules, floor, dropped and dropped[0])
    probed = probe(pair, rules, grid)
    judged = p2p_nccl_unjudged(pair) is None
    refusing = [p for p in probed if p.refuses]
    certain = bool(grid) and all(any(v in p.refuses for p in refusing) for v in grid)
    # this connector's own rules refusing on some of its releases only: warnings naming them (below), unless the
    # pair fails on every release only with them counted (then errors, as any rule's)
    partial = [p for p in refusing if judged and p.rule.connector == P2P_NCCL and set(p.refuses) != set(grid)]
    rest = [p for p in refusing if p not in partial]
    if not certain or all(any(v in p.refuses for p in rest) for v in grid):
        refusing = rest
    else:
        partial = []
    lowest = fmt(grid[0]) if grid else fmt(OLDEST_KNOWN)
    served = pair.model.served_since
    by_flag = flag_floor_reason(pair, floor)
    on = f" before {fmt(dropped[0])}" if dropped else " on"  # the releases that ship the pair's connector
    scope = (f"every release from {fmt(floor)}{on} (the first whose model registry has this model's architecture: "
             "older releases refuse the model at startup)" if floor and floor == served
             else f"every release from {fmt(floor)}{on} ({by_flag})" if by_flag
             else f"every release from {fmt(floor)}{on} (taken as the line this development build comes after)" if floor
             else f"every release from {lowest} to {fmt(NEWEST_RELEASE)}")
    findings: list[Finding] = []
    skipped: list[str] = []
    unchecked_rules: list[str] = []
    for p in probed:
        if p.undecided:
            unchecked_rules.append(f"{p.rule.id} cannot be decided (vLLM {spans(p.undecided, grid)}): "
                                   f"{p.undecided_why}")
        if not (p.refuses or p.warns):
            continue
        everywhere = set(p.refuses or p.warns) == set(grid)
        if p in partial:
            where = spans(p.refuses, [*grid, dropped[0]] if dropped else grid)
            findings += [_finding(pair, p.rule, f"On vLLM {where} (the vLLM version is unknown; the "
                                  f"other releases that ship {P2P_NCCL} pass this rule): {_sentence(m)}",
                                  _in_terms(pair, f), "warning") for m, f, s in p.violations if s == "error"]
        elif certain and p.refuses or everywhere:
            where = scope if everywhere else f"vLLM {spans(p.refuses, grid)}"
            findings += [_finding(pair, p.rule, f"On {where} (the vLLM version is unknown): {_sentence(m)}",
                                  _in_terms(pair, f), s) for m, f, s in p.violations]
        else:
            skipped.append(p.rule.id)
    what = _sentence("; ".join(pair.notes) if pair.notes else "the vLLM version is not known for both roles")
    parts = [what + "."]
    if dropped:
        parts.append(f"It was judged on the releases that register {dropped[1]} (before {fmt(dropped[0])}): from "
                     f"{fmt(dropped[0])} on vLLM's connector factory no longer has it and the engine refuses it at "
                     "startup ('Unsupported connector type').")
    if floor is not None and floor[:2] >= NEWEST_RELEASE[:2]:
        parts.append(f"The rules were written from vLLM's NIXL code up to {fmt(NEWEST_RELEASE)}; this build may hold "
                     f"newer code and was judged with the newest rules (those of {fmt(NEWEST_RELEASE)}; "
                     "docs/vllm-source-audit.md lists what each release read changed).")
    unchecked = ""
    if certain:
        parts.append(f"Whichever release it is, this deployment fails: {scope} is refused by at least one of "
                     f"{', '.join(p.rule.id for p in refusing)}.")
    elif refusing:
        undecided = [p for p in refusing if p.rule.id in skipped]
        why = ("the vLLM version is unknown, and these rules refuse this deployment on some releases: "
               + ", ".join(f"{p.rule.id} (vLLM {spans(p.refuses, grid)})" for p in undecided) + ".")
        unchecked = f"{why} {_in_terms(pair, _PIN)}"
        parts.append(f"Not checked, because {why}")
    if unchecked_rules and not certain:
        parts.append("Not checked: " + " ".join(unchecked_rules))
        unchecked = " ".join(x for x in (unchecked, *unchecked_rules) if x)
    warn_only = [i for i in skipped if all(p.rule.id != i or not p.refuses for p in probed)]
    if warn_only:
        parts.append(f"These rules warn on some releases and were not evaluated: {', '.join(warn_only)}.")
    if not probed:
        parts.append(f"No version-dependent rule applies to this deployment on {scope}.")
    findings.append(Finding(
        rule=VERSION_UNKNOWN, severity="warning",
        fields=_fields(pair, ("spec.engine.vllmVersion", "spec.engine.image")),
        message=_script_message(pair, " ".join(parts)), fix=_in_terms(pair, _PIN),
        source="vllm-nixl-facts.md section 7 (version timeline)",
    ))
    return findings, skipped, unchecked


def model_config_unavailable(problem: str) -> Finding:
    """The :data:`MODEL_CONFIG_UNAVAILABLE` warning: the model's config.json from
    ``spec.model.configMapRef`` could not be used, for the reason ``problem`` (a sentence fragment
    naming the ConfigMap and key). The rules then ran on ``spec.model`` and the name tables, so the
    deployment is still checked, with less to go on.
    """
    return Finding(
        rule=MODEL_CONFIG_UNAVAILABLE, severity="warning", fields=["spec.model.configMapRef"],
        message=f"{problem}; rules that need the model's config.json used spec.model and the name tables instead.",
        fix="Create the ConfigMap with the model's config.json under that key, or fix spec.model.configMapRef.",
        source="PDDeployment API (spec.model.configMapRef)",
    )


def model_config_from_configmap(text: str | None, name: str, key: str) -> tuple[dict | None, Finding | None]:
    """The model's config.json from the value of key ``key`` of ConfigMap ``name`` (``None``: the
    ConfigMap or key does not exist), as the operator and ``pdd check`` read ``spec.model.configMapRef``.

    Returns ``(config, None)``, or ``(None, model_config_unavailable(...))`` naming the ConfigMap, the
    key and what is wrong (:func:`~pdd_operator.vllm.model_config.parse_config_json`). Never raises.
    """
    if text is None:
        return None, model_config_unavailable(f"ConfigMap {name!r} or its key {key!r} does not exist")
    try:
        return parse_config_json(text), None
    except ModelConfigError as exc:
        return None, model_config_unavailable(f"ConfigMap {name!r} key {key!r}: {exc}")
