"""Version-bounded rules for a pair whose vLLM version is unknown: on which releases each would refuse it.

A rule with ``since``/``until`` describes the code of some vLLM releases only. When the engines' version is
unknown (an image tagged ``latest`` or ``nightly-<sha>``, no tag, a digest, a source build), :func:`probe`
runs each such rule's check as if both engines ran each release of :func:`probe_versions` (every release
line the rules were built from, and each rule bound), and records where it reports an error or a warning.
A rule that reports nothing on any release does not apply to this pair whatever its version; one that
refuses it on some releases is what the engine cannot be cleared of without the version.

Releases before :data:`~pdd_operator.vllm.versions.OLDEST_KNOWN` (0.9.0) are not probed: they ship no
NixlConnector at all, so an engine naming it fails at startup with an unknown connector, loudly.

For a development build the floor is the release line it comes after
(:func:`~pdd_operator.vllm.versions.dev_build_floor`): only releases from there on are probed, so a rule
that holds for every version from the floor on is judged as for a release, on that assumption.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules import Rule, Violation
from pdd_operator.compat.rules.base import NOT_CHECKED, run_check
from pdd_operator.vllm.versions import NEWEST_KNOWN, OLDEST_KNOWN, Version, dev_build_floor, fmt


def probe_versions(rules: tuple[Rule, ...], floor: Version | None = None,
                   until: Version | None = None) -> list[Version]:
    """The releases :func:`probe` tries, ascending: ``0.M.0`` for every release line from :data:`OLDEST_KNOWN`
    to :data:`NEWEST_KNOWN`, each rule's ``since`` and ``until`` and the release before each ``until``
    (``0.27.0`` -> ``0.26.99``, ``0.11.1`` -> ``0.11.0``), all inside the known range, ``>= floor``
    (a floor past :data:`NEWEST_KNOWN` gives just that release: newer code is judged as the newest known) and
    ``< until`` where given (the first release whose factory no longer registers the pair's connector:
    :func:`connector_until`). Every rule's window, and every version threshold the checks compare with (release
    lines), then holds at least one probe."""
    points: set[Version] = {(0, minor, 0) for minor in range(OLDEST_KNOWN[1], NEWEST_KNOWN[1] + 1)}
    points.add(NEWEST_KNOWN)
    for r in rules:
        for bound in (r.since, r.until):
            if bound is not None:
                points.add(bound)
        if r.until is not None:
            a, b, c = r.until
            points.add((a, b, c - 1) if c else (a, b - 1, 99))
    low = min(max(OLDEST_KNOWN, floor or OLDEST_KNOWN), NEWEST_KNOWN)  # a build after the newest known line: judged as it
    return sorted(v for v in points if low <= v <= NEWEST_KNOWN and (until is None or v < until))


def floor_of(pair: PDPair) -> Version | None:
    """The oldest release both engines may run: each role's known version, or the release line its
    development build comes after, and no older than the first release whose model registry has the model's
    architecture (:attr:`~pdd_operator.vllm.architectures.ModelTraits.served_since`: older engines refuse the
    model at startup); ``None`` when neither bounds it."""
    floors = [_role_floor(r) for r in pair.roles]
    build = min(floors) if all(f is not None for f in floors) else None  # type: ignore[type-var]
    served = pair.model.served_since
    return max(build, served) if build is not None and served is not None else build or served


def _role_floor(r) -> Version | None:
    """One role's floor: its known version, or the latest of the release line its development build comes after,
    the oldest release whose parser has every flag it gives (:attr:`RoleConfig.flag_floor`) and the first release
    whose connector factory registers its KV connector (:func:`connector_floor`)."""
    connector = connector_floor(r)
    found = [f for f in (r.version or dev_build_floor(r.version_text), r.flag_floor and r.flag_floor[0],
                         connector and connector[0]) if f]
    return max(found) if found else None


def connector_floor(r) -> tuple[Version, str] | None:
    """``(release, name)``: the first vLLM release whose connector factory registers the KV connector the role names
    (its ``kv_connector``, or the MultiConnector child its transfer runs through), from the registries read
    (:data:`~pdd_operator.compat.rules.connector_registry.REGISTERED`: ``MooncakeConnector`` 0.13.0,
    ``MoRIIOConnector`` 0.14.0, ...; factory.py of each release, where an older one raises ``ValueError("Unsupported
    connector type")`` when the engine builds its connector). ``None`` for a connector every release read registers,
    one loaded from ``kv_connector_module_path`` (not the factory's registry), or none."""
    if not r.connector or r.kv_transfer.get("kv_connector_module_path") \
            or r.kv_transfer_written.get("kv_connector_module_path"):
        return None
    first = _shipped(r.wrapper or r.connector)[0]
    child = _shipped(r.connector)[0] if r.wrapper else None
    found = [v for v in (first, child) if v is not None]
    return (max(found), r.connector if child and child == max(found) else (r.wrapper or r.connector)) if found else None


def _shipped(name: str) -> tuple[Version | None, Version | None]:
    """``(first, gone)``: the first release whose connector factory registers connector ``name`` and the first that
    no longer does (``None`` where every release read does): the factory's registry
    (:data:`~pdd_operator.compat.rules.connector_registry.REGISTERED`), and ``P2pNcclConnector`` 0.9.2 up to 0.24.0
    (:data:`~pdd_operator.compat.rules.p2p_nccl.P2P_NCCL_SINCE` .. ``P2P_NCCL_UNTIL``: factory.py of the 0.9.2 and
    0.23.0 sdists register it, 0.9.1's and 0.24.0's do not)."""
    from pdd_operator.compat.rules.connector_registry import REGISTERED
    from pdd_operator.compat.rules.p2p_nccl import P2P_NCCL_SINCE, P2P_NCCL_UNTIL

    if name == "P2pNcclConnector":
        return P2P_NCCL_SINCE, P2P_NCCL_UNTIL
    return REGISTERED.get(name, (None, None))


def connector_until(pair: PDPair) -> tuple[Version, str] | None:
    """``(release, name)``: the first vLLM release whose connector factory no longer registers a KV connector a role
    of ``pair`` names through vLLM's own registry (no ``kv_connector_module_path``): ``(0.24.0, "P2pNcclConnector")``
    (:func:`_shipped`); on that release and later the engine refuses the connector when it builds it ("Unsupported
    connector type"), so an unknown release is probed only before it. ``None`` where no role's connector was
    dropped (``SharedStorageConnector``, renamed ``ExampleConnector`` in 0.13.0, is ``kv-connector-unregistered``'s to
    judge on each release)."""
    gone = [(until, r.connector) for r in pair.roles
            if r.connector and not r.wrapper and not r.kv_transfer.get("kv_connector_module_path")
            and not r.kv_transfer_written.get("kv_connector_module_path")
            and (until := _shipped(r.connector)[1]) is not None and r.connector != "SharedStorageConnector"]
    return min(gone) if gone else None


def flag_floor_reason(pair: PDPair, floor: Version | None) -> str | None:
    """Why ``floor`` bounds the pair when a flag or the KV connector sets it (a role's :attr:`RoleConfig.flag_floor`,
    or :func:`connector_floor`, equal to it): ``"the first that may have --kda-prefill-backend"``, ``"the first whose
    connector factory registers MoRIIOConnector"``; else ``None``."""
    for r in pair.roles:
        if floor is not None and r.flag_floor and r.flag_floor[0] == floor:
            return f"the first that may have {r.flag_floor[1]}: older releases refuse the flag at startup"
    for r in pair.roles:
        if floor is not None and (connector := connector_floor(r)) and connector[0] == floor:
            return (f"the first whose connector factory registers {connector[1]}: older releases refuse the connector "
                    "at startup")
    return None


def at_version(pair: PDPair, version: Version) -> PDPair:
    """``pair`` with both engines running vLLM ``version`` (everything else as it is)."""
    return dataclasses.replace(pair, prefill=dataclasses.replace(pair.prefill, version=version),
                               decode=dataclasses.replace(pair.decode, version=version))


@dataclass(frozen=True)
class Probed:
    """What one version-bounded rule reports for a pair across :func:`probe_versions`.

    Attributes:
        rule: the rule.
        refuses: the probed releases where it reports an error (ascending).
        warns: the probed releases where it reports only warnings.
        version: the lowest release where it reports an error (else a warning; else where it cannot decide).
        violations: what it reports there, each ``(message, fix, severity)``.
        undecided: the probed releases where it cannot decide the pair (a ``NOT_CHECKED`` violation,
            :data:`~pdd_operator.compat.rules.base.NOT_CHECKED`).
        undecided_why: the first such violation's message and fix.
    """

    rule: Rule
    refuses: tuple[Version, ...]
    warns: tuple[Version, ...]
    version: Version
    violations: tuple[tuple[str, str, str], ...]
    undecided: tuple[Version, ...] = ()
    undecided_why: str = ""


def probe(pair: PDPair, rules: tuple[Rule, ...], grid: list[Version], bounded_only: bool = True) -> list[Probed]:
    """Run every version-bounded rule of ``rules`` (every rule of them with ``bounded_only`` false: an unbounded rule
    may read the release itself, as ``kv-connector-unregistered`` reads each release's registry) at each release of
    ``grid`` where its bounds hold; the rules that report something on at least one, in ``rules`` order. Pure; never
    raises for a pair the rules accept."""
    out = []
    pairs = {version: at_version(pair, version) for version in grid}  # built once: replace() is the costly part
    for rule in rules:
        if rule.check is None or (bounded_only and not rule.version_bounded):
            continue
        refuses, warns, undecided = [], [], []
        why = ""
        seen: dict[Version, tuple[tuple[str, str, str], ...]] = {}
        for version in grid:
            if not rule.applies_to(version):
                continue
            found: list[Violation] = run_check(rule, pairs[version])
            violations = tuple((v[0], v[1], v[2] if len(v) > 2 else rule.severity) for v in found)
            if any(s == NOT_CHECKED for *_, s in violations):
                undecided.append(version)
                why = why or next(f"{m} {f}" for m, f, s in violations if s == NOT_CHECKED)
                violations = tuple(v for v in violations if v[2] != NOT_CHECKED)
            if not violations:
                continue
            seen[version] = violations
            (refuses if any(s == "error" for *_, s in violations) else warns).append(version)
        if seen or undecided:
            first = refuses[0] if refuses else warns[0] if warns else undecided[0]
            out.append(Probed(rule, tuple(refuses), tuple(warns), first, seen.get(first, ()), tuple(undecided), why))
    return out


def spans(versions: tuple[Version, ...] | list[Version], grid: list[Version]) -> str:
    """``versions`` (a subset of ``grid``) as ranges of releases: ``0.18.0 <= v < 0.20.0, >= 0.22.0``."""
    runs: list[list[Version]] = []
    index = {v: i for i, v in enumerate(grid)}
    for v in versions:
        if runs and index[v] == index[runs[-1][-1]] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    parts = []
    for run in runs:
        after = index[run[-1]] + 1
        parts.append(f">= {fmt(run[0])}" if after >= len(grid) else f"{fmt(run[0])} <= v < {fmt(grid[after])}")
    return ", ".join(parts)
