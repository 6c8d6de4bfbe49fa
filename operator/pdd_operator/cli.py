"""The ``pdd`` command: ``run`` (operator), ``render`` (children of a spec), ``check`` (rules), ``crd``,
``rbac`` (the operator's permissions), ``router`` (the P/D router)."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import yaml
from pydantic import ValidationError

from pdd_operator.api.constants import API_VERSION, GROUP, KIND
from pdd_operator.api.messages import SPEC_INVALID_RULE, finding_text, invalid_spec_findings
from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.compat.engine import (
    CompatReport,
    evaluate,
    evaluate_alone,
    model_config_from_configmap,
    unreadable_connector_alone,
)
from pdd_operator.controller.rbac import WEBHOOK_CONFIGURATION_MODES
from pdd_operator.render.admission import admission_findings_of
from pdd_operator.render.workloads import Owner, render_children
from pdd_operator.vllm.model_config import MAX_CONFIG_JSON_BYTES, ModelConfigError, parse_config_json


class InputError(Exception):
    """A manifest that cannot be used, with a message that names the file, object and field."""


def load_pdds(path: str) -> Iterator[tuple[dict, PDDeploymentSpec]]:
    """Yield ``(metadata, spec)`` for every PDDeployment document of a (multi-document) YAML file.

    ``-`` reads standard input. Documents of other kinds are skipped. Raises :class:`InputError` for
    unreadable YAML or a spec the API refuses, naming each bad field.
    """
    for doc in _load_docs(path):
        if doc.get("kind") == KIND:
            meta = doc.get("metadata") or {}
            try:
                spec = _spec_of(path, doc)
            except InvalidSpec as exc:
                lines = [f"  {finding_text(f)}" for f in exc.findings]
                raise InputError(f"{path}: {KIND} {meta.get('name', '?')}: invalid spec ({len(lines)} field(s)):\n"
                                 + "\n".join(lines)) from exc
            yield meta, spec


def cmd_render(args: argparse.Namespace) -> int:
    """Print the child objects the operator would create, as multi-document YAML."""
    out = []
    for meta, spec in load_pdds(args.file):
        report = evaluate(spec)
        if not report.compatible and not args.force:
            for f in report.errors:
                print(f"error: {meta.get('name')}: {finding_text(f)}", file=sys.stderr)
            return 1
        owner = Owner(name=meta.get("name", "example"), namespace=args.namespace or meta.get("namespace", "default"))
        out.extend(render_children(owner, spec))
    sys.stdout.write(yaml.safe_dump_all(out, sort_keys=False, width=120))
    return 0


def _load_docs(path: str) -> list[dict]:
    """The mappings of the YAML (or JSON) file ``path`` (``-``: stdin), with each escaped UTF-16
    surrogate pair (``"\\ud83e\\udd99"``, as JSON encoders write a character outside the BMP) read as
    the one character it encodes, as JSON parsers do (PyYAML keeps the two halves). Raises
    :class:`InputError` for text that is not YAML, or a lone surrogate (half a pair: no Unicode text;
    the apiserver's JSON decoder stores U+FFFD in its place, Go's YAML decoder refuses it)."""
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    try:
        docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {exc}") from exc
    try:
        return [_joined_surrogates(doc) for doc in docs]
    except _LoneSurrogate as exc:
        raise InputError(f"{path}: {exc.at or 'a value'} holds a lone UTF-16 surrogate escape (half of a "
                         "\\uD83D\\uDE00 pair), which is not Unicode text. Fix: write the character itself, or "
                         "both halves of its surrogate pair.") from None


class _LoneSurrogate(ValueError):
    def __init__(self, at: str) -> None:
        super().__init__(at)
        self.at = at


def _joined_surrogates(value, at: str = ""):
    """``value`` with every string's surrogate pairs joined into characters; raises
    :class:`_LoneSurrogate` with the path (``spec.model.servedModelName``) of a key or string holding
    a surrogate that has no partner."""
    if isinstance(value, str):
        if not any("\ud800" <= c <= "\udfff" for c in value):
            return value
        try:
            return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
        except UnicodeDecodeError:
            raise _LoneSurrogate(at) from None
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            here = f"{at}.{key}" if at else str(key)
            out[_joined_surrogates(key, here) if isinstance(key, str) else key] = _joined_surrogates(item, here)
        return out
    if isinstance(value, list):
        return [_joined_surrogates(item, f"{at}[{i}]") for i, item in enumerate(value)]
    return value


def _spec_of(path: str, doc: dict) -> PDDeploymentSpec:
    """The spec of the PDDeployment ``doc`` of file ``path``. Raises :class:`InputError` for another apiVersion (the
    object is not one of this API's) and :class:`InvalidSpec` for a spec the API models refuse."""
    meta = doc.get("metadata") or {}
    if doc.get("apiVersion") != API_VERSION:
        raise InputError(f"{path}: {KIND} {meta.get('name', '?')} must have apiVersion {API_VERSION}, "
                         f"got {doc.get('apiVersion')!r}")
    try:
        return PDDeploymentSpec.model_validate(doc.get("spec") or {})
    except ValidationError as exc:
        raise InvalidSpec(invalid_spec_findings(exc)) from exc


def _stated_version(doc: dict) -> str:
    """The vLLM version a PDDeployment whose spec was refused states (``spec.engine.vllmVersion``, else its image tag),
    for the report's ``vllmVersion``; ``"unknown"`` when neither names one."""
    from pdd_operator.vllm.versions import fmt, resolve_version

    engine = (doc.get("spec") or {}).get("engine") if isinstance(doc.get("spec"), dict) else None
    engine = engine if isinstance(engine, dict) else {}
    explicit, image = engine.get("vllmVersion"), engine.get("image")
    if not isinstance(image, str):
        image = ""
    try:
        version, _ = resolve_version(explicit if isinstance(explicit, str) else None, image)
    except ValueError:
        return "unknown"
    return fmt(version)


class InvalidSpec(ValueError):
    """A PDDeployment whose spec the API models refuse: one ``spec-invalid`` error finding per refused field
    (:func:`~pdd_operator.api.messages.invalid_spec_findings`). ``pdd check`` reports them as the object's findings
    (exit 1), as the admission webhook refuses the object and the operator's status names them, not as input it
    could not read (``pdd render`` still stops on it)."""

    def __init__(self, findings: list) -> None:
        super().__init__("; ".join(finding_text(f) for f in findings))
        self.findings = findings


def _read_model_config(path: str) -> dict:
    """``--model-config``: the file's config.json (:func:`parse_config_json`); :class:`InputError` if unusable."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_JSON_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror}") from exc
    try:
        return parse_config_json(data)
    except ModelConfigError as exc:
        raise InputError(f"{path}: {exc}") from exc


def cmd_check(args: argparse.Namespace) -> int:
    """Print the compatibility findings of each P/D deployment in the files.

    PDDeployments are checked as the operator and its webhook would: the compatibility rules and
    what the apiserver would refuse in the objects rendered from them
    (:func:`~pdd_operator.render.admission.admission_findings`); other manifests (Deployments, StatefulSets,
    LeaderWorkerSets, KServe LLMInferenceServices, Dynamo DynamoGraphDeployments, ...) are searched
    for vLLM engines with a KV connector, paired prefill to decode, and checked with the same rules.
    The vllm serve lines of a shell or Slurm batch script are read as engines too
    (:mod:`~pdd_operator.compat.script_inputs`), and so are the commands of a Markdown file given itself (an issue's
    text, a README: :func:`~pdd_operator.compat.markdown_inputs.markdown_commands`), the post-images of a diff or patch's
    hunks (a ``.diff`` / ``.patch`` file, a Markdown diff block: :func:`_diff_input`), and so are the services of Docker
    Compose files that run vLLM (:mod:`~pdd_operator.compat.compose_inputs`: one document per host, the documents of
    every file one topology);
    a file that is no manifest but configures P/D in a way not read (a
    systemd unit, a Nomad job, a script whose engines cannot be found) is reported as not checked, with the reason,
    and so is a kustomization whose build the files do not show (:mod:`~pdd_operator.compat.kustomize`: the reason
    names ``kubectl kustomize <folder> | pdd check -``), and a Helm chart folder (:mod:`~pdd_operator.compat.helm_charts`:
    the reason names ``helm template <release> <chart> [-f <values file>] | pdd check -``).
    A file or object that cannot be read is reported and the others are still checked; a
    ``--model-config`` file that is not a usable config.json stops the check (exit 2). A ConfigMap
    of the files whose config.json is unusable gives the ``model-config-unavailable`` warning, as
    in the operator. Findings print as ``[rule-id] message Fix: fix``, as in the webhook and status.
    Exit codes: see :data:`CHECK_EXIT_CODES`.
    """
    from pdd_operator.compat.config_files import inline_config_files
    from pdd_operator.compat.config_refs import config_maps_of, inline_config_map_refs, secrets_of
    from pdd_operator.compat.dynamo_roles import flagless_dynamo_graph
    from pdd_operator.compat.helm_charts import CHART_FILE, chart_record, is_chart_metadata, is_json_schema
    from pdd_operator.compat.helm_release import with_values_from
    from pdd_operator.compat.image_builds import (
        builds_of,
        commandless_images,
        lone_dockerfile,
        makefile_recipes,
        with_image_builds,
    )
    from pdd_operator.compat.kserve_merge import merge_base_refs, with_kserve_release
    from pdd_operator.compat.manifests import (
        ENCODE,
        encoder_alone,
        lone_pair,
        pair_engines,
        with_model_config,
        with_vllm_version,
    )
    from pdd_operator.compat.mounted_scripts import inline_mounted_scripts
    from pdd_operator.compat.service_links import service_links_of, with_service_links
    from pdd_operator.compat.shapes import field_type_finding, quoted_scalars, shape_problems, without_nulls
    from pdd_operator.vllm.versions import fmt

    forced_config = _read_model_config(args.model_config) if args.model_config else None
    results: list[dict] = []
    reports: list[CompatReport] = []
    input_errors: list[str] = []
    engines = []
    unreadable: list[dict] = []
    skipped: list[dict] = []
    all_docs: dict[str, list[dict]] = {}
    paths, folder_errors = _input_paths(args.files)
    input_errors += folder_errors
    build_files, paths, link_files = _image_build_files(paths, frozenset(args.files))
    builds = builds_of({**link_files, **build_files})
    for path in paths:
        if _is_markdown(path):  # a README named by itself: its commands (code blocks, one-command steps)
            all_docs[path] = []
            _markdown_input(path, engines, unreadable)
            _diff_input(path, all_docs, engines, unreadable)  # and its diff blocks' post-images
            continue
        if _is_diff(path) and _diff_input(path, all_docs, engines, unreadable):  # a patch: its post-images
            continue
        if path in build_files:  # a Makefile that runs P/D engines: its recipes, read as a launcher script
            if not _read_script(path, engines, unreadable, makefile_recipes(build_files[path])):
                unreadable.append({"object": f"{path} (Makefile)", "reason": (
                    "it is a Makefile whose recipes configure prefill/decode KV transfer, but no engine start was "
                    "found in them (targets calling other targets, variables set outside it): run the commands it "
                    "runs as a script, or give the manifests it applies")})
            all_docs[path] = []
            continue
        if path != "-" and Path(path).name == CHART_FILE and is_chart_metadata(_read_text(path) or ""):
            all_docs[path] = []  # a Helm chart: not checked until rendered, naming the render command
            unreadable.append(chart_record(path))
            continue
        if _is_notebook(path):  # JSON that YAML would take for a values file: its code cells are the input
            all_docs[path] = []
            if (text_record := _text_input(path)) is not None and not _read_script(path, engines, unreadable):
                unreadable.append(text_record)
            continue
        try:
            all_docs[path] = _load_docs(path)
        except (InputError, OSError) as exc:
            text_record = _text_input(path) if isinstance(exc.__cause__, yaml.YAMLError) else None
            if text_record is not None and _read_script(path, engines, unreadable):  # its vllm serve lines, read
                all_docs[path] = []
                continue
            if text_record is not None:  # a script or unit file that configures P/D: not checked, not unreadable
                unreadable.append(text_record)
                continue
            if isinstance(exc.__cause__, yaml.YAMLError) and _runs_without_pd(path):  # aggregated engines only
                all_docs[path] = []
                continue
            input_errors.append(str(exc) if isinstance(exc, InputError) else f"{path}: {exc.strerror}")
            continue
        if not all_docs[path] and (text_record := _text_input(path)) is not None:  # a script that parsed as a string
            if not _read_script(path, engines, unreadable):
                unreadable.append(text_record)
    notes: list[str] = []
    images = [i for docs in all_docs.values() for d in docs if d.get("kind") != KIND for i in commandless_images(d)]
    if (lone := lone_dockerfile(build_files, builds, images)) is not None:  # the one Dockerfile, its tag unnamed
        builds = {**builds, lone[0]: lone[1]}
        notes.append(f"{lone[0]} is read as built from {lone[1].path}, the only Dockerfile in the files (nothing "
                     "in them names the tag it builds: no Makefile, Compose build, script, README, Skaffold, Tilt, "
                     "DevSpace or GitHub Actions build of it); if the image is built elsewhere, give its Dockerfile "
                     "or write the container's command")
    _read_compose(all_docs, engines, unreadable)
    _read_launcher_configs(all_docs, engines, unreadable)
    all_docs = merge_base_refs(with_kserve_release(all_docs))  # a KServe service over the configs it names
    config_maps = config_maps_of([d for docs in all_docs.values() for d in docs])
    secrets = secrets_of([d for docs in all_docs.values() for d in docs])
    links = service_links_of([d for docs in all_docs.values() for d in docs])  # the kubelet's service variables
    given = frozenset(Path(p).resolve() for p in all_docs if p != "-")
    for path, docs in all_docs.items():
        for doc in docs:
            if is_json_schema(doc):  # a chart's values.schema.json: it describes values, deploys nothing
                continue
            if doc.get("kind") != KIND:
                doc = without_nulls(doc)  # a null field is an absent one to the apiserver
                doc = with_image_builds(doc, builds, _read_text)  # the user's image, from its Dockerfile here
                if problems := shape_problems(doc):  # the apiserver refuses it: manifest-field-type-invalid
                    typed = field_type_finding(_origin(doc), problems)
                    reports.append(CompatReport(version="unknown", findings=[typed]))
                    results.append({"file": path, "object": _origin(doc), "vllmVersion": "unknown",
                                    "compatible": False, "findings": [typed.wire()]})
                    if (quoted := quoted_scalars(doc, problems)) is None:  # a list or mapping wrong: nothing to read
                        skipped.append({"object": _origin(doc), "reason": (
                            "fields the checker reads have a type the Kubernetes API refuses "
                            f"({', '.join(p.where for p in problems)}; see manifest-field-type-invalid), so its "
                            "engines are not read")})
                        continue
                    doc = quoted  # booleans and numbers where strings are wanted: judged as quoting makes them
                doc = with_service_links(doc, links)  # which of them its pods get, where the files tell
                inlined = inline_mounted_scripts(inline_config_map_refs(doc, config_maps, secrets), config_maps)
                inlined = inline_config_files(inlined, config_maps)  # vllm serve --config <a ConfigMap's file>
                inlined = with_values_from(inlined, config_maps, secrets)  # a Flux HelmRelease's values in the files
                found, refused = _scan_foreign(inlined, unreadable, path, given)
                versions = sorted({fmt(e.config.version) for e in found if e.config.version is not None})
                kept, judged = flagless_dynamo_graph(inlined, found)
                if judged:  # a Dynamo graph with no prefill worker: the warning is its verdict, nothing to pair,
                    # but what stops one of its workers on its own still stops it
                    dropped = [e for e in found if e.role in ("prefill", "decode") and all(e is not k for k in kept)]
                    judged = judged + [f for e in dropped for f in evaluate_alone(lone_pair(e), e.role)]
                    report = CompatReport(version=", ".join(versions) or "unknown", findings=judged)
                    reports.append(report)
                    results.append({"file": path, "object": _origin(doc), "vllmVersion": report.version,
                                    "compatible": report.compatible, "findings": [f.wire() for f in judged]})
                found = kept
                engines.extend(found)
                for u in refused:  # not checked, yet refused by vLLM for what the manifest does show
                    report = CompatReport(version=u.version, findings=list(u.findings))
                    reports.append(report)
                    results.append({"file": path, "object": u.where, "vllmVersion": report.version,
                                    "compatible": report.compatible, "findings": [f.wire() for f in report.findings]})
                continue
            meta = doc.get("metadata") or {}
            try:
                spec = _spec_of(path, doc)
            except InputError as exc:
                input_errors.append(str(exc))
                continue
            except InvalidSpec as exc:  # refused as the webhook refuses it: [spec-invalid] per field
                report = CompatReport(version=_stated_version(doc), findings=exc.findings)
                reports.append(report)
                results.append({"file": path, "object": f"{KIND}/{meta.get('name')}",
                                "namespace": meta.get("namespace", "default"), "vllmVersion": report.version,
                                "compatible": False, "findings": [f.wire() for f in exc.findings]})
                continue
            model_config, problem = forced_config, None
            ref = spec.model.config_map_ref
            if model_config is None and ref is not None:
                raw = config_maps.get((meta.get("namespace", "default"), ref.name), {}).get(ref.key)
                if raw is not None:  # a ConfigMap not among the files may still exist in the cluster
                    model_config, problem = model_config_from_configmap(raw, ref.name, ref.key)
            report = evaluate(spec, model_config=model_config)
            report = replace(report, findings=[*admission_findings_of(doc, spec, model_config), *report.findings,
                                               *([problem] if problem is not None else [])])
            if report.unchecked:
                skipped.append({"object": f"{KIND}/{meta.get('name')}", "reason": report.unchecked})
            reports.append(report)
            results.append({
                "file": path, "object": f"{KIND}/{meta.get('name')}", "namespace": meta.get("namespace", "default"),
                "vllmVersion": report.version, "compatible": report.compatible,
                "findings": [f.wire() for f in report.findings],
            })
    pairs, unpaired = pair_engines(engines)
    skipped += unreadable
    for pair, _, _ in pairs:
        if forced_config is not None:
            pair = with_model_config(pair, forced_config)
        if args.vllm_version and pair.version is None:
            try:
                pair = with_vllm_version(pair, args.vllm_version)
            except ValueError as exc:
                input_errors.append(str(exc))
                break
        report = evaluate(pair)
        if report.not_checked:
            skipped.append({"object": pair.source, "reason": report.not_checked})
            continue
        if report.unchecked:
            skipped.append({"object": pair.source, "reason": report.unchecked})
        reports.append(report)
        results.append({
            "file": ", ".join(all_docs), "object": pair.source, "pairedBy": pair.paired_by,
            "vllmVersion": report.version, "compatible": report.compatible,
            "findings": [f.wire() for f in report.findings],
        })
    skipped += [{"object": u.engine.where, "reason": u.reason} for u in unpaired if not u.aggregated]
    aggregated = [{"object": u.engine.where, "reason": u.reason} for u in unpaired if u.aggregated]
    for e in engines:  # an E/P/D encode worker: never paired, but what stops it at startup is said
        if e.role == ENCODE and (alone := evaluate_alone(encoder_alone(e), ENCODE)):
            results.append({"file": ", ".join(all_docs), "object": e.where, "pairedBy": "",
                            "vllmVersion": e.config.version and fmt(e.config.version) or "unknown",
                            "compatible": False, "findings": [f.wire() for f in alone]})
            reports.append(CompatReport(version=results[-1]["vllmVersion"], findings=alone))
    for u in unpaired:  # an engine with no counterpart: what stops it on its own still stops it
        if (alone := evaluate_alone(lone_pair(u.engine), u.engine.role) if u.engine.role in ("prefill", "decode")
                else unreadable_connector_alone(lone_pair(u.engine)) if not u.aggregated else []):
            results.append({"file": ", ".join(all_docs), "object": u.engine.where, "pairedBy": "",
                            "vllmVersion": u.engine.config.version and fmt(u.engine.config.version) or "unknown",
                            "compatible": False, "findings": [f.wire() for f in alone]})
            reports.append(CompatReport(version=results[-1]["vllmVersion"], findings=alone))
    failed = any(not r["compatible"] for r in results)
    if args.output == "json":
        print(json.dumps({"results": results, "notChecked": skipped, "inputErrors": input_errors,
                          **({"aggregated": aggregated} if aggregated else {}), **({"notes": notes} if notes else {})},
                         indent=2))
    else:
        for r, report in zip(results, reports, strict=True):
            invalid = any(f.rule == SPEC_INVALID_RULE for f in report.findings)  # the API refuses it: no rule ran
            verdict = "compatible" if r["compatible"] else "INVALID" if invalid else "INCOMPATIBLE"
            print(f"{r['object']} (vLLM {r['vllmVersion']}): {verdict}")
            if r.get("pairedBy"):
                print(f"  paired because {r['pairedBy']}")
            for f in report.findings:
                print(f"  {f.severity}: {finding_text(f)}")
        for s_ in skipped:
            print(f"not checked: {s_['object']}: because {s_['reason']}")
        for a in aggregated:
            print(f"not prefill/decode: {a['object']}: {a['reason']}")
        for note in notes:
            print(f"note: {note}")
        for err in input_errors:
            print(f"error: {err}", file=sys.stderr)
        if not results and not skipped and not input_errors:
            print(NOTHING_TO_CHECK + ("" if args.allow_empty else " (exit 4; --allow-empty makes this 0)"),
                  file=sys.stdout if args.allow_empty else sys.stderr)
    empty = not results and not skipped and not args.allow_empty
    return _check_exit_code(input_errors, failed, bool(skipped) and not args.allow_unchecked, empty)


#: What ``pdd check`` says of files in which it found nothing to check.
NOTHING_TO_CHECK = ("nothing to check: no PDDeployment and no vLLM engine of a prefill/decode topology (a KV connector, "
                    "a P/D role) found in the files")


#: ``pdd check`` exit codes, most severe first.
CHECK_EXIT_CODES = {
    2: "a file or object could not be read",
    1: "a deployment is incompatible (an error finding)",
    3: "a prefill/decode engine or pair was not checked (see 'not checked'; --allow-unchecked makes this 0)",
    4: "nothing to check: no PDDeployment and no prefill/decode vLLM engine in the files (a wrong path or glob, "
       "or a format the checker does not read; --allow-empty makes this 0)",
    0: "every deployment found was checked and is compatible (warnings allowed)",
}


def _check_exit_code(input_errors: list[str], failed: bool, unchecked: bool, empty: bool = False) -> int:
    """The exit code of :data:`CHECK_EXIT_CODES` for a check's outcome, the most severe that applies.

    ``empty``: nothing was found to check and ``--allow-empty`` was not given; a CI gate run on the wrong files or
    on a manifest format it cannot read must not pass in silence."""
    if input_errors:
        return 2
    if failed:
        return 1
    if unchecked:
        return 3
    return 4 if empty else 0


#: File name suffixes read from a folder given to ``pdd check`` (besides Dockerfiles and Makefiles, by name): manifests
#: and values (YAML, JSON) and launch scripts (shell, Slurm). Other files of a repository (sources, docs, env files,
#: which Compose reads where its file names them) are not inputs of their own.
_FOLDER_SUFFIXES = (".yaml", ".yml", ".json", ".sh", ".bash", ".sbatch", ".slurm")


def _input_paths(given: list[str]) -> tuple[list[str], list[str]]:
    """The files ``pdd check`` reads for the paths ``given``, and input errors: a folder stands for the files under it
    (sorted, hidden ones and those in hidden folders left out) that are manifests, scripts
    (:data:`_FOLDER_SUFFIXES`), Dockerfiles or Makefiles
    (:func:`~pdd_operator.compat.image_builds.is_dockerfile`, :func:`~pdd_operator.compat.image_builds.is_makefile`),
    files that tie image tags to Dockerfiles (:func:`~pdd_operator.compat.image_builds.is_build_link_file`: READMEs,
    Tiltfiles, Skaffold and DevSpace configs, and the GitHub Actions workflows under ``.github/workflows``), and the
    Python launchers and notebooks that name vLLM (:data:`_PYTHON_SUFFIXES`, read by
    :mod:`~pdd_operator.compat.python_inputs`; other Python sources of a repository are no inputs), as a user's
    repository keeps them apart; a folder holding none of them is an input error. A Helm chart in the folder
    (:func:`~pdd_operator.compat.helm_charts.chart_roots`) stands for itself by its ``Chart.yaml`` alone: its
    templates, values and subcharts are what helm renders, not inputs."""
    from pdd_operator.compat.helm_charts import chart_roots, in_chart
    from pdd_operator.compat.image_builds import is_build_link_file, is_dockerfile, is_makefile

    paths: list[str] = []
    errors: list[str] = []
    for path in given:
        if path == "-" or not Path(path).is_dir():
            paths.append(path)
            continue
        root = Path(path)
        found = []
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(root)
            if not p.is_file():
                continue
            if any(part.startswith(".") for part in rel.parts) and not (
                    rel.parts[:2] == (".github", "workflows") and is_build_link_file(rel.as_posix())):
                continue
            if (p.suffix in _FOLDER_SUFFIXES or is_dockerfile(p.name) or is_makefile(p.name)
                    or is_build_link_file(rel.as_posix())
                    or p.suffix in _PYTHON_SUFFIXES and "vllm" in (_read_text(str(p)) or "").lower()):
                found.append(str(p))
        charts = chart_roots([Path(f) for f in found], _read_text)  # a chart's files are helm's, not inputs
        found = [f for f in found if not in_chart(Path(f), charts)]
        if all(is_build_link_file(Path(f).relative_to(root).as_posix()) and Path(f).suffix not in (".yaml", ".yml")
               for f in found):  # READMEs, a Tiltfile, workflows alone: nothing of a deployment
            errors.append(f"{path}: a folder holding no manifest, script, Dockerfile or Makefile")
        paths += found
    return paths, errors


#: Python launchers and Jupyter notebooks, read from a folder where their text names vLLM.
_PYTHON_SUFFIXES = (".py", ".ipynb")


def _image_build_files(paths: list[str], named: frozenset[str] = frozenset()) -> tuple[dict[str, str], list[str],
                                                                                      dict[str, str]]:
    """``(path -> text of the Dockerfiles, Makefiles and link-only files among paths, the paths still to read as
    inputs, path -> text of the inputs that may also tie tags to Dockerfiles)``: a Dockerfile and a script it copies
    into its image are part of an image, not a deployment; a Makefile is read as a launcher only where it holds a
    prefill/decode engine (:func:`~pdd_operator.compat.manifests.pd_marked`), else only for the images it builds
    (:func:`~pdd_operator.compat.image_builds.builds_of`); a README, Tiltfile or GitHub Actions workflow only ties
    tags to Dockerfiles (:func:`~pdd_operator.compat.image_builds.is_build_link_file`), and a shell script, Skaffold
    or DevSpace config is read both ways. A Markdown file ``named`` by itself (not found in a folder) is read both
    ways too: its commands are an input (:func:`_markdown_input`)."""
    from pdd_operator.compat.image_builds import is_build_link_file, is_dockerfile, is_makefile, parse_dockerfile
    from pdd_operator.compat.manifests import pd_marked

    files: dict[str, str] = {}
    links: dict[str, str] = {}
    rest: list[str] = []
    for path in paths:
        if path != "-" and (is_dockerfile(path) or is_makefile(path)) and (text := _read_text(path)) is not None:
            files[path] = text
            if is_makefile(path) and pd_marked(text):
                rest.append(path)
            continue
        name = Path(path).name
        if path != "-" and is_build_link_file(path) and (name.endswith((".yml", ".yaml")) and ".github" not in
                                                          Path(path).parts):
            if (text := _read_text(path)) is not None:
                links[path] = text  # a Skaffold or DevSpace config: its images, and its documents as inputs
        elif path != "-" and is_build_link_file(path):
            if (text := _read_text(path)) is not None:
                files[path] = text
            if not (path in named and _is_markdown(path)):  # a Markdown file named itself is read as an input too
                continue
        elif path != "-" and Path(path).suffix in (".sh", ".bash") and (text := _read_text(path)) is not None:
            links[path] = text
        rest.append(path)
    copied = {str(Path(p).parent / src) for p, text in files.items() if is_dockerfile(p)
              for src in parse_dockerfile(p, text).copies.values()}
    return files, [p for p in rest if p not in copied], links


def _read_text(path: str) -> str | None:
    """The text of the file ``path``, ``None`` where it is not a readable file."""
    try:
        return Path(path).read_text(errors="replace") if Path(path).is_file() else None
    except OSError:
        return None


def _script_text(path: str) -> str:
    """The text of the file ``path`` as a script (of a Markdown file, :func:`_is_markdown`, its commands:
    :func:`~pdd_operator.compat.markdown_inputs.markdown_commands`): a pasted terminal session that is in no format of its own
    (:func:`~pdd_operator.compat.text_inputs.text_format`) gives its commands, its output lines left empty
    (:func:`~pdd_operator.compat.text_inputs.transcript_commands`); any other file its text. Raises ``OSError``."""
    from pdd_operator.compat.markdown_inputs import markdown_commands
    from pdd_operator.compat.text_inputs import text_format, transcript_commands

    text = Path(path).read_text(errors="replace")
    if _is_markdown(path):  # a README or an issue's text: its shell code blocks and the vLLM commands in its prose
        text = markdown_commands(text) or ""
    commands = transcript_commands(text) if text_format(text) is None else None
    return text if commands is None else commands


def _text_input(path: str) -> dict | None:
    """The "not checked" record of the file ``path`` when it is no manifest but configures P/D KV transfer (a Slurm or
    shell script, a systemd unit, a Nomad job: :func:`~pdd_operator.compat.text_inputs.unreadable_text`), else
    ``None`` (also for stdin, already read, and a file that cannot be read)."""
    from pdd_operator.compat.text_inputs import unreadable_text

    if path == "-":
        return None
    try:
        return unreadable_text(path, _script_text(path))
    except OSError:
        return None


def _markdown_input(path: str, engines: list, unreadable: list[dict]) -> None:
    """Read the Markdown file ``path`` (a README that launches a deployment step by step) as the shell script of its
    commands (:func:`~pdd_operator.compat.markdown_inputs.markdown_commands`): its engines added to ``engines``, or, where
    it configures or starts a prefill/decode deployment whose engines cannot be read, its "not checked" record
    (:func:`~pdd_operator.compat.text_inputs.unreadable_text`) added to ``unreadable``. A document that only mentions
    P/D (prose, no command) adds nothing: nothing to check."""
    from pdd_operator.compat.markdown_inputs import markdown_commands, markdown_sections
    from pdd_operator.compat.text_inputs import unreadable_text

    text = _read_text(path)
    script = markdown_commands(text) if text is not None else None
    if script is None:
        return
    record = unreadable_text(path, script, commands=True, document=text)
    if record is not None and not _read_script(path, engines, unreadable, script, markdown_sections(text or "")):
        unreadable.append(record)


def _is_diff(path: str) -> bool:
    """The file ``path`` is a diff or patch by its name (:data:`~pdd_operator.compat.diff_inputs.DIFF_SUFFIXES`).
    ``False`` for stdin."""
    from pdd_operator.compat.diff_inputs import DIFF_SUFFIXES

    return path != "-" and Path(path).suffix.lower() in DIFF_SUFFIXES


#: The file name suffixes a patched file is read as manifests by (YAML, or JSON, which YAML reads).
_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
#: The file name suffixes of programs' source code: a hunk of such a file (vLLM's own kv_transfer code, a connector's)
#: names KV connectors and roles without deploying anything, unless it starts an engine (:data:`_LAUNCH`).
_SOURCE_SUFFIXES = (".py", ".go", ".rs", ".c", ".cc", ".cpp", ".cu", ".h", ".hpp", ".ts", ".js", ".java")
#: A vLLM engine started in a program's text: ``vllm serve``, a ``vllm.entrypoints`` module, an ``LLM(...)``.
_LAUNCH = re.compile(r"\bvllm[\"',\s]+serve\b|vllm\.entrypoints|\bLLM\(")


def _diff_input(path: str, all_docs: dict[str, list[dict]], engines: list, unreadable: list[dict]) -> bool:
    """Read the hunks of the diff ``path`` (a ``.diff`` / ``.patch`` file, or the diff blocks of a Markdown file:
    :mod:`~pdd_operator.compat.diff_inputs`) as the files they patch would be read, the post-image of each (its
    context and ``+`` lines). A new file's post-image is whole: a YAML or JSON manifest's documents go to
    ``all_docs`` (under ``<path>:<file>``), any other file is read as a script (its engines to ``engines``, a
    Markdown file's commands, :func:`~pdd_operator.compat.markdown_inputs.markdown_commands`), or named "not checked" as
    :func:`~pdd_operator.compat.text_inputs.unreadable_text` names a script. A hunk of an existing file is a part of
    it, so its document cannot be read whole: where its post-image shows a prefill/decode deployment
    (:func:`~pdd_operator.compat.manifests.pd_signal`) it is "not checked", naming the diff's file and hunk; a hunk
    showing none (documentation, code) adds nothing. ``False`` where ``path`` holds no hunk (it is read as any
    other file); ``True`` otherwise."""
    from pdd_operator.compat.diff_inputs import diff_hunks, markdown_diff_hunks
    from pdd_operator.compat.manifests import pd_signal
    from pdd_operator.compat.markdown_inputs import MARKDOWN_SUFFIXES, markdown_commands
    from pdd_operator.compat.text_inputs import unreadable_text

    text = _read_text(path)
    if text is None:
        return False
    hunks = markdown_diff_hunks(text) if _is_markdown(path) else diff_hunks(text)
    if not hunks:
        return False
    all_docs.setdefault(path, [])
    for hunk in hunks:
        name = hunk.file or "a file it does not name"
        where = f"{path}:{hunk.file}" if hunk.file else path
        markdown = Path(hunk.file).suffix.lower() in MARKDOWN_SUFFIXES
        post = (markdown_commands(hunk.text) or "") if markdown else hunk.text
        if hunk.whole and Path(hunk.file).suffix.lower() in _MANIFEST_SUFFIXES:
            try:
                all_docs[where] = [d for d in yaml.safe_load_all(post) if isinstance(d, dict)]
                continue
            except yaml.YAMLError:
                pass  # a broken new manifest: named below where it shows P/D
        elif hunk.whole:
            record = unreadable_text(where, post, commands=markdown, document=hunk.text)
            if not _read_script(where, engines, unreadable, post) and record is not None:
                unreadable.append(record)
            continue
        signal = pd_signal(post)
        if signal is None or (Path(hunk.file).suffix.lower() in _SOURCE_SUFFIXES and not _LAUNCH.search(post)):
            continue  # no P/D, or a change to a program's code (vLLM's own, a connector's) that starts no engine
        if hunk.whole:  # a new manifest that does not parse
            unreadable.append({"object": f"{path} (a diff of {name}, hunk {hunk.header} on line {hunk.at})",
                               "reason": (f"it creates {name}, a prefill/decode deployment ({signal}), but its text "
                                          "after the change is not valid YAML; fix it and check the file itself")})
            continue
        last = hunk.start + len(hunk.lines) - 1
        unreadable.append({"object": f"{path} (a diff of {name}, hunk {hunk.header} on line {hunk.at})", "reason": (
            f"it patches a prefill/decode deployment ({signal}), but the hunk holds only lines {hunk.start}-{last} of "
            f"{name} after the change, not the whole file: the rest of its document (the other engine, the image and "
            "vLLM release, settings above or below the hunk) is not in these files; apply the patch and check "
            f"{name} itself to have it checked")})
    return True


def _is_notebook(path: str) -> bool:
    """The file ``path`` is a Jupyter notebook (:func:`~pdd_operator.compat.text_inputs.text_format`), whose
    engines are in its code cells (:mod:`~pdd_operator.compat.python_inputs`), not in its JSON as a document.
    ``False`` for stdin and a file that cannot be read."""
    from pdd_operator.compat.text_inputs import text_format

    if path == "-":
        return False
    try:
        return text_format(Path(path).read_text(errors="replace")) == "Jupyter notebook"
    except OSError:
        return False


def _is_markdown(path: str) -> bool:
    """The file ``path`` is Markdown (:data:`~pdd_operator.compat.markdown_inputs.MARKDOWN_SUFFIXES`): a README, an issue
    or pull request body, a guide, whose launch commands are in its code blocks and prose, not in a document of its
    own. ``False`` for stdin."""
    from pdd_operator.compat.markdown_inputs import MARKDOWN_SUFFIXES

    return path != "-" and Path(path).suffix.lower() in MARKDOWN_SUFFIXES


def _runs_without_pd(path: str) -> bool:
    """The file ``path`` is a shell or Slurm script, a systemd unit or a Nomad job
    (:func:`~pdd_operator.compat.text_inputs.run_format`) that is no valid YAML, or a Python program that can start
    no vLLM engine (:func:`~pdd_operator.compat.python_inputs.starts_no_engine`: a disaggregation proxy forwarding
    requests to servers started elsewhere); called where :func:`_text_input` found no P/D KV transfer in it, so it
    holds nothing to check (exit 4), as the same script whose text happens to parse as a YAML string does. ``False``
    for stdin and a file that cannot be read."""
    from pdd_operator.compat.python_inputs import starts_no_engine
    from pdd_operator.compat.text_inputs import run_format, text_format

    if path == "-":
        return False
    try:
        text = _script_text(path)
    except OSError:
        return False
    return run_format(text) is not None or (text_format(text) == "Python launcher" and starts_no_engine(text))


def _read_script(path: str, engines: list, unreadable: list[dict], text: str | None = None,
                 sections: list[tuple[str, ...]] | None = None) -> bool:
    """Add the P/D engines of the shell or Slurm batch script ``path`` (its ``text``, else the file's) to ``engines``
    and those it cannot read to ``unreadable`` (:func:`~pdd_operator.compat.script_inputs.script_engines`, with the
    ``sections`` of a Markdown document whose commands ``text`` is); ``False`` when it starts none that can be found
    (the file is then named "not checked" as a whole)."""
    from pdd_operator.compat.script_inputs import script_engines

    got = script_engines(path, _script_text(path) if text is None else text, sections)
    if got is None or not any(got):
        return False
    engines.extend(got[0])
    unreadable.extend({"object": u.where, "reason": u.reason} for u in got[1])
    return True


def _read_compose(all_docs: dict[str, list[dict]], engines: list, unreadable: list[dict]) -> None:
    """Add the P/D engines of the Compose documents of ``all_docs`` (path -> documents) to ``engines`` and those it
    cannot read to ``unreadable`` (:func:`~pdd_operator.compat.compose_inputs.compose_engines`: each document one
    host, every document given one topology), and take the documents read out of ``all_docs``; a Compose file whose
    services run no P/D vLLM engine stays, for today's answer."""
    from pdd_operator.compat.compose_inputs import compose_engines
    from pdd_operator.compat.manifests import is_compose_file

    host = 0
    for path, docs in all_docs.items():
        compose = [d for d in docs if is_compose_file(d) and not d.get("kind")]
        got = compose_engines(path, compose, first_host=host, read=_beside(path)) if compose else None
        host += len(compose)
        if got is None:
            continue
        engines.extend(got[0])
        unreadable.extend({"object": u.where, "reason": u.reason} for u in got[1])
        all_docs[path] = [d for d in docs if not any(d is c for c in compose)]


def _read_launcher_configs(all_docs: dict[str, list[dict]], engines: list, unreadable: list[dict]) -> None:
    """Add the P/D engines of the launcher configurations of ``all_docs`` (path -> documents) whose engine commands
    are read (dstack run configurations, :func:`~pdd_operator.compat.dstack_inputs.dstack_engines`; single-node
    SkyPilot tasks, :func:`~pdd_operator.compat.skypilot_inputs.skypilot_engines`) to ``engines``
    and those it cannot read to ``unreadable``, and take the documents read out of ``all_docs``; a configuration
    holding no P/D engine stays, for today's answer."""
    from pdd_operator.compat.dstack_inputs import dstack_engines
    from pdd_operator.compat.manifests import is_dstack_configuration, is_skypilot_task
    from pdd_operator.compat.skypilot_inputs import skypilot_engines

    readers = ((is_dstack_configuration, dstack_engines), (is_skypilot_task, skypilot_engines))
    for path in list(all_docs):
        for recognise, read in readers:
            mine = [d for d in all_docs[path] if isinstance(d, dict) and not d.get("kind") and recognise(d)]
            got = read(path, mine) if mine else None
            if got is None:
                continue
            engines.extend(got[0])
            unreadable.extend({"object": u.where, "reason": u.reason} for u in got[1])
            all_docs[path] = [d for d in all_docs[path] if not any(d is c for c in mine)]


def _beside(path: str):
    """A reader of the files a Compose file names (``.env``, ``include``, ``extends.file``, ``env_file``): their text,
    relative to the file's directory (Compose v2's project directory), or ``None`` for one not on disk (or a file
    read from standard input)."""
    folder = Path(path).parent if path not in ("-", "") and Path(path).is_file() else None

    def read(name: str) -> str | None:
        if folder is None:
            return None
        target = Path(name) if Path(name).is_absolute() else folder / name
        try:
            return target.read_text(errors="replace") if target.is_file() else None
        except OSError:
            return None

    return read


def _origin(doc: dict) -> str:
    """``Kind/name`` of a manifest document for messages, whatever its fields hold."""
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    return f"{doc.get('kind', '?')}/{meta.get('name', '?')}"


def _scan_foreign(doc: dict, unreadable: list[dict], path: str = "-",
                  given: frozenset[Path] = frozenset()) -> tuple[list, list]:
    """``(the P/D engines of a non-PDDeployment document, those of its unreadable engines that vLLM refuses all the
    same)``; every engine it cannot read goes to ``unreadable`` ("not checked"), the refused ones too (their
    :attr:`~pdd_operator.compat.manifests.Unreadable.findings` say what is refused, the rest stays unchecked).
    ``path``: the file the document is from; ``given``: every file of the check, resolved (a kustomization whose
    build they all show is not reported, :func:`~pdd_operator.compat.kustomize.kustomize_overlay`; nor a Flux
    Kustomization or Argo CD Application whose source they hold, :func:`~pdd_operator.compat.gitops_sources.
    gitops_unrendered`); a Helmfile is never read as pods (:func:`~pdd_operator.compat.gitops_sources.
    helmfile_unrendered`)."""
    from pdd_operator.compat.gitops_sources import gitops_unrendered, helmfile_unrendered
    from pdd_operator.compat.kustomize import kustomize_overlay
    from pdd_operator.compat.manifests import scan

    overlay = kustomize_overlay(doc, path, given) or gitops_unrendered(doc, given) or helmfile_unrendered(doc)
    if overlay is not None:  # its engines are in what it builds from, not in these files
        unreadable.append({"object": overlay.where, "reason": overlay.reason})
        return [], []
    engines, cannot = scan(doc)
    unreadable.extend({"object": u.where, "reason": u.reason} for u in cannot)
    return engines, [u for u in cannot if u.findings]


def cmd_crd(args: argparse.Namespace) -> int:
    """Print (or write) the CRD generated from the API models."""
    from pdd_operator.api.crd import crd_yaml

    text = crd_yaml()
    if args.write:
        Path(args.write).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_chart_files(args: argparse.Namespace) -> int:
    """Write the chart's generated files (:mod:`pdd_operator.controller.chart`) under ``args.chart``."""
    from pdd_operator.controller.chart import chart_files

    root = Path(args.chart)
    if not (root / "Chart.yaml").is_file():
        raise InputError(f"{root}: not a chart directory (no Chart.yaml)")
    for rel, text in chart_files().items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        print(root / rel)
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    """List the compatibility rules (or print docs/rules.md with --markdown)."""
    from pdd_operator.compat.docs import rules_markdown
    from pdd_operator.compat.rules import RULES

    if args.markdown:
        sys.stdout.write(rules_markdown())
        return 0
    for r in RULES:
        print(f"{r.id:34} {r.severity:8} {r.versions:22} {r.summary}")
    return 0


def run_options(args: argparse.Namespace):
    """The :class:`pdd_operator.controller.rbac.Options` of a ``pdd run`` command line. Raises
    :class:`InputError` for a bad combination, naming the flag."""
    from pdd_operator.controller import rbac

    if not 0 <= args.webhook_port <= 65535:
        raise InputError(f"--webhook-port must be between 0 and 65535, got {args.webhook_port}")
    try:
        return rbac.Options(
            namespace=args.operator_namespace, watch_namespaces=tuple(args.namespace or ()),
            webhook_configuration=args.webhook_configuration_name if args.webhook_port else None,
            webhook_configuration_mode=args.webhook_configuration_mode,
            webhook_secret=args.webhook_cert_secret if args.webhook_port else None,
            leader_election_lease=args.leader_election_lease,
        )
    except ValueError as exc:
        raise InputError(f"--namespace: {exc}") from exc


def check_access(options, kube=None) -> None:
    """Refuse to start (``InputError``) when the apiserver denies a permission the operator needs with
    ``options`` (:func:`pdd_operator.controller.rbac.access_checks`), naming each one."""
    from pdd_operator.controller import rbac
    from pdd_operator.controller.kube import Kube

    kube = kube or Kube()
    missing = kube.missing_access(rbac.access_checks(options))
    if missing:
        raise InputError(rbac.missing_message(missing))


def cmd_run(args: argparse.Namespace) -> int:
    """Run the operator against the current kubeconfig (or in-cluster service account).

    Before it starts, it checks with the apiserver that it holds every permission it needs
    (:func:`check_access`) and exits with code 2 naming the missing ones otherwise.

    With ``--webhook-port`` it also serves the validating admission webhook over HTTPS and keeps the
    ValidatingWebhookConfiguration ``--webhook-configuration-name`` in line (see
    :mod:`pdd_operator.controller.webhook`): the whole object (``--webhook-configuration-mode=apply``,
    left in place on exit), only its ``caBundle`` (``ca-bundle``: the Helm chart owns the object), or
    nothing (``none``: cert-manager injects ``caBundle``). The first sync happens before the operator
    starts, so a missing configuration or permission stops it there.

    ``PDD_TRACEMALLOC=<frames>`` traces its memory by package (:mod:`pdd_operator.controller.memory`);
    ``PDD_PROFILE=<path>`` samples its CPU by function (:mod:`pdd_operator.controller.profiling`).
    """
    import tempfile

    import kopf

    from pdd_operator.controller import handlers

    options = run_options(args)
    kopf.configure(verbose=args.verbose)
    check_access(options)
    handlers.watch_namespaces(list(options.watch_namespaces))
    if args.leader_election_lease:
        from kubernetes import client as k8s_client

        from pdd_operator.controller.leader import REQUEST_TIMEOUT, LeaderElector
        from pdd_operator.kubeclient import load_config

        handlers.elect_leader(LeaderElector(k8s_client.CoordinationV1Api(load_config(REQUEST_TIMEOUT)),
                                            args.operator_namespace,
                                            args.leader_election_lease, args.leader_election_identity))
    cert_tmp: tempfile.TemporaryDirectory | None = None
    checks = []
    if args.webhook_port:
        from kubernetes import client

        from pdd_operator.controller import webhook
        from pdd_operator.kubeclient import load_config

        cert_dir = args.webhook_cert_dir
        if not cert_dir:
            cert_tmp = tempfile.TemporaryDirectory(prefix="pdd-webhook-")
            cert_dir = cert_tmp.name
        refresh = None
        if args.webhook_cert_secret:
            from pdd_operator.controller import webhook_certs

            ref = webhook_certs.SecretRef(args.operator_namespace, args.webhook_cert_secret,
                                          webhook_certs.hosts_of(args.webhook_host))
            secrets = webhook_certs.Secrets(load_config())
            try:
                webhook_certs.sync(secrets, ref, Path(cert_dir))
            except webhook_certs.SecretMissing as exc:
                raise InputError(str(exc)) from exc

            def refresh() -> object:
                return webhook_certs.sync(secrets, ref, Path(cert_dir))
        endpoint = webhook.prepare(
            port=args.webhook_port, host=args.webhook_host, listen=args.webhook_listen, cert_dir=Path(cert_dir),
            configuration=args.webhook_configuration_name, mode=args.webhook_configuration_mode, refresh=refresh,
        )
        try:
            webhook.keep_once(client.AdmissionregistrationV1Api(load_config()), endpoint)
        except webhook.ConfigurationMissing as exc:
            raise InputError(str(exc)) from exc
        webhook.enable(endpoint)
        checks.append(webhook.readiness)
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port, addr=args.metrics_address)
    if args.readiness_port:
        from pdd_operator.controller import readiness

        readiness.enable(args.readiness_address, args.readiness_port, checks)
    from pdd_operator.controller import memory

    memory.start_from_env()  # after the imports: tracing them takes minutes, and they are the fixed floor
    from pdd_operator.controller import profiling

    profiling.start_from_env()
    try:
        kopf.run(
            clusterwide=not options.watch_namespaces, namespaces=list(options.watch_namespaces), standalone=True,
            liveness_endpoint=args.liveness,
        )
    finally:
        if cert_tmp is not None:
            cert_tmp.cleanup()
    return 0


def cmd_rbac(args: argparse.Namespace) -> int:
    """Print the RBAC objects the operator needs (``--chart-rules``: the chart's rules file;
    ``--markdown``: docs/rbac.md)."""
    from pdd_operator.controller import rbac

    if args.markdown:
        sys.stdout.write(rbac.markdown())
        return 0
    if args.chart_rules:
        sys.stdout.write("# Generated by `pdd rbac --chart-rules` (operator/pdd_operator/controller/rbac.py): "
                         "do not edit.\n")
        sys.stdout.write(yaml.safe_dump(rbac.chart_rules(), sort_keys=False, width=120))
        return 0
    try:
        options = rbac.Options(
            namespace=args.namespace, watch_namespaces=tuple(args.watch_namespace or ()),
            webhook_configuration=None if args.no_webhook else args.webhook_configuration_name,
            webhook_configuration_mode=args.webhook_configuration_mode, webhook_secret=args.webhook_secret,
            leader_election_lease=args.leader_election_lease,
        )
    except ValueError as exc:
        raise InputError(f"--watch-namespace: {exc}") from exc
    docs = rbac.manifests(options, name=args.name, service_account=args.service_account)
    sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False, width=120))
    return 0


def cmd_router(args: argparse.Namespace) -> int:
    """Run the P/D router (:mod:`pdd_operator.router`)."""
    from pdd_operator.router.server import run

    return run(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pdd", description="pdd-operator: disaggregated prefill/decode vLLM on Kubernetes")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the operator")
    run.add_argument("-n", "--namespace", action="append", help="watch only this namespace (repeatable)")
    run.add_argument("--liveness", default=None, help="liveness endpoint, e.g. http://0.0.0.0:8080/healthz")
    run.add_argument("--metrics-port", type=int, default=0, help="serve Prometheus metrics on this port (0: off)")
    run.add_argument("--metrics-address", default="0.0.0.0", help="address for the metrics server")
    run.add_argument("--webhook-port", type=int, default=0,
                     help="serve the validating admission webhook (HTTPS) on this port (0: no webhook)")
    run.add_argument("--webhook-host", default="127.0.0.1",
                     help="address the apiserver dials for the webhook, and the serving certificate's SAN: "
                     "an IP, or <service>.<namespace>.svc to be reached through that Service on --webhook-port "
                     "(default 127.0.0.1, the local cluster)")
    run.add_argument("--webhook-listen", default="127.0.0.1", help="address the webhook server binds to")
    run.add_argument("--webhook-cert-dir", default=None,
                     help="directory with tls.crt, tls.key (and ca.crt) to serve, e.g. a mounted Secret; "
                     "generated there when absent (default: a temporary directory)")
    run.add_argument("--webhook-cert-secret", default=None, metavar="NAME",
                     help="keep the webhook's CA and serving certificate in this Secret of --operator-namespace "
                     "(created empty by the Helm chart): made once, the serving certificate renewed before expiry "
                     "under the same CA, shared by replicas; copied to --webhook-cert-dir")
    run.add_argument("--webhook-configuration-name", default=GROUP,
                     help=f"the ValidatingWebhookConfiguration to keep (default {GROUP})")
    run.add_argument("--webhook-configuration-mode", choices=WEBHOOK_CONFIGURATION_MODES, default="apply",
                     help="apply: write the whole configuration (default); ca-bundle: only patch caBundle of an "
                     "existing one (the Helm chart's); none: leave it alone (cert-manager injects caBundle)")
    run.add_argument("--operator-namespace", default=os.environ.get("POD_NAMESPACE", "pdd-system"),
                     help="the namespace the operator runs in (default $POD_NAMESPACE, else pdd-system)")
    run.add_argument("--leader-election-lease", default=None, metavar="NAME",
                     help="reconcile only while holding this coordination.k8s.io Lease in --operator-namespace "
                     "(replicas > 1: every replica serves the webhook, the leader reconciles)")
    run.add_argument("--leader-election-identity",
                     default=os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}",
                     help="this replica's name in the Lease (default $POD_NAME, else host-pid)")
    run.add_argument("--readiness-port", type=int, default=0,
                     help="serve GET /readyz on this port: 200 once started and, with the webhook, once it can "
                     "answer (0: off)")
    run.add_argument("--readiness-address", default="0.0.0.0", help="address for the readiness endpoint")
    run.add_argument("-v", "--verbose", action="store_true")
    run.set_defaults(func=cmd_run)

    rbac_p = sub.add_parser("rbac", help="print the RBAC objects the operator needs (ClusterRole/Roles, bindings)")
    rbac_p.add_argument("--namespace", default="pdd-system", help="the operator's namespace (default pdd-system)")
    rbac_p.add_argument("-w", "--watch-namespace", action="append",
                        help="a namespace the operator serves (repeatable; default: all namespaces)")
    rbac_p.add_argument("--name", default="pdd-operator", help="name of the roles and bindings")
    rbac_p.add_argument("--service-account", default="pdd-operator", help="the operator's ServiceAccount")
    rbac_p.add_argument("--no-webhook", action="store_true", help="the operator serves no admission webhook")
    rbac_p.add_argument("--webhook-configuration-name", default=GROUP)
    rbac_p.add_argument("--webhook-configuration-mode", choices=WEBHOOK_CONFIGURATION_MODES, default="ca-bundle")
    rbac_p.add_argument("--webhook-secret", default=None, help="the Secret holding the webhook's certificates")
    rbac_p.add_argument("--leader-election-lease", default=None, help="the Lease replicas elect their leader with")
    rbac_p.add_argument("--chart-rules", action="store_true", help="print charts/pdd-operator/files/rbac-rules.yaml")
    rbac_p.add_argument("--markdown", action="store_true", help="print docs/rbac.md")
    rbac_p.set_defaults(func=cmd_rbac)

    render = sub.add_parser("render", help="print the child objects for a PDDeployment file (no cluster needed)")
    render.add_argument("file", help="YAML file with PDDeployment documents, or - for stdin")
    render.add_argument("-n", "--namespace", help="namespace for the children (default: the object's)")
    render.add_argument("--force", action="store_true", help="render even when compatibility errors are found")
    render.set_defaults(func=cmd_render)

    check = sub.add_parser(
        "check", help="check PDDeployments against the compatibility rules",
        epilog="exit codes: " + "; ".join(f"{code}: {what}" for code, what in CHECK_EXIT_CODES.items()))
    check.add_argument("files", nargs="+", help=(
        "YAML files (multi-document), launch scripts, Compose files, Dockerfiles and Makefiles, folders (a "
        "repository: the manifests, scripts, Dockerfiles and Makefiles under it), or - for stdin"))
    check.add_argument("-o", "--output", choices=["text", "json"], default="text")
    check.add_argument("--model-config", metavar="FILE",
                       help="the model's config.json (else a ConfigMap in the files named by spec.model.configMapRef)")
    check.add_argument("--allow-unchecked", action="store_true",
                       help="exit 0 even when a prefill/decode engine or pair could not be checked")
    check.add_argument("--allow-empty", action="store_true",
                       help="exit 0 when the files hold nothing to check (no PDDeployment, no P/D vLLM engine)")
    check.add_argument("--vllm-version", metavar="VERSION",
                       help="the vLLM release (e.g. 0.26.0) of engines whose image tag names none (latest, nightly, "
                       "llm-d's or Dynamo's images, digests); engines of PDDeployments use spec.engine.vllmVersion")
    check.set_defaults(func=cmd_check)

    rules = sub.add_parser("rules", help="list the compatibility rules")
    rules.add_argument("--markdown", action="store_true", help="print the rules reference (docs/rules.md)")
    rules.set_defaults(func=cmd_rules)

    router = sub.add_parser("router", help="run the P/D router (OpenAI-compatible endpoint of a PDDeployment)")
    from pdd_operator.router.server import add_arguments as router_arguments

    router_arguments(router)
    router.set_defaults(func=cmd_router)

    chart = sub.add_parser("chart-files", help="write the Helm chart's generated files (CRD, RBAC rules, webhook)")
    chart.add_argument("chart", nargs="?", default="charts/pdd-operator", help="the chart directory")
    chart.set_defaults(func=cmd_chart_files)

    crd = sub.add_parser("crd", help="print the CRD generated from the API models")
    crd.add_argument("--write", metavar="FILE", help="write to FILE instead of stdout")
    crd.set_defaults(func=cmd_crd)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"error: {exc.filename}: no such file", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
