"""What a compatibility rule is, and the registry every rule id lives in.

A rule is defined in one place: its check function, decorated with :func:`rule`, which carries the
id, severity, version bounds, fields and source beside the code; the summary is the function's
docstring. Ids a user can see that no check function reports (the webhook's, the engine's version
warnings) are registered with :func:`record`, so ``pdd rules`` and docs/rules.md list every id.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pdd_operator.compat.pair import PDPair
from pdd_operator.vllm.expansion import unknown_names
from pdd_operator.vllm.kv_transfer_config import UnknownField, reading_fields, unknown_fields
from pdd_operator.vllm.versions import Version, fmt

#: One violation: ``(message, fix)``, or ``(message, fix, "warning")`` where an error rule is not certain for
#: this pair (a rule may lower its severity, never raise it), or ``(message, fix, NOT_CHECKED)`` where the rule
#: cannot decide the pair from what the files say (the message says what it rests on); the fix speaks of the
#: fields the user wrote.
Violation = tuple[str, str] | tuple[str, str, str]
#: The severity of a violation the rule cannot decide: not a finding, it makes the pair "not checked"
#: (:attr:`pdd_operator.compat.engine.CompatReport.unchecked`), so ``pdd check`` exits 3, not 0.
NOT_CHECKED = "not-checked"
Check = Callable[[PDPair], list[Violation]]


@dataclass(frozen=True)
class Rule:
    """A compatibility rule.

    Attributes:
        id: stable kebab-case id (users grep it; never renamed).
        family: the kind of fault it guards against (several rules may share one).
        severity: ``error`` refuses the deployment; ``warning`` allows it and says why to look.
        summary: one line: what must hold (the check function's docstring).
        fields: PDDeployment fields the rule reads (dotted, camelCase).
        source: the vLLM file and versions (or seed section) the rule follows.
        check: the pure check function; ``None`` for an id reported elsewhere (webhook, engine, controller).
        since: first vLLM version the rule applies to (inclusive); ``None``: all earlier ones too.
        until: first vLLM version it no longer applies to (exclusive); ``None``: all later ones.
        example: a spec fragment that breaks the rule (for docs/rules.md).
        reported_by: for a record without a check, the module that reports the id.
        in_manifest: where the rule reads in a hand-written manifest, as paths inside each engine container
            (``securityContext.capabilities``), when :data:`MANIFEST_FIELDS` cannot tell it from ``fields``.
        needs: the ``vllm serve`` flags (``--speculative-config``; ``--model`` for the model) and env variables
            (``VLLM_KV_CACHE_LAYOUT``) whose values the rule reads; where a role's value of one is not in the
            manifest (``RoleConfig.opaque``) the rule is not run and the pair is reported "not checked" for it
            (``compat.engine``), never judged on a value nobody can read (nor on vLLM's default in its place).
            ``tests/unit/test_unknown_values.py`` makes each value of the valid corpus unknown in turn and holds
            every rule to this.
        without_connector: the rule judges an engine on its own, whether or not it has a KV connector (a flag vLLM
            refuses at startup, a GPU per rank, two listeners in one network namespace). Only such rules run on a
            pair where a role has no KV connector at all (``RoleConfig.connector`` ``None``): no KV moves there, so
            the NIXL rules (handshake hash, block sizes, side channel, pipeline parallel transfer) promise nothing.
        any_release: the fault holds on every vLLM release, whatever its parser or connector (arithmetic on the
            manifest's own values: two engines' memory fractions of one GPU). Such a ``without_connector`` rule is
            judged even on a pair whose connector these rules do not describe and whose release is unknown or older
            than the rules' oldest (``compat.engine._foreign_connector``), where a parser's refusals are not known.
            A bounded one (``since``/``until``) runs on an unknown release too: outside its bounds the engine fails
            otherwise, and its check, seeing ``pair.version`` ``None``, reports only what fails on every release
            (``p2p-nccl-http-port-missing``).
        p2p_nccl: the rule judges the KV path of a pair whose roles both name vLLM's ``P2pNcclConnector``
            (:mod:`~pdd_operator.compat.rules.p2p_nccl_pair`). Such a pair runs only these rules and the
            ``without_connector`` ones (``compat.engine._p2p_nccl``): the NIXL rules describe another connector.
        moriio: the rule judges the KV path of a pair whose roles both name vLLM's ``MoRIIOConnector`` (AMD's
            MORI-IO, :mod:`~pdd_operator.compat.rules.moriio_pair`) on a release whose connector was read
            (0.14.0-0.34.0), or on an unknown release (then probed on every release read from 0.14.0 on,
            ``compat.unknown_version``). Such a pair runs only these rules and the ``without_connector`` ones
            (``compat.engine``); on a known release outside those read it is "not checked".
        one_engine: the rule judges each engine by its own argv and image, role by role, with nothing read from the
            other role (the argument parser, ``--kv-transfer-config`` and its connector lookup, the config checks of
            one engine): vLLM raises it while that one engine starts (vllm/engine/arg_utils.py, vllm/config/*.py,
            kv_connector/factory.py), before any counterpart is contacted. Only such rules judge an engine found
            with no counterpart (``compat.engine.evaluate_alone``); rules that compare the roles or count what two
            engines share (GPUs, ports) are not. Implies nothing else: a ``one_engine`` rule is also
            ``without_connector`` (``tests/unit/test_heldout_leftovers.py`` holds every rule to that).
    """

    id: str
    family: str
    severity: Literal["error", "warning"]
    summary: str
    fields: tuple[str, ...]
    source: str
    check: Check | None = None
    since: Version | None = None
    until: Version | None = None
    example: str = ""
    reported_by: str = ""
    in_manifest: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    without_connector: bool = False
    any_release: bool = False
    p2p_nccl: bool = False
    moriio: bool = False
    one_engine: bool = False

    @property
    def connector(self) -> str | None:
        """The KV connector class whose pairs alone the rule judges (``P2pNcclConnector`` for a ``p2p_nccl`` rule,
        ``MoRIIOConnector`` for a ``moriio`` one), or ``None`` for a rule that is not scoped to one connector.
        A scoped rule neither runs nor is reported "not checked" (``needs``) on a pair of another connector
        (``compat.engine._in_scope``): on a NixlConnector pair the P2pNccl rules have nothing to judge."""
        return "P2pNcclConnector" if self.p2p_nccl else "MoRIIOConnector" if self.moriio else None

    @property
    def version_bounded(self) -> bool:
        return self.since is not None or self.until is not None

    def applies_to(self, version: Version | None) -> bool:
        """True when the rule applies to ``version`` (always for an unbounded rule)."""
        if not self.version_bounded:
            return True
        if version is None:
            return False
        return (self.since is None or version >= self.since) and (self.until is None or version < self.until)

    @property
    def versions(self) -> str:
        """Human form of the version bounds, e.g. ``>= 0.20.0`` or ``0.18.0 <= v < 0.20.0``."""
        if self.since and self.until:
            return f"{fmt(self.since)} <= v < {fmt(self.until)}"
        if self.since:
            return f">= {fmt(self.since)}"
        if self.until:
            return f"< {fmt(self.until)}"
        return "all"


def run_check(r: Rule, pair: PDPair) -> list[Violation]:
    """``r``'s violations for ``pair``, an error that quotes a value not in the files made :data:`NOT_CHECKED`.

    The last guard of "no false refusals" (issue 9) for values that are not in the manifest: a rule that read
    ``<unknown:NAME>`` (:func:`pdd_operator.vllm.expansion.unknown`) and still refused compared a value nobody can
    read, which may well be the one that works; its error becomes "not checked" with the same message. Rules name
    the values they read in ``Rule.needs`` first (they are then not run at all); this catches a reader that
    compares raw strings without doing so. Warnings are kept as they are.

    The rule runs with :func:`~pdd_operator.vllm.kv_transfer_config.reading_fields` on: where it reads a value of a
    role's ``--kv-transfer-config`` that is not in the files (a :class:`~pdd_operator.vllm.kv_transfer_config.
    PartlyKnown` field: ``"kv_port": "$PORT"`` of unknown value, the rest written), it is :data:`NOT_CHECKED` for
    that field, naming it, and every other rule still judges the pair.
    """
    out: list[Violation] = []
    try:
        with reading_fields():
            found = list(r.check(pair)) if r.check else []
    except UnknownField as exc:
        owner = next((f"{x.role}'s " for x in pair.roles
                      if any(path == exc.field for path, _ in unknown_fields(x.kv_transfer_written))), "")
        return [(f"{r.id} reads {owner}--kv-transfer-config {exc.field}, which is {exc.why}.",
                 f"Write {exc.field} in --kv-transfer-config as a literal value to have {r.id} checked.", NOT_CHECKED)]
    for message, fix, *severity in found:
        if (severity or [r.severity]) == ["error"] and unknown_names(message):
            out.append((f"{message} (It compares a value that is not in these files: "
                        f"${unknown_names(message)[0]}.)", fix, NOT_CHECKED))
        else:
            out.append((message, fix, *severity))
    return out


def fix_for(pair: PDPair, pddeployment: str, manifest: str) -> str:
    """The fix in the user's own format: ``pddeployment`` (speaks of spec fields) for a PDDeployment,
    ``manifest`` (speaks of the container's flags and env) for a manifest written by hand."""
    return pddeployment if pair.managed else manifest


#: PDDeployment wording -> the words of a hand-written manifest (container flags and env), longest first.
#: Fixes written for a PDDeployment are put in these terms when the pair came from another manifest, so a
#: user of a Deployment or a Dynamo graph reads ``--block-size on the decode container``, not spec fields.
MANIFEST_TERMS: tuple[tuple[str, str], ...] = (
    ("spec.model.architecture (and ssmKind for hybrid SSM models) or spec.model.hfArchitecture",
     "the model's config.json (pdd check --model-config)"),
    ("spec.model.mambaNGroups or spec.model.configMapRef (config.json)", "the model's config.json (pdd check --model-config)"),
    ("spec.model.numKvHeads (config.json num_key_value_heads)", "the model's config.json (pdd check --model-config)"),
    ("Set spec.model.ssmKind to Mamba1, Mamba2 or GDN", "Give the model's config.json (pdd check --model-config)"),
    ("leave spec.kvCache.ssmConvStateLayout unset or DS, and drop any env override", "in each container's env"),
    ("spec.kvTransfer.enablePermuteLocalKv", '"enable_permute_local_kv": true in decode\'s --kv-transfer-config'),
    ("spec.kvTransfer.backends", "kv_connector_extra_config.backends in --kv-transfer-config"),
    ("spec.kvTransfer.sideChannelPort", "VLLM_NIXL_SIDE_CHANNEL_PORT"),
    ("spec.network.ucx.netDevices", "UCX_NET_DEVICES in each container's env"),
    ("spec.network.rdma.resourceName", "an RDMA resource limit on each container"),
    ("spec.speculative.draftModel", '"model" in --speculative-config'),
    ("spec.prefill.numSpeculativeTokens", "num_speculative_tokens in prefill's --speculative-config"),
    ("spec.decode.numSpeculativeTokens", "num_speculative_tokens in decode's --speculative-config"),
    ("numSpeculativeTokens", "num_speculative_tokens (--speculative-config)"),
    ("spec.engine.vllmVersion (e.g. 0.20.2) or use an image tag that starts with the version",
     "an image tag that names the vLLM release (vllm/vllm-openai:v0.20.2) on both containers, or give pdd check "
     "the release the image holds (--vllm-version 0.20.2)"),
    ("spec.prefill.blockSize and spec.decode.blockSize", "--block-size on the prefill and decode containers"),
    ("spec.decode.blockSize", "--block-size on the decode container"),
    ("prefill pipelineParallelSize", "--pipeline-parallel-size on the prefill container"),
    ("decode pipelineParallelSize", "--pipeline-parallel-size on the decode container"),
    ("pipelineParallelSize", "--pipeline-parallel-size"),
    ("blockSize on both roles", "--block-size on the prefill and decode containers"),
    ("blockSize", "--block-size"),
    ("on both roles", "on the prefill and decode containers"),
)


#: The kind of workload (:attr:`~pdd_operator.compat.pair.RoleConfig.workload_kind`) of an engine read from a shell or
#: Slurm batch script (:mod:`pdd_operator.compat.script_inputs`).
SCRIPT_KIND = "Script"

#: The kind of workload of an engine read from a Docker Compose service (:mod:`pdd_operator.compat.compose_inputs`).
COMPOSE_KIND = "Compose"

#: The kind of workload of an engine read from a Modelplane ModelDeployment member
#: (:mod:`pdd_operator.compat.modelplane`; the manifest's ``kind``, as for any object an engine is read from).
MODELPLANE_KIND = "ModelDeployment"

#: Where a hand-written manifest sets an engine's GPU count, in the words of a fix; each input format's term table
#: (:data:`SCRIPT_TERMS`, :data:`COMPOSE_TERMS`, :data:`MODELPLANE_TERMS`) says where that format sets it instead.
GPU_COUNT_FIELD = "container's resources.limits"

#: Manifest wording (after :data:`MANIFEST_TERMS`) -> the words of a shell or Slurm script, longest first: its engines
#: are ``vllm serve`` lines, their environment ``export``/``NAME=value`` prefixes/``srun --export``, their node the
#: host the line runs on.
SCRIPT_TERMS: tuple[tuple[str, str], ...] = (
    ("Set it from the downward API: valueFrom.fieldRef.fieldPath status.hostIP",
     "Set it to the address of the node each engine runs on, on its line of the script "
     "(VLLM_NIXL_SIDE_CHANNEL_HOST=$(hostname -i) vllm serve ..., or in srun --export)"),
    ("Set it from the downward API: valueFrom.fieldRef.fieldPath status.podIP (status.hostIP with hostNetwork)",
     "Set it to the address of the node each engine runs on, on its line of the script "
     "(VLLM_NIXL_SIDE_CHANNEL_HOST=$(hostname -i) vllm serve ...)"),
    ("an image tag that names the vLLM release (vllm/vllm-openai:v0.20.2) on both containers",
     "the vLLM release in the script (pip install vllm==0.20.2, or an srun --container-image tag that names it)"),
    ("on the prefill and decode containers", "on the prefill and decode vllm serve lines"),
    ("on the prefill container", "on the prefill vllm serve line"),
    ("on the decode container", "on the decode vllm serve line"),
    ("in each container's env", "in each engine's environment in the script (export, NAME=value before vllm serve, "
     "or srun --export)"),
    ("on both containers", "on both vllm serve lines"),
    (GPU_COUNT_FIELD, "engine's CUDA_VISIBLE_DEVICES on its line of the script (and the job's #SBATCH "
     "--gpus-per-node)"),
    ("container's CUDA_VISIBLE_DEVICES (or remove it and let the device plugin or the resource claim expose the pod's "
     "GPUs)", "engine's CUDA_VISIBLE_DEVICES on its line of the script"),
    ("container's image (or pip install", "engine's vLLM install (its srun --container-image, or pip install"),
    ("container's image", "engine's vLLM install (pip install vllm==X, or its srun --container-image)"),
)


#: Kubernetes wording of findings' messages -> what it is for engines a shell or Slurm script starts (one synthetic
#: hostNetwork Pod per node, :mod:`pdd_operator.compat.script_inputs`), longest first.
SCRIPT_MESSAGE_TERMS: tuple[tuple[str, str], ...] = (
    ("are hostNetwork pods that never run on one node (their node selection or required anti-affinity keeps them "
     "apart)", "run on different nodes (the script's srun --nodelist/-w, or ssh)"),
    ("are hostNetwork pods, which share the node's network namespace only on one node, and nothing in these files puts "
     "them on one node or keeps them apart", "run on nodes the script does not name, which share a network namespace "
     "only if they are one node, and nothing in the script puts them on one node or keeps them apart"),
    ("are hostNetwork pods whose", "run in their hosts' network namespaces and their"),
    ("are engines of one container", "are engines the script starts on one host"),
    ("start in one container", "start on one host"),
    ("overlap in their shared network namespace", "overlap on a host they share"),
    ("but its pod requests", "but the script gives it"),
    ("whatever GPUs the pod holds", "whatever GPUs its host holds"),
    ("cannot be read from the engine image tags", "cannot be read from the script (a pip install vllm==X pin, or an "
     "srun --container-image tag that names it)"),
)


#: :data:`SCRIPT_TERMS` / :data:`SCRIPT_FIELDS` wording of a Slurm job's image -> the words of a script whose engines
#: run in ``docker run`` containers (:attr:`~pdd_operator.compat.pair.RoleConfig.script_docker`): their image is the
#: one each ``docker run`` line names, longest first.
DOCKER_SCRIPT_TERMS: tuple[tuple[str, str], ...] = (
    ("an srun --container-image tag that names it", "the docker run image tag that names it"),
    ("its srun --container-image", "the image its docker run line names"),
    ("srun --container-image", "the docker run image"),
)


def in_script_terms(text: str, docker: bool = False) -> str:
    """``text`` (a fix in a hand-written manifest's terms, :func:`in_manifest_terms`) in the terms of a shell or
    Slurm batch script (:data:`SCRIPT_TERMS`); ``docker``: the script's engines run in ``docker run`` containers, so
    their image is named as that line gives it (:data:`DOCKER_SCRIPT_TERMS`), not as a Slurm ``srun`` option."""
    for manifest, script in SCRIPT_TERMS + SCRIPT_MESSAGE_TERMS:
        text = text.replace(manifest, script)
    if docker:
        for slurm, line in DOCKER_SCRIPT_TERMS:
            text = text.replace(slurm, line)
    return text


#: A manifest field's place in a container (:func:`manifest_fields`) -> what holds it in a shell or Slurm script.
SCRIPT_FIELDS: tuple[tuple[str, str], ...] = (
    ("image", "the vLLM install (pip install vllm==X, srun --container-image)"),
    ("resources", "the engine's GPUs (CUDA_VISIBLE_DEVICES, #SBATCH --gpus-per-node)"),
    ("env", "the engine's environment"),
)


def script_fields(fields: list[str], containers: tuple[tuple[str, str], ...], docker: bool = False) -> list[str]:
    """``fields`` (paths of a manifest, :func:`manifest_fields`) for engines a shell or Slurm script starts, whose
    "container" is ``<file> (<format>) on <host>`` or ``... line N`` (:mod:`pdd_operator.compat.script_inputs`):
    ``<where>: VLLM_NIXL_SIDE_CHANNEL_PORT`` for ``<where>.env[VLLM_NIXL_SIDE_CHANNEL_PORT]``, ``<where>: the vLLM
    install (...)`` for ``<where>.image``, ``<where>: vllm serve flags`` for its command, ``<where>: hostNetwork``
    for a pod field; ``docker``: as :func:`in_script_terms`. Order kept, duplicates dropped."""
    out: list[str] = []
    for field in fields:
        where = next((c for c, _ in containers if field.startswith(c + ".")), None)
        if where is None:
            out.append(field)
            continue
        rest = field[len(where) + 1:]
        name = re.fullmatch(r"env\[(.+)\]", rest)
        text = name.group(1) if name else dict(SCRIPT_FIELDS).get(rest)
        if text is not None and docker:
            text = in_script_terms(text, docker=True)
        if text is None:
            text = "vllm serve flags" if rest in {k for _, k in containers} else rest
        if f"{where}: {text}" not in out:
            out.append(f"{where}: {text}")
    return out


#: Manifest wording (after :data:`MANIFEST_TERMS`) -> the words of a Docker Compose file, longest first: its engines are
#: services (:mod:`pdd_operator.compat.compose_inputs`), their environment ``environment``, their GPUs
#: ``deploy.resources.reservations.devices`` or ``gpus``, their host the machine ``docker compose up`` runs on.
COMPOSE_TERMS: tuple[tuple[str, str], ...] = (
    ("Set it from the downward API: valueFrom.fieldRef.fieldPath status.hostIP",
     "Set it in each service's environment to the address of the host the service runs on"),
    ("Set it from the downward API: valueFrom.fieldRef.fieldPath status.podIP (status.hostIP with hostNetwork)",
     "Set it in each service's environment to an address the other service reaches it at (its service name on the "
     "project's network, or the host's address with network_mode: host)"),
    ("an image tag that names the vLLM release (vllm/vllm-openai:v0.20.2) on both containers",
     "an image tag that names the vLLM release (vllm/vllm-openai:v0.20.2) on both services"),
    (GPU_COUNT_FIELD, "service's deploy.resources.reservations.devices (count or device_ids) or gpus"),
    ("Add securityContext.capabilities.add: [IPC_LOCK]", "Add cap_add: [IPC_LOCK] to the service"),
    ("on the prefill and decode containers", "on the prefill and decode services"),
    ("on the prefill container", "on the prefill service"),
    ("on the decode container", "on the decode service"),
    ("in each container's env", "in each service's environment"),
    ("on both containers", "on both services"),
    ("container's image", "service's image"),
    ("but its pod requests", "but its service reserves"),
    ("are hostNetwork pods bound to one node", "run with network_mode: host on one host"),
    ("are hostNetwork pods that never run on one node (their node selection or required anti-affinity keeps them "
     "apart)", "run with network_mode: host on different hosts (one Compose document each)"),
    ("so the decode dials its own node", "so the decode dials its own host"),
    ("or keep the pods on different nodes (required pod anti-affinity on kubernetes.io/hostname, or the port as a "
     "containerPort of both: with hostNetwork it is a host port the scheduler never places twice on one node)",
     "or run the services on different hosts (one Compose file per host)"),
)


#: Manifest wording -> the words of a Modelplane ModelDeployment: an engine member's GPUs are the count of the GPU
#: request in its ``nodeSelector.devices``, which Modelplane's compose function turns into the DRA
#: ResourceClaimTemplate the pod claims (no ``nvidia.com/gpu`` limit; :func:`pdd_operator.compat.modelplane.gpu_request`).
MODELPLANE_TERMS: tuple[tuple[str, str], ...] = (
    (GPU_COUNT_FIELD, "engine member's nodeSelector.devices (the count of its GPU request, which Modelplane claims for "
     "the pod through a DRA ResourceClaimTemplate)"),
)


def in_modelplane_terms(text: str) -> str:
    """``text`` (a fix in a hand-written manifest's terms) in the terms of a Modelplane ModelDeployment
    (:data:`MODELPLANE_TERMS`)."""
    for manifest, modelplane in MODELPLANE_TERMS:
        text = text.replace(manifest, modelplane)
    return text


def in_compose_terms(text: str) -> str:
    """``text`` (a fix or message in a hand-written manifest's terms) in the terms of a Compose file
    (:data:`COMPOSE_TERMS`)."""
    for manifest, compose in COMPOSE_TERMS:
        text = text.replace(manifest, compose)
    return text


#: A manifest field's place in a container (:func:`manifest_fields`) -> the Compose service's key that holds it.
COMPOSE_FIELDS: tuple[tuple[str, str], ...] = (
    ("resources", "deploy.resources.reservations.devices"),
    ("securityContext.capabilities", "cap_add"),
    ("securityContext.runAsNonRoot", "user"),
    ("hostNetwork", "network_mode"),
)


def compose_fields(fields: list[str], containers: tuple[tuple[str, str], ...]) -> list[str]:
    """``fields`` (paths of a manifest, :func:`manifest_fields`) for engines of Compose services, whose "container" is
    ``<file> (Compose) services.<name>``: ``.env[NAME]`` as ``.environment.NAME``, the places of
    :data:`COMPOSE_FIELDS` as the service's keys, the rest as written (``.command``, ``.entrypoint``, ``.image``).
    Order kept, duplicates dropped."""
    out: list[str] = []
    for field in fields:
        where = next((c for c, _ in containers if field.startswith(c + ".")), None)
        rest = field[len(where) + 1:] if where is not None else ""
        name = re.fullmatch(r"env\[(.+)\]", rest)
        text = f"{where}.environment.{name.group(1)}" if name and where else (
            f"{where}.{dict(COMPOSE_FIELDS)[rest]}" if where and rest in dict(COMPOSE_FIELDS) else field)
        if text not in out:
            out.append(text)
    return out


def in_manifest_terms(text: str) -> str:
    """``text`` (a fix written in PDDeployment terms) in the terms of a hand-written manifest."""
    for pdd, manifest in MANIFEST_TERMS:
        text = text.replace(pdd, manifest)
    return text


#: Where a PDDeployment field lives in a hand-written manifest, longest prefix first: ``env`` (the container's
#: env, with the variable's name where one variable carries it), ``image``, ``resources`` (the container's
#: limits), ``pod`` (a field of the pod spec), ``config`` (the model's config.json, which the manifest does not
#: hold) or ``flags`` (the container's vLLM flags: every other setting is a ``vllm serve`` flag).
MANIFEST_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("spec.kvTransfer.sideChannelPort", "env", "VLLM_NIXL_SIDE_CHANNEL_PORT"),
    ("spec.network.ucx.netDevices", "env", "UCX_NET_DEVICES"),
    ("spec.network.ucx", "env", ""),
    ("spec.kvCache.ssmConvStateLayout", "env", "VLLM_SSM_CONV_STATE_LAYOUT"),
    ("spec.engine.env", "env", ""),
    ("spec.prefill.env", "env", ""),
    ("spec.decode.env", "env", ""),
    ("spec.engine.vllmVersion", "image", ""),
    ("spec.engine.image", "image", ""),
    ("spec.network.rdma", "resources", ""),
    ("spec.network.dra", "pod", "resourceClaims"),
    ("spec.network.networks", "pod", "metadata.annotations[k8s.v1.cni.cncf.io/networks]"),
    ("spec.network.hostNetwork", "pod", "hostNetwork"),
    ("spec.placement.gpuProduct", "pod", "nodeSelector"),
    ("spec.network.preflight", "securityContext", ""),
    ("spec.model.numKvHeads", "config", ""),
    ("spec.model.mambaNGroups", "config", ""),
    ("spec.model.architecture", "config", ""),
    ("spec.model.hfArchitecture", "config", ""),
    ("spec.model.ssmKind", "config", ""),
    ("spec.model.configMapRef", "config", ""),
)


def _pod_path(container: str) -> str:
    """The pod spec holding ``container`` (``... spec.template.spec.containers[0]`` -> ``... spec.template.spec``)."""
    for marker in (".containers[", ".mainContainer"):
        if marker in container:
            return container.rsplit(marker, 1)[0]
    return container


def manifest_fields(fields: tuple[str, ...] | list[str], containers: tuple[tuple[str, str], ...],
                    in_manifest: tuple[str, ...] = ()) -> list[str]:
    """``fields`` (PDDeployment paths, as rules declare them) as paths of the user's own manifest.

    ``containers`` is :attr:`PDPair.containers <pdd_operator.compat.pair.PDPair.containers>`: ``(path, flags
    key)`` of the prefill and the decode container; empty for a PDDeployment, whose ``fields`` are returned
    unchanged (the webhook and status speak of them). ``spec.prefill.*`` / ``spec.decode.*`` name that role's
    container, every other field both; the place in the container follows :data:`MANIFEST_FIELDS` (e.g.
    ``spec.prefill.tensorParallelSize`` -> ``Deployment/x-prefill spec.template.spec.containers[0].args``,
    ``spec.network.ucx.netDevices`` -> ``... .env[UCX_NET_DEVICES]``). A rule's ``in_manifest`` paths, when
    given, name the places in each container instead. Order kept, duplicates dropped.
    """
    if not containers:
        return list(fields)
    if in_manifest:
        return [f"{container}.{p}" for container, _ in containers for p in in_manifest]
    out: list[str] = []
    for field in fields:
        place, name = next(((k, n) for prefix, k, n in MANIFEST_FIELDS if field == prefix or field.startswith(prefix + ".")),
                           ("image" if field == "spec.engine" else "flags", ""))
        if place == "config":
            paths = ["config.json (pdd check --model-config)"]
        else:
            roles = containers[:1] if field.startswith("spec.prefill.") else (
                containers[1:] if field.startswith("spec.decode.") else containers)
            paths = []
            for container, flags_key in roles:
                if place == "pod":
                    paths.append(f"{_pod_path(container)}.{name}")
                elif place == "flags":
                    paths.append(f"{container}.{flags_key}")
                else:
                    paths.append(f"{container}.{place}" + (f"[{name}]" if name else ""))
        out.extend(p for p in paths if p not in out)
    return out


#: Every registered rule, in registration (= evaluation) order.
REGISTRY: list[Rule] = []


def _register(r: Rule) -> Rule:
    if any(old.id == r.id for old in REGISTRY):
        raise RuntimeError(f"duplicate rule id {r.id!r}")
    if not r.summary:
        raise RuntimeError(f"rule {r.id!r} has no summary (docstring)")
    REGISTRY.append(r)
    return r


def rule(
    *, id: str, family: str, severity: Literal["error", "warning"], fields: tuple[str, ...], source: str,
    since: Version | None = None, until: Version | None = None, example: str = "", in_manifest: tuple[str, ...] = (),
    needs: tuple[str, ...] = (), without_connector: bool = False, any_release: bool = False, p2p_nccl: bool = False,
    moriio: bool = False, one_engine: bool = False,
) -> Callable[[Check], Check]:
    """Register the decorated check function as rule ``id``; its docstring's first line is the summary.

    Raises ``RuntimeError`` at import for a duplicate id or a missing docstring.
    """

    def wrap(check: Check) -> Check:
        summary = (check.__doc__ or "").strip().splitlines()[0] if check.__doc__ else ""
        _register(Rule(id=id, family=family, severity=severity, summary=summary, fields=tuple(fields),
                       source=source, check=check, since=since, until=until, example=example,
                       in_manifest=tuple(in_manifest), needs=tuple(needs), without_connector=without_connector,
                       any_release=any_release, p2p_nccl=p2p_nccl, moriio=moriio, one_engine=one_engine))
        return check

    return wrap


def record(
    *, id: str, family: str, severity: Literal["error", "warning"], summary: str, fields: tuple[str, ...],
    source: str, reported_by: str,
) -> str:
    """Register an id that no check function reports (``reported_by`` does); returns the id."""
    _register(Rule(id=id, family=family, severity=severity, summary=summary, fields=tuple(fields), source=source,
                   reported_by=reported_by))
    return id
