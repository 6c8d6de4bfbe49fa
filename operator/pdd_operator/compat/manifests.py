"""Read P/D deployments people write today (not PDDeployments) into :class:`PDPair` objects.

Supported: plain Deployments, StatefulSets, Pods and Jobs whose containers run ``vllm serve`` (or
``python -m vllm.entrypoints.openai.api_server``) with a ``--kv-transfer-config``; LeaderWorkerSets
and LWS DisaggregatedSets; KServe LLMInferenceServices and LLMInferenceServiceConfigs (``spec.template`` /
``spec.prefill.template``); NVIDIA Dynamo DynamoGraphDeployments (``extraPodSpec.mainContainer`` running
``dynamo.vllm``).

Rather than one parser per CRD, every document is walked for pod specs (a mapping with a
``containers`` list) and Dynamo main containers; each vLLM engine found becomes a candidate whose role
comes, in order, from ``kv_role`` in its ``--kv-transfer-config``, Dynamo's ``--is-prefill-worker``
/ ``--disaggregation-mode`` / ``subComponentType`` / v1beta1 ``type``, a role label, or the words
prefill/decode in the path or names around it; a Dynamo vLLM worker with none of its role flags (nor
``DYN_VLLM_DISAGGREGATION_MODE`` & co.) is the decode (or aggregated) worker whatever its labels and names say
(:func:`dynamo_default_role`). An engine without any KV connector is kept when its
role comes from such a structural hint (not from a name alone): it sits in a P/D topology and
``kv-connector-missing`` reports it.

Pairing (:func:`pair_engines`) joins only roles of one deployment: same namespace and model, and one
object, the same owner, the same labels once the role label is set aside, or the same name once the
role word is removed; failing those, the only prefill and the only decode engine of a model in a
namespace, or every engine of one side with the only engine of the other side (one decode behind several
prefill pools, as llm-d's context-length-aware guide deploys). Each pair says how it was formed
(``PDPair.paired_by``).

P/D engines this checker cannot read are returned as :class:`Unreadable` (SGLang and TensorRT-LLM engines; vLLM on
the Neuron and Ascend platform plugins; a KServe LLMInferenceService whose engine command comes from KServe's
templates; Helm values, or any object with no engine container, that configure KV transfer),
so that they are reported as "not checked" instead of passing silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

from pdd_operator.api.status import Finding
from pdd_operator.compat.config_files import unread_config_file
from pdd_operator.compat.dynamo_devices import resolve_component_devices
from pdd_operator.compat.dynamo_engine_defaults import (
    added_block_size,
    added_connector,
    added_kv_events,
    added_kv_events_ports,
    dynamo_release,
    overwritten_connector,
    pre_1_0_flag,
)
from pdd_operator.compat.dynamo_resources import (
    MultinodeLaunch,
    component_multinode,
    multinode_count,
    multinode_launch,
    service_resources,
    with_service_resources,
)
from pdd_operator.compat.kserve_merge import model_source, release_of, template_variant, well_known_configs
from pdd_operator.compat.modelplane import resolve_modelplane_plumbing
from pdd_operator.compat.pair import PDPair, RoleConfig, partly_read_kv_transfer, role_from_container, unwrap_connector
from pdd_operator.compat.pd_proxy import routing_sidecar_image
from pdd_operator.compat.ray_serve import connectorless_note, pd_applications, ray_serve_scan
from pdd_operator.compat.role_templates import resolve_role_templates
from pdd_operator.compat.rules.base import SCRIPT_KIND
from pdd_operator.compat.rules.engine_args import malformed_option_findings
from pdd_operator.compat.templated import (
    ADDITIONAL_ARGS_ENV,
    TEMPLATE_MODEL_PATH,
    Reads,
    own_line_without_connector,
    template_engine,
    template_reads,
    templated_findings,
    templated_pair_findings,
)
from pdd_operator.vllm.args import POD_IP, container_env, container_launches, env_values, parse_flags
from pdd_operator.vllm.entrypoint import entrypoint_unread, leading_entry, leading_serve, repeated_entrypoint
from pdd_operator.vllm.expansion import opaque_value, runs_shell, shell_operands, unknown, unknown_names
from pdd_operator.vllm.known_bad import nixl_version
from pdd_operator.vllm.known_models import served_as_known
from pdd_operator.vllm.model_config import resolve_model
from pdd_operator.vllm.script import Launch, opaque_command, simple_commands
from pdd_operator.vllm.versions import (
    Version,
    custom_tag_version,
    dev_build,
    dev_build_note,
    fmt,
    image_repository,
    image_version_text,
    is_vllm_image,
    rules_version,
    tag_uncertainty,
    unknown_tag_note,
    version_from_image,
)

#: The role of an E/P/D encode worker (:func:`encode_worker`): an :class:`Engine` of it is never paired.
ENCODE = "encode"
_ROLE_WORDS = {"prefill": "prefill", "prefiller": "prefill", "decode": "decode", "decoder": "decode"}
_ROLE_LABELS = ("llm-d.ai/role", "pdd-operator.dev/role", "app.kubernetes.io/component", "role",
                "leaderworkerset.sigs.k8s.io/role", "disaggregatedset.x-k8s.io/role")


@dataclass(frozen=True)
class Engine:
    """A vLLM engine container found in a manifest.

    Attributes:
        where: ``Kind/name`` of the object and the path to the container, for messages.
        role: ``prefill``, ``decode``, ``both`` (kv_both with no other hint), :data:`ENCODE` (an E/P/D encode worker,
            never paired: :func:`encode_worker`; ``role_from`` then names what says so) or ``None`` (unknown).
        config: its settings.
        pod_id: identity of the pod spec it sits in (engines in one pod share a network namespace).
        namespace: the object's namespace (``default`` when not written).
        doc_id: identity of the top-level object it was found in.
        group: the pod's and object's labels without role labels or values naming a role (sorted pairs).
        stem: the object's name with the role word removed (``llama-prefill`` -> ``llama``).
        owners: ``Kind/name`` of the object's ownerReferences.
        role_from: what told the role: ``kv_role``, ``flag``, ``type``, ``label``, ``name`` or ``proxy`` (the
            script's P/D proxy names the engine's ``--port``, :attr:`~pdd_operator.vllm.script.Launch.proxy_role`).
        container: the object and path of the container (``where`` without the container's name).
        flags_key: the container field that holds vLLM's flags: ``args``, or ``command`` when it has no args.
        role_unknown: why the engine's role cannot be told although something around it names one (a flag that
            decides it has a value not in these files: :func:`_unknown_role_flag`); ``""`` otherwise. Such an engine
            is never paired: its role is ``None``.
        dynamo_roleless: a ``dynamo.vllm`` worker that nothing Dynamo's worker reads gives a role
            (:func:`dynamo_default_role`: no role flag, no role variable), whatever a name, label or
            ``subComponentType`` / v1beta1 ``type`` says: Dynamo registers it as the decode/aggregated ``backend``.
    """

    where: str
    role: str | None
    config: RoleConfig
    pod_id: int
    namespace: str = "default"
    doc_id: int = 0
    group: tuple[tuple[str, str], ...] = ()
    stem: str = ""
    owners: tuple[str, ...] = ()
    role_from: str = ""
    container: str = ""
    flags_key: str = "args"
    role_unknown: str = ""
    dynamo_roleless: bool = False


@dataclass(frozen=True)
class Unreadable:
    """A prefill/decode engine this checker cannot read, and why (reported as "not checked").

    ``findings``: what vLLM refuses in it all the same, from the parts of it the manifest does hold
    (:func:`~pdd_operator.compat.templated.templated_findings`); ``()`` for none. ``version``: the vLLM version
    those findings were judged for (``"unknown"`` without findings).
    """

    where: str
    reason: str
    findings: tuple[Finding, ...] = ()
    version: str = "unknown"


def _role_hint(text: str) -> str | None:
    """The role a name or label value names: ``prefill``, ``decode``, or ``None`` for neither or both.

    A value naming both roles (``prefill-decode``, a pod running both engines) says nothing about which
    role one engine has, so the hints around that engine (its container's name) decide instead.
    """
    roles = {_ROLE_WORDS[word] for word in re.split(r"[^a-z]+", text.lower()) if word in _ROLE_WORDS}
    return roles.pop() if len(roles) == 1 else None


def _labels_role(labels: dict | None) -> str | None:
    for key in _ROLE_LABELS:
        value = (labels or {}).get(key)
        if isinstance(value, str) and _role_hint(value):
            return _role_hint(value)
    return None


def _classify(
    argv: list[str], kv_role: str | None, context: list[str], labels_role: tuple[str, str] | None
) -> tuple[str | None, str]:
    if kv_role in ("kv_producer", "kv_consumer"):
        by_role = "prefill" if kv_role == "kv_producer" else "decode"
        # The deployment's own role (a Dynamo flag, a role label, a name) against a kv_role that says the opposite:
        # the engine is paired by its own role and the kv_role is judged (kv-role-contradicts-role), not obeyed.
        own, source = _classify(argv, None, context, labels_role)
        if own in ("prefill", "decode") and own != by_role:
            return own, source
        return by_role, "kv_role"
    _, flags = parse_flags(argv)
    if flags.get("--is-prefill-worker") is True or "--is-prefill-worker" in argv:
        return "prefill", "flag"
    if "--is-decode-worker" in argv:
        return "decode", "flag"
    mode = flags.get("--disaggregation-mode")
    if isinstance(mode, str) and mode in ("prefill", "decode"):
        return mode, "flag"
    if labels_role:
        return labels_role
    for text in reversed(context):
        hint = _role_hint(text)
        if hint:
            return hint, "name"
    return ("both" if kv_role == "kv_both" else None), ""


#: Flags that decide an engine's P/D role (Dynamo's worker: ``--is-prefill-worker``, ``--is-decode-worker``, and
#: ``--disaggregation-mode``, which replaced them).
_ROLE_FLAGS = ("--is-prefill-worker", "--is-decode-worker", "--disaggregation-mode")


def _unknown_role_flag(argv: list[str]) -> str | None:
    """Why the role flags (:data:`_ROLE_FLAGS`) of an engine's ``argv`` cannot be read, or ``None``: one has a value
    not in these files (``--disaggregation-mode $MODE``; ``--is-prefill-worker=<unknown:ROLE>``, a script whose
    branches differ on it), or, for Dynamo's worker, whose role only such a flag gives, a whole word of the command
    line is a variable not in these files (``$EXTRA_ARGS``) where a flag may stand, which may expand to one. The
    caller asks only where no literal flag or ``kv_role`` told the role."""
    _, flags = parse_flags(argv)
    for flag in _ROLE_FLAGS:
        value = flags.get(flag)
        names = unknown_names(value) if isinstance(value, str) else []
        if names:
            return f"its {flag} is the value of ${names[0]}, which is not in these files"
    if argv[:1] != ["dynamo.vllm"]:
        return None
    for before, word in zip(argv, argv[1:], strict=False):
        names = unknown_names(word)
        takes_value = before.startswith("-") and "=" not in before
        if names and word == f"<unknown:{names[0]}>" and not takes_value:
            return (f"its command line holds ${names[0]}, which is not in these files and may hold "
                    "--is-prefill-worker or --disaggregation-mode")
    return None


#: ``dynamo.vllm`` flags that make the worker the ENCODE worker of a multimodal encode/prefill/decode (E/P/D) graph:
#: ``--multimodal-encode-worker`` (ai-dynamo 0.7.0 on; the ``encoder`` component in 0.7.1-0.9.1 args.py, e.g. 0.8.1
#: lines 294-296; from 1.1.0 a deprecated alias of ``--disaggregation-mode encode``, 1.1.0 backend_args.py lines
#: 391-404) and ``--vllm-native-encoder-worker`` (0.9.1 args.py lines 352-370: the ``encoder`` component, vLLM's own
#: encoder writing through an EC connector). ``--disaggregation-mode encode`` (1.1.0 on: ``component = "encode"``,
#: 1.6.1 args.py lines 253-255) and the variables :data:`_DYNAMO_ENCODE_ENV` say the same.
_ENCODE_FLAGS = ("--multimodal-encode-worker", "--vllm-native-encoder-worker")
#: Variables from which ``dynamo.vllm`` 1.1.0 on reads the encode role (backend_args.py ``env_var=``), with the value
#: that sets it.
_DYNAMO_ENCODE_ENV = (("DYN_VLLM_DISAGGREGATION_MODE", ("encode",)),
                      ("DYN_VLLM_MULTIMODAL_ENCODE_WORKER", ("1", "true", "yes", "on")))


def encode_worker(argv: list[str], config: RoleConfig) -> str:
    """How the engine started by ``argv`` (settings ``config``) is the encode worker of an E/P/D deployment, in the
    user's words (``--multimodal-encode-worker``), or ``""`` for a prefill, decode or aggregated engine.

    An encode worker runs a multimodal model's encoder and hands its outputs to the prefill (Dynamo's own embedding
    transfer, or vLLM's EC connector); it serves no P/D role and is never paired as a prefill or decode, whatever KV
    connector it carries (Dynamo's dual-encoder example gives its encoders NixlConnector ``kv_both`` configs). Read:
    Dynamo's flags and variables (:data:`_ENCODE_FLAGS`, ``--disaggregation-mode encode``, :data:`_DYNAMO_ENCODE_ENV`)
    on ``dynamo.vllm``, and for any vLLM engine an ``--ec-transfer-config`` whose ``ec_role`` is ``ec_producer``, with
    or without a KV connector: such an engine runs the encoder only and allocates no KV cache
    (``get_kv_cache_spec`` returns ``{}`` for an EC producer: gpu_model_runner.py 0.12.0 lines 5323-5324;
    ``ECTransferConfig.is_encode_only``, vllm/config/ec_transfer.py 0.34.0 lines 100-107), as vLLM's E/P/D examples
    start their encoder (examples/disaggregated/disaggregated_encoder/disagg_1e1p1d_example.sh 0.34.0). Pure."""
    _, flags = parse_flags(argv)
    if argv[:1] == ["dynamo.vllm"]:
        for flag in _ENCODE_FLAGS:
            if flags.get(flag) is True or flag in argv:
                return flag
        if flags.get("--disaggregation-mode") == "encode":
            return "--disaggregation-mode encode"
        for name, values in _DYNAMO_ENCODE_ENV:
            if str(config.env.get(name, "")).strip().lower() in values:
                return f"{name}={config.env[name]}"
    if config.ec_transfer_written.get("ec_role") == "ec_producer":
        return "--ec-transfer-config with ec_role ec_producer"
    return ""


#: Environment variables from which Dynamo's vLLM worker 1.0.0 and later also reads its role (components/src/dynamo/
#: vllm/backend_args.py ``env_var=``: ``DYN_VLLM_DISAGGREGATION_MODE``, and the deprecated
#: ``DYN_VLLM_IS_PREFILL_WORKER`` / ``DYN_VLLM_IS_DECODE_WORKER``, read in the ai-dynamo 1.0.0 wheel; 1.6.1 keeps the
#: first). Releases before 1.0 (args.py, argparse flags only: read in the 0.6.0, 0.8.1 and 0.9.1 wheels) read none.
_DYNAMO_ROLE_ENV = ("DYN_VLLM_DISAGGREGATION_MODE", "DYN_VLLM_IS_PREFILL_WORKER", "DYN_VLLM_IS_DECODE_WORKER")


def dynamo_default_role(argv: list[str], config: RoleConfig, container: dict) -> bool:
    """Whether ``argv`` runs Dynamo's vLLM worker (``python -m dynamo.vllm``) with nothing that gives it a role, so
    that it is the decode (or aggregated) worker: no role flag (:data:`_ROLE_FLAGS`) and no role variable
    (:data:`_DYNAMO_ROLE_ENV`) in ``config.env`` (the container's and the script's) or possibly in an ``envFrom``
    of ``container`` these files do not hold.

    Dynamo's worker registers as the ``prefill`` component only for ``--is-prefill-worker`` (before 1.0) or
    ``--disaggregation-mode prefill`` (1.x), and as the ``backend`` component otherwise: the component the frontend
    sends decode (after a prefill worker's remote prefill) and aggregated requests to. Read in the ai-dynamo wheels:
    0.6.0 dynamo/vllm/args.py l.158 ``config.component = "prefill" if args.is_prefill_worker else "backend"``;
    0.9.1 args.py l.382-386 (the same, after the multimodal cases); 1.0.0 args.py l.164-168 and 1.6.1 l.257-261
    (``DisaggregationMode.PREFILL`` -> ``"prefill"``, else ``"backend"``; the mode's default is ``agg``,
    backend_args.py ``--disaggregation-mode`` help). Pure."""
    if argv[:1] != ["dynamo.vllm"] or any(flag in argv or flag in parse_flags(argv)[1] for flag in _ROLE_FLAGS):
        return False
    cenv = container_env(container)
    return not any(name in config.env or cenv.may_define(name) for name in _DYNAMO_ROLE_ENV)


#: The name under which a Dynamo worker's own side-channel port is shown (:data:`_DYNAMO_SIDE_CHANNEL_PORT`).
_DYNAMO_PORT_NAME = "DYNAMO_NIXL_SIDE_CHANNEL_PORT"
#: Why a ``dynamo.vllm`` worker of an unknown Dynamo release (no ``vllm-runtime`` tag: a script, another image) and
#: no ``VLLM_NIXL_SIDE_CHANNEL_PORT`` of its own listens on a side-channel port not in the files: Dynamo releases of
#: the ``--is-prefill-worker`` era reserve a free port per worker in etcd and export it before vLLM starts
#: (components/backends/vllm/src/dynamo/vllm/args.py ``configure_ports_with_etcd`` ->
#: ``allocate_and_reserve_port(reason="nixl_side_channel_port")``, then ``set_side_channel_host_and_port``), so two
#: workers of one host never share it (ai-dynamo/dynamo#3046 ran a prefill and a decode worker per node that way);
#: later ones only set the host (``ensure_side_channel_host``) and leave vLLM's default port.
_DYNAMO_SIDE_CHANNEL_PORT = ("Dynamo's vLLM worker reserves it in etcd and exports it at startup in some releases "
                             "(args.py configure_ports_with_etcd), and leaves vLLM's default in later ones; the "
                             "Dynamo release is not known here")


#: The name of the simulators of vLLM's API among :data:`_OTHER_PD_ENGINES`: a container running one starts no engine
#: at all (no vLLM, no KV transfer), so a deployment whose roles run only simulators deploys no P/D pair: nothing to
#: check, as for roles that only sleep (:func:`idle_workload`), not a P/D deployment left unchecked.
SIMULATOR = "vLLM API simulator"
#: Other engines' disaggregated servers, which these rules (vLLM's NixlConnector) do not describe: the name,
#: what in the command or what in the image's name says the engine, what says the container serves a P/D role
#: besides a role label (SGLang's ``--disaggregation-mode``; TensorRT-LLM's context/generation servers are
#: plain ``trtllm-serve`` with a cache transceiver in their options, ``trtllm-serve disaggregated`` the router),
#: and why such a server is not checked. The simulators answer vLLM's HTTP API for a model name without running
#: an engine or moving KV (ai-dynamo/dynamo ``dynamo.mocker``, images ``dynamo-mocker-*``; llm-d's
#: ``llm-d-inference-sim``), as router examples use them (volcano-sh/kthena examples/kthena-router).
_OTHER_PD_ENGINES = (
    ("SGLang", re.compile(r"\bsglang\b"), ("sglang",), re.compile(r"--disaggregation-mode"),
     "these rules describe vLLM's NixlConnector, not SGLang's disaggregation"),
    ("TensorRT-LLM", re.compile(r"\btrtllm-serve\b|\btensorrt_llm\b|\bdynamo\.trtllm\b"), ("tensorrt",),
     re.compile(r"\bdisaggregated\b|TRTLLM_USE_(NIXL|UCX|MPI)_KVCACHE|cache_transceiver"),
     "these rules describe vLLM's NixlConnector, not TensorRT-LLM's disaggregation"),
    (SIMULATOR, re.compile(r"\bdynamo\.mocker\b|\bllm-d-inference-sim\b"),
     ("dynamo-mocker", "llm-d-inference-sim"), re.compile(r"--disaggregation-mode|\b(prefill|decode)\b"),
     "a simulator answers vLLM's API without running vLLM or moving KV, so there is no vLLM pair to check"),
)


#: Launchers of a vLLM platform plugin that start the prefill and decode engines themselves from flags of their own,
#: so that neither the engines' vLLM commands nor their KV connector are in the manifest or script: the launcher,
#: what names it in a command, what in an image name, what marks its P/D flags, and why it is not checked. Qualcomm's
#: vllm-qaic: the ``cloud_ai_inference_vllm_disagg`` image's ``qaic_disagg`` entrypoint takes ``--prefill-port``/
#: ``--decode-port`` and ``--prefill-device-group``/``--decode-device-group`` and runs a prefill and a decode vLLM
#: engine on QAIC device groups behind one router, moving KV with vllm-qaic's own QaicConnector (qualcomm/vllm-qaic
#: docs/docs/user_guide/features/disaggregated_serving.md at 006b2da, vllm_qaic/distributed/kv_transfer/kv_connector/
#: v1/qaic_connector.py at dc7351f; the plugin builds on vLLM v0.23.0, pyproject.toml).
_PLATFORM_PD_LAUNCHERS = (
    ("Qualcomm's qaic_disagg launcher (vllm-qaic)", re.compile(r"\bqaic_disagg\b"), ("cloud_ai_inference_vllm_disagg",),
     re.compile(r"--(?:prefill|decode)-(?:port|device-group|max-num-seqs|override-qaic-config)\b"),
     "it starts its prefill and decode vLLM engines itself, on vllm-qaic's QAIC platform plugin with the plugin's own "
     "KV connector, from flags of its own: neither the engines' vLLM commands nor their KV transfer configuration "
     "are in these files, and these rules describe upstream vLLM's connectors"),
)


def platform_pd_launcher(text: str) -> tuple[str, str] | None:
    """``(launcher, why it is not checked)`` when ``text`` (a shell script, or a container's command, args and image
    joined) runs a platform plugin's own P/D launcher with its prefill/decode flags (:data:`_PLATFORM_PD_LAUNCHERS`),
    else ``None``."""
    lowered = text.lower()
    for launcher, in_command, in_image, pd_marker, why in _PLATFORM_PD_LAUNCHERS:
        if (in_command.search(text) or any(x in lowered for x in in_image)) and pd_marker.search(text):
            return launcher, why
    return None


def other_pd_engine_script(text: str) -> tuple[str, str] | None:
    """``(engine, why it is not checked)`` when ``text`` (a shell or Slurm batch script) starts another engine's
    disaggregated servers (:data:`_OTHER_PD_ENGINES`: a program or module of that engine in a command, never a flag's
    value, :func:`program_words`, and its P/D marker, e.g. SGLang's ``python3 -m sglang.launch_server
    --disaggregation-mode prefill``, sgl-project/sglang#18389), else ``None``. Comment lines are left out. Pure."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    words = program_words(lines)
    body = "\n".join(lines)
    for engine, in_command, _in_image, pd_marker, why in _OTHER_PD_ENGINES:
        if any(in_command.search(w) for w in words) and pd_marker.search(body):
            return engine, why
    return None


#: Bare names of another engine that a flag takes as its VALUE (a protocol or backend it speaks, not a program it
#: runs): llm-d's routing sidecar ``-connector=sglang`` / ``--kv-connector sglang`` (llm-d-inference-scheduler
#: ``pd-sidecar``), a router's ``--backend sglang``, Dynamo's frontend ``--router-mode``/``--engine`` values.
_ENGINE_VALUE_NAMES = frozenset({"sglang", "trtllm", "tensorrt_llm", "tensorrt-llm", "mocker"})
#: Words of a command line or script: whitespace and the shell's separators split them, quotes do not count.
_WORD_SPLIT = re.compile(r"""[\s;&|()`'"]+""")
#: Short flags after which a program or module follows, not a value: ``python -m``, ``sh -c``, ``bash -lc``/``-ec``.
_RUNS_NEXT = re.compile(r"^-[a-z]{0,3}[cm]$")


def program_words(command: list[str]) -> list[str]:
    """The words of ``command`` (a container's command and args; a ``sh -c`` script is split into its words) that
    may name a program or module it runs: every word but a flag's value. A value is what follows ``=`` in a flag
    (``-connector=sglang``: only ``-connector`` is kept) and a bare engine name (:data:`_ENGINE_VALUE_NAMES`) right
    after a flag (``--kv-connector sglang``); what follows ``python -m`` or ``sh -c`` is kept (``-m
    sglang.launch_server``, ``bash -lc "sglang serve ..."``).
    Pure."""
    words = [w for x in command for w in _WORD_SPLIT.split(x) if w]
    out: list[str] = []
    for before, word in zip([""] + words, words, strict=False):
        if word.startswith("-") and "=" in word:
            out.append(word.split("=", 1)[0])
        elif not (before.startswith("-") and not _RUNS_NEXT.match(before) and "=" not in before
                  and word.lower() in _ENGINE_VALUE_NAMES):
            out.append(word)
    return out


def _other_pd_engine(command: list[str], image: str, env_names: list[str],
                     role_label: bool) -> tuple[str, bool, str] | None:
    """``(engine, serves a P/D role, why it is not checked)`` when the container runs another engine than vLLM (or
    a simulator of it), else ``None``.

    command: the container's command and args; image: its image; env_names: its environment variables'
    names; role_label: a role label or type sits on the container's pod or object. The engine is told by its image
    or by a program or module its command runs (:func:`program_words`), never by a flag's value: a sidecar beside
    a vLLM engine whose ``--kv-connector=sglang`` names the protocol it speaks (llm-d's routing sidecar) runs no
    SGLang, and the pod's vLLM engine is judged.
    """
    text = " ".join(command + env_names)
    name = image.split("@", 1)[0].lower()
    words = program_words(command)
    for engine, in_command, in_image, pd_marker, why in (*_OTHER_PD_ENGINES, *_PLATFORM_PD_LAUNCHERS):
        if any(in_command.search(x) for x in words) or any(x in name for x in in_image):
            return engine, role_label or bool(pd_marker.search(text)), why
    return None


#: DAS's vLLM build for Hygon HCUs/DCUs (OpenDAS/vllm with vllm-plugin-das), as messages name it.
DAS_PLUGIN = "vllm-plugin-das (Hygon HCU/DCU, DAS's vLLM build)"


#: vLLM platform plugins whose own worker lays out and registers the KV cache (the shapes, layouts and NIXL memory
#: types these rules read in upstream vLLM's CUDA/ROCm source): the plugin, what in the image's name says it, and
#: the device-plugin resource prefixes that do (vllm-project/vllm-neuron#26: the Neuron worker needed its own
#: get_kv_cache_shape and KV staging for NixlConnector; vllm-project/vllm-ascend#1984: NIXL between Ascend NPUs;
#: HYGON-AI/vllm-plugin-das PR 7: Mooncake between Hygon HCUs; its images are harbor.sourcefind.cn:5443/dcu/...).
_PLATFORM_PLUGINS = (
    ("vllm-neuron (AWS Trainium/Inferentia)", ("neuronx", "vllm-neuron"), ("aws.amazon.com/neuron",)),
    ("vllm-ascend (Huawei Ascend NPU)", ("vllm-ascend",), ("huawei.com/ascend",)),
    (DAS_PLUGIN, ("sourcefind.cn/", "sourcefind.cn:", "/dcu/"), ("hygon.com/",)),
)
#: Variables only DAS's vLLM build for Hygon HCUs and its vllm-plugin-das read (``VLLM_HCU_USE_FLASHMLA``,
#: ``VLLM_HCU_ALL2ALL_BACKEND``, ... in HYGON-AI/inference-cookbook-das docs/frameworks/mooncake.md; no upstream
#: release read, 0.12.0, 0.18.1, 0.23.0, 0.34.0, names one): an engine whose environment sets one runs that build, whose
#: Mooncake transfer and KV layout are the plugin's (HYGON-AI/vllm-plugin-das PR 7: HCU Mooncake block-first transfer,
#: region registration and asymmetric-TP head slices), and whose parser takes flags upstream's has not.
_DAS_ENV_PREFIX = "VLLM_HCU_"


def _das_build(env: dict) -> str | None:
    """:data:`DAS_PLUGIN` where the engine's environment (``env``: name -> value) sets a ``VLLM_HCU_*`` variable."""
    return DAS_PLUGIN if any(str(k).startswith(_DAS_ENV_PREFIX) for k in env) else None


def _platform_plugin(container: dict, image: str) -> str | None:
    """The vLLM platform plugin a container runs on (see ``_PLATFORM_PLUGINS``), or ``None`` for upstream vLLM."""
    name = image.split("@", 1)[0].lower()
    resources = container.get("resources") if isinstance(container.get("resources"), dict) else {}
    keys = [str(k).lower() for part in ("limits", "requests") if isinstance(resources.get(part), dict)
            for k in resources[part]]
    for plugin, in_image, prefixes in _PLATFORM_PLUGINS:
        if any(x in name for x in in_image) or any(k.startswith(prefixes) for k in keys):
            return plugin
    return None


def _opaque_kv_transfer_config(argv: list[str], command: list[str], container: dict | None = None) -> str | None:
    """Why the engine's ``--kv-transfer-config`` is not in the manifest (:func:`~pdd_operator.vllm.expansion.
    opaque_value`), or ``None``. Every other rule reads that value, so such an engine is not checked at all. ``None``
    too where only some values inside its JSON are unknown and its connector, module path, role and extra config
    object are written (:func:`~pdd_operator.compat.pair.partly_read_kv_transfer`): the engine is read, and only the
    rules that read an unknown value are "not checked" for it (``compat.rules.base.run_check``)."""
    env = container_env(container) if container is not None else None
    flags = parse_flags(argv)[1]
    why = opaque_value(flags.get("--kv-transfer-config"), command, env)
    if why and partly_read_kv_transfer(flags, (("--kv-transfer-config", why),), command, env) is not None:
        return None
    return why


def _engines(
    container: dict, pod_spec: dict, where: str, context: list[str], labels_role: tuple[str, str] | None,
    pod_meta: dict | None, pod_group: int = 1, replicas: int | None = 1, multinode: MultinodeLaunch | None = None,
    *, every_pod: bool = False,
) -> list[Engine | Unreadable]:
    """The P/D engines one container starts: one per engine process of its command or script
    (:func:`~pdd_operator.vllm.args.container_launches`), each with its own flags and the env its line sets; where
    a script starts more than one, ``where`` names the script line of each (``... line 7``, 1-based)."""
    image = str(container.get("image") or "")
    command = [str(x) for x in (container.get("command") or []) + (container.get("args") or [])]
    env_names = [str(e.get("name")) for e in container.get("env") or [] if isinstance(e, dict)]
    other = _other_pd_engine(command, image, env_names, labels_role is not None)
    if other:
        engine, serves_pd, why = other
        if serves_pd and engine != SIMULATOR:  # a simulator runs no engine: nothing of it to check
            return [Unreadable(where, f"a {engine} prefill/decode engine: {why}")]
        return []
    flags_as_script = _flags_as_script(command)
    if flags_as_script and (labels_role is not None or _PD_MARKER.search(" ".join(command))):
        return [Unreadable(where, flags_as_script)]
    found = container_launches(container, image_runs_vllm=is_vllm_image(image))
    if not found and (unknown_entry := _args_for_unknown_entrypoint(container, image, labels_role)):
        return [Unreadable(where, unknown_entry)]
    out = []
    members: list[tuple[int, dict]] = []  # (index in ``out``, flags) of each engine read, for :func:`pod_dp_ranks`
    for i, launch in enumerate(found):
        at = f"{where} line {launch.line}" if len(found) > 1 else where
        if len(found) > 1 and sum(x.line == launch.line for x in found) > 1:
            at += f" #{sum(x.line == launch.line for x in found[:i]) + 1}"  # a loop: the iteration
        hidden = opaque_command(launch)
        if hidden is not None:  # the script runs a command held in a variable whose value is not in these files
            if is_vllm_image(image) or re.search(r"vllm", " ".join(command), re.I):
                out.append(Unreadable(at, (
                    f"its script runs the command held in ${hidden} (exec/eval of a variable), whose value is not in "
                    "these files: which engine it starts, and with which flags, cannot be read. Write the command in "
                    f"the script (or ${hidden}'s value in the container's env) to have it checked")))
            continue
        engine = _engine(container, pod_spec, where, at, launch, context, labels_role, pod_meta, pod_group, replicas,
                         multinode, every_pod=every_pod)
        if engine:
            if isinstance(engine, Engine):
                members.append((len(out), parse_flags(list(launch.argv))[1]))
            out.append(engine)
            if launch.repeats:
                out.append(repeats_unread(at, launch))
    counts = pod_dp_ranks([(out[k].config, flags) for k, flags in members])
    for (k, _), count in zip(members, counts, strict=True):
        if count is not None:
            out[k] = replace(out[k], config=replace(out[k].config, pod_dp_ranks=count))
    return out


def pod_dp_ranks(members: list[tuple[RoleConfig, dict]]) -> list[int | None]:
    """For the engines one container starts (each its settings and its parsed flags, in launch order), the DP ranks
    of each engine's data-parallel group that the container starts, where it starts more than one engine of that
    group, else ``None``.

    A script that runs one ``vllm serve`` per GPU, each with its own ``--data-parallel-rank`` (external load
    balancing: one engine core each), starts all of them in one pod; they are one data-parallel group where they
    name the same ``--data-parallel-size`` (> 1), model, ``--data-parallel-address`` and ``--data-parallel-rpc-port``
    (vLLM joins every rank of a group at that address, v1/engine/utils.py launch_core_engines, config/parallel.py
    stateless_init_dp_group). The pod then starts the sum of their :attr:`RoleConfig.dp_local`; ``None`` where any
    of them is not known. Returns one entry per member."""
    def key(config: RoleConfig, flags: dict) -> tuple | None:
        if config.dp is None or config.dp <= 1 or config.dp_local is None:
            return None
        return (config.dp, config.model, flags.get("--data-parallel-address"), flags.get("--data-parallel-rpc-port"))

    keys = [key(config, flags) for config, flags in members]
    out: list[int | None] = []
    for k in keys:
        peers = [c for (c, _), other in zip(members, keys, strict=True) if k is not None and other == k]
        out.append(sum(c.dp_local or 0 for c in peers) if len(peers) > 1 else None)
    return out


#: vLLM's own flag for a KV connector (``--kv-transfer-config``, ``--kv_transfer_config``, dotted forms).
_ENGINE_KV_FLAG = re.compile(r"--kv[-_]transfer[-_]config")
#: How a "not checked" reason of :func:`_args_for_unknown_entrypoint` starts: a weaker note than a reader's own, which
#: :func:`scan` and the llm-d values reader drop where they say more (the values file, the chart's imageDefault).
UNKNOWN_ENTRYPOINT = "the entrypoint of "


def _args_for_unknown_entrypoint(container: dict, image: str, labels_role: tuple[str, str] | None) -> str | None:
    """Why a container whose ``args`` go to an ENTRYPOINT not known here is "not checked", or ``None``.

    A container without ``command`` runs its image's ENTRYPOINT with ``args`` appended. On an image that is not one
    of vLLM's (:func:`~pdd_operator.vllm.versions.is_vllm_image`) that ENTRYPOINT is not read, so ``args`` that
    carry a P/D engine's settings (a KV transfer config; or a bare ``serve`` in a container whose labels name a P/D
    role) and start no engine of their own (``serve``, a model, flags, ``-c`` and a script) cannot be read: ``serve M ...`` runs
    ``vllm serve M ...`` under an ENTRYPOINT of ``vllm`` and fails under one of ``vllm serve``
    (:mod:`pdd_operator.vllm.entrypoint`). The same holds for a container without ``command`` or such ``args``
    whose environment carries a KV transfer config (``EXTRA_ARGS='--kv-transfer-config {...}'``): an image's
    entrypoint script turns such a variable into flags (substratusai/vllm-docker's ``entrypoint.sh`` appends
    ``$EXTRA_ARGS``), which is read only where the Dockerfile that builds the image is given
    (:mod:`pdd_operator.compat.image_builds`). ``None`` for a container with a command, a vLLM image, or args and
    environment without such settings."""
    args = [str(x) for x in container.get("args") or []]
    if container.get("command"):
        return None
    carried = [str(e.get("name")) for e in container.get("env") or []
               if isinstance(e, dict) and _ENGINE_KV_FLAG.search(str(e.get("value") or ""))]
    if carried and not args and not image_repository(image).startswith("vllm/"):
        # a user's own image (even one named vllm) whose entrypoint script may read the variable; vLLM's own
        # images (Docker Hub's vllm organisation) run vllm serve, which reads no such variable
        return (f"{UNKNOWN_ENTRYPOINT}{image or 'its image'} is unknown (not read here). The container has no command, "
                f"and its variable {carried[0]} carries a KV transfer config (--kv-transfer-config) that the image's "
                "ENTRYPOINT (an entrypoint script) may pass to vLLM; which engine starts, and with which flags, cannot "
                "be read. Give pdd check the Dockerfile that builds the image, with the Makefile or Compose file that "
                "names its tag, or write the command (command: [vllm, serve]) in the container")
    if is_vllm_image(image) or not args:
        return None
    if not _ENGINE_KV_FLAG.search(" ".join(args)) and not (labels_role is not None and args[0] == "serve"):
        return None
    shown = " ".join(args[:2]) + (" ..." if len(args) > 2 else "")
    hint = (" (with an ENTRYPOINT of 'vllm' alone, 'serve ...' runs 'vllm serve ...'; with vLLM's own 'vllm serve' "
            "it runs 'vllm serve serve ...', which vLLM's parser refuses)" if args[0] == "serve" else "")
    return (f"{UNKNOWN_ENTRYPOINT}{image or 'its image'} is unknown (not read here). The container has no command, so the "
            f"image's ENTRYPOINT runs with its args ({shown}) appended{hint}; which engine starts, and with which "
            "flags, cannot be read. Write the command (command: [vllm, serve]) in the container to have it checked")


def _entrypoint_unread_reason(image: str, args: list[str]) -> str:
    """The "not checked" note for a P/D engine whose container has no ``command`` and whose ``args`` (a model,
    flags) go to the ENTRYPOINT of a vLLM image that was not read (:func:`~pdd_operator.vllm.entrypoint.
    entrypoint_unread`): an empty one runs the first arg as a program, ``vllm serve`` runs the engine; which, is not
    known, so the engine is not read as ``vllm serve``."""
    shown = " ".join(args[:2]) + (" ..." if len(args) > 2 else "")
    return (f"entrypoint of {image} unknown, give command: the container has no command, so the image's ENTRYPOINT "
            f"(not read here: docs/entrypoints.md) runs with its args ({shown}) appended. Under an ENTRYPOINT of "
            "'vllm serve' that starts the engine; under none (a CMD of /bin/bash, as vLLM's Dockerfile.rocm and "
            "Dockerfile.tpu set) the kubelet runs the first arg as a program and no engine starts. Write the "
            "command in the container (command: [vllm, serve]) to have it checked")


def repeats_unread(at: str, launch: Launch) -> Unreadable:
    """The "not checked" note for an engine its script starts an unknown number of times
    (:attr:`~pdd_operator.vllm.script.Launch.repeats`, a loop whose count is not read): the one engine read is
    judged, how many there are is not."""
    return Unreadable(at, (
        f"the number of engines it starts is not known: {launch.repeats}. The engine it starts is judged as one; "
        "the rules that count engines (GPUs and ports they share on one host, prefill and decode instances) did not "
        "see the others. Write the loop's count as a literal (for i in 0 1, {0..1}, $(seq 0 1)) to have it checked"))


def _flags_as_script(command: list[str]) -> str | None:
    """Why a container whose command is ``sh -c`` / ``bash -c`` followed by engine flags (``[/bin/bash, -c]`` with
    ``args: [--model, ...]``) starts no engine, or ``None`` for any other command.

    The kubelet runs command + args as one argv (Kubernetes docs, "Define a Command and Arguments for a
    Container"), so the shell gets ``-c --model ...``: POSIX ``sh -c`` takes the first operand after ``-c`` as its
    script and bash reads ``--model`` as an option of its own first, and both refuse it (bash: "--: invalid
    option", dash: "Illegal option --", exit 2). Dynamo's operator does not add the missing ``python3 -m
    dynamo.vllm``: it only inserts flags into an args string that already runs ``python ... dynamo.vllm``
    (deploy/cloud/operator/internal/dynamo backend_vllm.go / mutation ``injectFlagsIntoContainerCommand``, and
    ``injectFlagsIntoPythonCommand``'s pattern).
    """
    if len(command) < 3 or not runs_shell(command) or command[1] not in ("-c", "-lc", "-ec"):
        return None
    operands = shell_operands(command)
    if not operands or operands[0] != command[2]:  # ``-c -- SCRIPT``: the shell runs SCRIPT
        return None
    script = command[2].strip()
    if not script.startswith("-") or not any(w.startswith("--") for w in command[2:]):
        return None
    flags = " ".join(command[2:5])
    return (f"its command is {command[0]} {command[1]} followed by the engine's flags ({flags} ...), not by a "
            f"script: {command[0].rsplit('/', 1)[-1]} reads {command[2]!r} as an option of its own and exits "
            "('invalid option', status 2), so the container starts no engine (Dynamo's operator does not add "
            "python3 -m dynamo.vllm in front of flags). Write command: [python3, -m, dynamo.vllm] (or vllm serve) "
            "and keep these args, to have them checked")


def _engine(
    container: dict, pod_spec: dict, where: str, at: str, launch: Launch, context: list[str],
    labels_role: tuple[str, str] | None, pod_meta: dict | None, pod_group: int, replicas: int | None = 1,
    multinode: MultinodeLaunch | None = None, *, every_pod: bool = False,
) -> Engine | Unreadable | None:
    image = str(container.get("image") or "")
    argv = list(launch.argv)
    command = [str(x) for x in (container.get("command") or []) + (container.get("args") or [])]
    opaque = _opaque_kv_transfer_config(argv, command, container)
    if opaque:
        if _classify(argv, None, context, labels_role)[0] not in ("prefill", "decode"):
            return None  # nothing says this engine serves a P/D role (an aggregated server with offloading, say)
        return Unreadable(at, f"its --kv-transfer-config is {opaque}, so its KV transfer settings (connector, "
                          "role, buffer device, backends) are not in these files")
    unread = unread_config_file(argv)
    if unread:  # a --config file not among the files: the engine's settings are unknown, whatever its role
        return Unreadable(at, unread)
    version = version_from_image(image)
    version_text = image_version_text(image) or (fmt(version) if version else None)
    config = role_from_container("?", container, pod_spec, version_text=version_text, pod_meta=pod_meta, launch=launch)
    if pod_group > 1:
        config = replace(config, pod_group=pod_group, group_uniform=every_pod)
    if replicas != 1:
        config = replace(config, replicas=replicas)
    if multinode is not None:  # a Dynamo multinode service: how its operator spreads the ranks over the pods
        config = replace(config, group_gpus=multinode.group_gpus, group_note=multinode.note,
                         group_caveat=multinode.caveat, group_engine_spread=multinode.engine_spread)
    config = replace(config, workload_kind=where.split("/", 1)[0])  # ``where`` starts with the object's Kind/name
    if (repeated := repeated_entrypoint(container)) is not None:  # args: [vllm, serve, ...] on vLLM's entrypoint
        config = replace(config, repeated_entrypoint=repeated)
    runtime = dynamo_release(image)  # None: not a release read (a preview, latest, a digest, another image)
    if "dynamo.vllm" in argv and not config.kv_transfer and "--kv-transfer-config" not in parse_flags(argv)[1]:
        # Dynamo's vLLM worker before 1.0 builds the connector from --connector (default nixl); from 1.0 none;
        # an unknown release is judged as before 1.0 and says so (dynamo-connector-assumed).
        added, assumed = added_connector(argv, runtime, image)
        inner, wrapper = unwrap_connector(added)  # kvbm + nixl: Dynamo's PdConnector around NixlConnector
        config = replace(config, kv_transfer=inner, wrapper=wrapper, kv_transfer_written=added,
                         connector_assumed=assumed)
    overwritten, note = overwritten_connector(argv, runtime, config.env)
    if overwritten:  # Dynamo 0.4.x: the worker's own --kv-transfer-config never reaches the engine
        inner, wrapper = unwrap_connector(overwritten)
        config = replace(config, kv_transfer=inner, wrapper=wrapper, kv_transfer_written=overwritten)
    if note:
        config = replace(config, connector_overwritten=note)
    if "dynamo.vllm" in argv and (legacy := pre_1_0_flag(argv)):
        config = replace(config, dynamo_legacy_flag=legacy)
    if "dynamo.vllm" in argv:  # what Dynamo's worker adds to the engine args itself, per Dynamo release
        events = added_kv_events(argv, parse_flags(argv)[1], image, config.prefix_caching, config.kv_events)
        block = added_block_size(argv, image, config.block_size)
        if events or block:
            config = replace(config, kv_events=config.kv_events or bool(events), kv_events_from=events or "",
                             block_size=block or config.block_size)
        unseen = any(name == "DYN_VLLM_KV_EVENT_PORT" for name, _ in config.env_from)  # an envFrom may set it
        if events and not unseen:  # its ZMQ publisher listens like a --kv-events-config endpoint (role_from_container)
            ports = added_kv_events_ports(config.env, config.dp, runtime)
            config = replace(config, other_ports=config.other_ports + tuple(p for p in ports
                                                                            if p not in config.other_ports))
    if "dynamo.vllm" in argv and "VLLM_NIXL_SIDE_CHANNEL_HOST" not in config.env:
        # Dynamo's worker sets the side-channel host to the pod's own address at startup.
        config = RoleConfig(**{**config.__dict__, "env": {**config.env, "VLLM_NIXL_SIDE_CHANNEL_HOST": POD_IP}})
    if "dynamo.vllm" in argv and "VLLM_NIXL_SIDE_CHANNEL_PORT" not in config.env and runtime is None:
        # Which port: set by the worker itself in some releases, vLLM's default in others (_DYNAMO_SIDE_CHANNEL_PORT).
        config = replace(config, env={**config.env, "VLLM_NIXL_SIDE_CHANNEL_PORT": unknown(_DYNAMO_PORT_NAME)},
                         opaque=config.opaque + (("VLLM_NIXL_SIDE_CHANNEL_PORT", _DYNAMO_SIDE_CHANNEL_PORT),))
    if encodes := encode_worker(argv, config):  # an E/P/D encoder: no P/D role, never paired
        return Engine(where=at, role=ENCODE, config=config, pod_id=id(pod_spec), role_from=encodes,
                      container=re.sub(r"\([^)]*\)$", "", where),
                      flags_key="args" if container.get("args") else "command")
    role, role_from = _classify(argv, config.kv_transfer.get("kv_role"), context, labels_role)
    if role not in ("prefill", "decode") and launch.proxy_role and config.kv_transfer:
        role, role_from = launch.proxy_role, "proxy"  # the script's P/D proxy names this engine's port
    roleless = dynamo_default_role(argv, config, container)
    if (role not in ("prefill", "decode") or role_from in ("name", "label")) and roleless:
        # no role flag: the worker registers as the decode/aggregated backend, whatever its labels or names say (a
        # DynamoGraphDeployment's subComponentType, role_from "type", keeps its role for pairing; a graph whose
        # only prefill workers are such roleless ones is judged by compat/dynamo_roles.py instead)
        role, role_from = "decode", "dynamo"
    role_unknown = "" if role_from in ("kv_role", "flag") else _unknown_role_flag(argv) or ""
    if role_unknown:  # a label, name or type must not stand in for a flag whose value nobody here can read
        role, role_from = None, ""
    if (not config.kv_transfer and not role_unknown
            and (role not in ("prefill", "decode") or role_from in ("name", "dynamo"))
            and not _kv_transfer_config_unparsed(config)):
        return None  # a plain (aggregated) vLLM server: not part of a P/D pair
    if (not container.get("command") and entrypoint_unread(image)
            and not leading_entry(args := [str(x) for x in container.get("args") or []])
            and not leading_serve(args)):
        return Unreadable(at, _entrypoint_unread_reason(image, args))
    plugin = _platform_plugin(container, image) or _das_build(config.env)
    if plugin:  # vLLM's parser still reads its command line: what it refuses on every release is said all the same
        return Unreadable(at, f"a {plugin} engine: its platform plugin, not upstream vLLM's worker, lays out and "
                          "registers the KV cache, which these rules (read in vLLM's CUDA/ROCm source) describe",
                          findings=malformed_option_findings(replace(config, role=role or "engine"), where))
    return Engine(where=at, role=role, config=config, pod_id=id(pod_spec), role_from=role_from,
                  container=re.sub(r"\([^)]*\)$", "", where),
                  flags_key="args" if container.get("args") else "command", role_unknown=role_unknown,
                  dynamo_roleless=roleless)


def _kv_transfer_config_unparsed(config: RoleConfig) -> bool:
    """The engine passes a ``--kv-transfer-config`` that is not JSON (as vLLM receives it: after a shell's quote
    removal, ``--kv-transfer-config={"kv_connector":...}`` unquoted in an ``sh -c`` line arrives as
    ``{kv_connector:...}``). vLLM parses the flag with ``json.loads`` and its argument parser exits, so the engine
    is a P/D engine that never starts, not an aggregated server: it is kept, for ``engine-args-invalid``."""
    return any(err.startswith("--kv-transfer-config ") for err in config.errors)


def _pod_group(node: dict) -> int | None:
    """Pods one engine instance spans, when ``node`` declares a pod group: a LeaderWorkerSet's
    ``leaderWorkerTemplate.size`` (leader + workers, LWS API ``LeaderWorkerTemplate.Size``; also inside llm-d
    DisaggregatedSet and KServe worker specs) or an AIBrix StormService role's ``podGroupSize``
    (orchestration.aibrix.ai/v1alpha1 ``RoleSpec.PodGroupSize``). ``None`` when it declares none."""
    lwt = node.get("leaderWorkerTemplate")
    for value in (lwt.get("size") if isinstance(lwt, dict) else None, node.get("podGroupSize")):
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            return value
    return None


def _lws_worker_gpus(lwt: Any) -> int | None:
    """The GPUs one worker pod of a LeaderWorkerSet group requests, where ``lwt`` (its ``leaderWorkerTemplate``) has a
    ``leaderTemplate`` beside its ``workerTemplate`` (the leader's pod may differ from the other ``size - 1``, LWS API
    ``LeaderWorkerTemplate``) and its containers write GPU limits (``*/gpu``), each a literal integer; ``None``
    otherwise (then every pod is taken to hold the leader's count)."""
    if not isinstance(lwt, dict) or not isinstance(lwt.get("leaderTemplate"), dict):
        return None
    worker = lwt.get("workerTemplate")
    spec = worker.get("spec") if isinstance(worker, dict) else None
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list):
        return None
    total, written = 0, False
    for c in containers:
        limits = ((c.get("resources") or {}).get("limits") or {}) if isinstance(c, dict) else {}
        for key, value in limits.items() if isinstance(limits, dict) else ():
            if str(key).endswith("/gpu"):
                if not str(value).isdigit():
                    return None
                total, written = total + int(value), True
    return total if written else None  # no GPU limit written: not judged (a privileged pod may see the node's)


def _lws_env(lwt: dict) -> dict[str, dict[str, str]]:
    """The variables LeaderWorkerSet's pod webhook sets in every container of a group, per template
    (``leaderTemplate``, ``workerTemplate``) of ``leaderWorkerTemplate`` ``lwt``, where their values are known.

    Source: kubernetes-sigs/lws pkg/utils/pod/pod_utils.go ``AddLWSVariables`` (called from
    pkg/webhooks/pod_webhook.go), at 060ab4d: ``LWS_LEADER_ADDRESS`` (``<lws>-<group>.<subdomain>.<namespace>``,
    per group: not known here), ``LWS_GROUP_SIZE`` (the pod's size annotation, ``leaderWorkerTemplate.size``) and
    ``LWS_WORKER_INDEX`` (the pod's worker index label: 0 for the leader, 1 to size-1 for the workers); it puts them
    first in ``env`` and drops a variable of the same name the template writes (``addEnvVarsIfNotExists``). No
    ``LWS_NAME`` is set. The leader runs ``workerTemplate`` when no ``leaderTemplate`` is given (LWS API
    ``LeaderWorkerTemplate.LeaderTemplate``), so ``workerTemplate``'s index is known only where one pod runs it
    (size 1, or size 2 beside a ``leaderTemplate``)."""
    size = lwt.get("size", 1)
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        return {}
    group = {"LWS_GROUP_SIZE": str(size)}
    leader = isinstance(lwt.get("leaderTemplate"), dict)
    worker_index = "0" if size == 1 else "1" if leader and size == 2 else None
    return {"leaderTemplate": {**group, "LWS_WORKER_INDEX": "0"},
            "workerTemplate": {**group, **({"LWS_WORKER_INDEX": worker_index} if worker_index else {})}}


def _v1beta1_multinode(container: dict, service: tuple[dict, int, dict] | None,
                       siblings: int) -> tuple[dict, MultinodeLaunch | None]:
    """``container`` and its multinode launch when it is the main container (named ``main``, or the pod's only
    container) of a Dynamo v1beta1 component that spans several pods (``service`` as :func:`_walk` marks such a
    component: :func:`~pdd_operator.compat.dynamo_resources.component_multinode`); else ``container`` and
    ``None``."""
    if not service or service[1] < 2 or "podTemplate" not in service[2]:
        return container, None
    if container.get("name") != "main" and siblings != 1:
        return container, None
    return component_multinode(container, service[1])


def _with_env(container: dict, injected: dict[str, str]) -> dict:
    """``container`` with ``injected`` variables first in its ``env``, replacing any of the same name (as the LWS
    webhook writes them: :func:`_lws_env`)."""
    if not injected:
        return container
    own = [e for e in container.get("env") or [] if not (isinstance(e, dict) and e.get("name") in injected)]
    return {**container, "env": [{"name": k, "value": v} for k, v in injected.items()] + own}


def _dynamo_main_container(main: dict) -> dict:
    """A Dynamo service's ``mainContainer`` as its pod runs it.

    Dynamo's DynamoComponentDeployment controller (ai-dynamo/dynamo
    deploy/cloud/operator/internal/controller/dynamocomponentdeployment_controller.go, generatePodTemplateSpec, in
    the 0.2/0.3 releases) builds the main container with ``Command: []string{"sh", "-c"}`` and one joined args
    string, so a main container with no ``command`` and a single ``args`` string holding a whole line
    (``python3 -m dynamo.vllm --model ... 2>&1 | tee /tmp/vllm.log``, as Dynamo 0.3.2's
    components/backends/vllm/deploy graphs write it) runs that line under ``sh -c``; no exec-form entrypoint
    could run such a string at all. Any other main container (with a command, or with args as separate words,
    which the image's entrypoint takes) is returned as written.
    """
    args = main.get("args")
    if main.get("command") or not (isinstance(args, list) and len(args) == 1 and isinstance(args[0], str)
                                   and re.search(r"\s", args[0].strip())):
        return main
    return {**main, "command": ["sh", "-c"]}


def _dynamo_env_from_secret(service: dict) -> list[dict]:
    """The ``envFrom`` entry a Dynamo service's ``envFromSecret`` adds to its main container: Dynamo's operator
    appends ``EnvFromSource{SecretRef: <envFromSecret>}`` to the container it builds (ai-dynamo/dynamo
    deploy/cloud/operator/internal/dynamo/graph.go, ``if component.EnvFromSecret != nil``), so every key of that
    Secret becomes a variable of the engine."""
    name = service.get("envFromSecret")
    return [{"secretRef": {"name": name}}] if isinstance(name, str) and name else []


def _walk(node: Any, path: list[str], context: list[str], labels_role: tuple[str, str] | None,
          out: list, origin: str, pod_meta: dict | None, envs: tuple = (), skip: frozenset[int] = frozenset(),
          group: int = 1, replicas: int | None = 1, service: tuple[dict, int, dict] | None = None,
          injected: dict[str, str] | None = None, templates: dict[str, dict[str, str]] | None = None,
          every_pod: bool = False) -> None:
    if isinstance(node, dict):
        group = _pod_group(node) or group
        lws = _lws_env(node["leaderWorkerTemplate"]) if isinstance(node.get("leaderWorkerTemplate"), dict) else {}
        first_engine = len(out)
        if isinstance(node.get("extraPodSpec"), dict):
            # a Dynamo v1alpha1 service: its ``resources`` (Dynamo's shape) go to the main container
            service = (service_resources(node.get("resources")), multinode_count(node), node)
        elif isinstance(node.get("podTemplate"), dict) and multinode_count(node) > 1:
            # a Dynamo v1beta1 component spanning several pods: its main container's ranks spread over them
            service = ({}, multinode_count(node), {"podTemplate": True})
        if "replicas" in node:
            # spec.replicas of the objects around the template (a StormService's times its role's); a templated
            # or otherwise non-literal count is unknown
            count = node["replicas"]
            literal = isinstance(count, int) and not isinstance(count, bool)
            replicas = replicas * count if literal and replicas is not None else None
        if isinstance(node.get("envs"), list):
            # Dynamo services: ``envs`` beside extraPodSpec is added to the main container's environment.
            envs = envs + tuple(e for e in node["envs"] if isinstance(e, dict))
        meta = node.get("metadata") if isinstance(node.get("metadata"), dict) else {}
        ctx = context + [str(meta.get("name", ""))] if meta.get("name") else list(context)
        label_role = _labels_role(meta.get("labels"))
        role_from_labels = (label_role, "label") if label_role else labels_role
        if meta:
            pod_meta = meta
        for key in ("subComponentType", "componentType", "role", "type"):
            if isinstance(node.get(key), str) and _role_hint(node[key]):
                role_from_labels = (_role_hint(node[key]), "type")
        if isinstance(node.get("entryTemplate"), dict) and isinstance(node.get("name"), str) and _role_hint(node["name"]):
            # a Kthena ModelServing role (spec.template.roles[]: name, entryTemplate, workerTemplate;
            # volcano-sh/kthena pkg/apis/workload/v1alpha1 model_serving_types.go): its name is the role
            role_from_labels = (_role_hint(node["name"]), "type")
        if _rbg_role(node, context) or _batch_role(node, path, context):
            role_from_labels = (_role_hint(node["name"]), "type")
        clique_role = _grove_clique_role(node, context)
        if clique_role:
            role_from_labels = clique_role
        containers = node.get("containers")
        if isinstance(containers, list) and all(isinstance(c, dict) for c in containers):
            for i, c in enumerate(containers):
                if id(c) in skip:
                    continue
                where = f"{origin} {'.'.join(path)}.containers[{i}]({c.get('name', '?')})"
                c, plan = _v1beta1_multinode(c, service, len(containers))
                out.extend(_engines(_with_env(c, injected or {}), node, where, ctx + path + [str(c.get("name", ""))],
                                    role_from_labels, pod_meta, group, replicas, plan, every_pod=every_pod))
        runner = node.get("runner")
        if isinstance(runner, dict) and context and context[0] in _OME_KINDS:
            # an OME runtime's or InferenceService's component (engineConfig, decoderConfig, their leader/worker):
            # its ``runner`` is the pod's main container, the component itself its pod spec (hostNetwork, volumes)
            out.extend(_engines(_with_env(runner, injected or {}), node, f"{origin} {'.'.join(path)}.runner"
                                f"({runner.get('name', '?')})", ctx + path + [str(runner.get("name", ""))],
                                role_from_labels, pod_meta, group, replicas))
        main = node.get("mainContainer")
        if isinstance(main, dict):
            resources, nodes, raw = service or ({}, 1, {})
            plan = multinode_launch(main, raw, nodes) if nodes > 1 else None
            main = with_service_resources(
                {**_dynamo_main_container(main), "env": list(envs) + list(main.get("env") or []),
                 "envFrom": list(main.get("envFrom") or []) + _dynamo_env_from_secret(raw)}, resources,
                nodes if plan is None or plan.spread or plan.gpus is None else 1)
            # the pod spec itself, not a copy: pod_id is its id(), which a freed copy would hand to the next one
            out.extend(_engines(main, node, f"{origin} {'.'.join(path)}.mainContainer", ctx + path,
                                role_from_labels, pod_meta, group, replicas, plan))
        for key, value in node.items():
            if key in ("containers", "mainContainer", "metadata", "status") or (key == "runner" and context
                                                                               and context[0] in _OME_KINDS):
                continue
            _walk(value, path + [str(key)], ctx, role_from_labels, out, origin, pod_meta, envs, skip, group, replicas,
                  service, (templates or {}).get(key, injected), lws if key == "leaderWorkerTemplate" else None,
                  # LWS pods all run workerTemplate when there is no leaderTemplate (LWS API LeaderTemplate)
                  every_pod or (templates is not None and key == "workerTemplate" and "leaderTemplate" not in node))
        worker_gpus = _lws_worker_gpus(node.get("leaderWorkerTemplate"))
        if worker_gpus is not None:
            out[first_engine:] = [replace(e, config=replace(e.config, group_worker_gpus=worker_gpus))
                                  if isinstance(e, Engine) and ".leaderTemplate." in f".{e.where}" else e
                                  for e in out[first_engine:]]
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _walk(value, path + [f"{i}"], context, labels_role, out, origin, pod_meta, envs, skip, group, replicas,
                  service, injected, None, every_pod)


#: OME's kinds (sgl-project/ome ``ome.io/v1beta1``) whose components hold their main container as ``runner``
#: (pkg/apis/ome/v1beta1 inference_service.go RunnerSpec: a corev1.Container inline) beside the pod spec fields.
_OME_KINDS = ("ServingRuntime", "ClusterServingRuntime", "InferenceService")
#: An OME object's prefill and decode components: ``engineConfig``/``decoderConfig`` of a (Cluster)ServingRuntime
#: (servingruntime_types.go ServingRuntimePodSpec), ``engine``/``decoder`` of an InferenceService
#: (inference_service.go InferenceServiceSpec).
_OME_PD_KEYS = (("engineConfig", "decoderConfig"), ("engine", "decoder"))


def _ome_pd_parts(doc: dict) -> tuple[str, str] | None:
    """The (prefill key, decode key) of an OME object that runs prefill/decode disaggregation, else ``None``.

    OME (sgl-project/ome, site/content/en/docs/concepts/serving_runtime.md "Decoder Configuration") splits P/D by
    structure: ``decoderConfig`` holds the decode component and, where it is present, ``engineConfig`` the prefill
    (its controller labels the engine pods' component ``engine`` and the decoder's ``decoder``, and its router's
    ``--prefill-selector``/``--decode-selector`` pick them so), whatever the runners' own flags say."""
    if not str(doc.get("apiVersion") or "").startswith("ome.io/") or doc.get("kind") not in _OME_KINDS:
        return None
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    return next(((p, d) for p, d in _OME_PD_KEYS if isinstance(spec.get(d), dict)), None)


def ome_architecture(doc: dict) -> str | None:
    """The one Hugging Face architecture an OME (Cluster)ServingRuntime serves, else ``None``.

    OME picks a runtime for a model by ``spec.supportedModelFormats[].modelArchitecture`` (the model's config.json
    ``architectures``; sgl-project/ome pkg/apis/ome/v1beta1 servingruntime_types.go SupportedModelFormat, and its
    runtime selector) and hands the engine the model as ``$(MODEL_PATH)``: where every format names the same
    architecture, that is the architecture of any model the runtime's engines load."""
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    formats = spec.get("supportedModelFormats")
    if not isinstance(formats, list):
        return None
    archs = {f.get("modelArchitecture") for f in formats if isinstance(f, dict)}
    return archs.pop() if len(archs) == 1 and isinstance(next(iter(archs)), str) else None


#: Batch workloads whose spec lists named groups of pods, by kind: a JobSet's ``spec.replicatedJobs[]``
#: (kubernetes-sigs/jobset api/jobset/v1alpha2 jobset_types.go ReplicatedJob: ``name``, ``replicas``, ``template`` a
#: JobTemplateSpec; the name is part of each child Job's and pod's name) and a Volcano Job's ``spec.tasks[]``
#: (volcano-sh/apis pkg/apis/batch/v1alpha1 job.go TaskSpec: ``name``, ``replicas``, ``template`` a PodTemplateSpec).
_BATCH_ROLE_LISTS = {"JobSet": "replicatedJobs", "Job": "tasks"}


def _batch_role(node: dict, path: list[str], context: list[str]) -> bool:
    """``node`` is an entry of a batch workload's list of pod groups (:data:`_BATCH_ROLE_LISTS`: a JobSet's
    replicatedJob, a Volcano Job's task) whose ``name`` is a P/D role (``prefill``, ``decode``, ...) and which holds a
    ``template``. Such a workload starts its prefill and decode engines as its own named groups (tpu-inference's
    Kueue-admitted 1P1D benchmark JobSet: replicatedJobs ``prefill``, ``decode`` and ``benchmark``, the client reaching
    each engine by the group's DNS name ``<jobset>-decode-0-0``), so the name stands for the role the way a
    RoleBasedGroup role's does (:func:`_rbg_role`): an engine there without a connector is still that role's engine
    (a decode without one is refused), not an aggregated server beside the pair. A plain ``batch/v1`` Job has no
    ``spec.tasks``; an Argo DAG task's ``template`` is a template's name, not a dict."""
    return (bool(context) and len(path) >= 2 and _BATCH_ROLE_LISTS.get(context[0]) == path[-2]
            and isinstance(node.get("name"), str) and _role_hint(node["name"]) is not None
            and isinstance(node.get("template"), dict))


#: The keys of a RoleBasedGroup role (sgl-project/rbg ``workloads.x-k8s.io`` RoleSpec) that hold its pods: v1alpha2's
#: ``standalonePattern`` / ``leaderWorkerPattern`` / ``customComponentsPattern``, v1alpha1's ``template`` /
#: ``leaderWorkerSet``.
_RBG_ROLE_POD_KEYS = ("standalonePattern", "leaderWorkerPattern", "customComponentsPattern", "template",
                      "leaderWorkerSet")


def _rbg_role(node: dict, context: list[str]) -> bool:
    """``node`` is a role of a RoleBasedGroup (``spec.roles[]``: ``name`` and one of :data:`_RBG_ROLE_POD_KEYS`) whose
    name is a P/D role (``prefill``, ``decode``, ...). rbg's controller builds each role's pods as their own set and
    its P/D samples (``examples/inference/pd-disagg-*.yaml``, ``others/dynamo/pd-disagg-standalone.yaml``) name the
    roles after what their engines serve, as Kthena's ModelServing roles and Dynamo's component types do: the name
    stands for the role the way a ``type`` field does, so an engine there that sets no connector is still that role's
    engine (a decode without one is refused), not an aggregated server beside the pair."""
    return (bool(context) and context[0] == "RoleBasedGroup" and isinstance(node.get("name"), str)
            and _role_hint(node["name"]) is not None and any(isinstance(node.get(k), dict) for k in _RBG_ROLE_POD_KEYS))


def _grove_clique_role(node: dict, context: list[str]) -> tuple[str, str] | None:
    """The P/D role of ``node`` when it is a clique of an NVIDIA Grove PodCliqueSet (``spec.template.cliques[]``:
    ``name``, ``labels``, ``spec`` with ``roleName`` and ``podSpec``; ai-dynamo/grove operator/api/core/v1alpha1
    podcliqueset.go PodCliqueTemplateSpec and podclique.go PodCliqueSpec), as ``(role, source)``, else ``None``.

    Grove puts a clique's ``labels`` on every pod it creates, so a role label there (``llm-d.ai/role: decode``) is the
    pods' own (source ``label``); otherwise ``spec.roleName`` or the clique's ``name`` naming one role (``prefill``,
    ``decode``) stands for it the way a RoleBasedGroup role's name does (source ``type``). Each clique is its own set of
    pods, so two ``kv_both`` engines of cliques ``prefill`` and ``decode`` are a pair even where their models differ."""
    spec = node.get("spec")
    if not (context and context[0] == "PodCliqueSet" and isinstance(spec, dict) and isinstance(spec.get("podSpec"), dict)):
        return None
    label_role = _labels_role(node.get("labels") if isinstance(node.get("labels"), dict) else None)
    if label_role:
        return label_role, "label"
    for name in (spec.get("roleName"), node.get("name")):
        if isinstance(name, str) and _role_hint(name):
            return _role_hint(name), "type"
    return None


def _stem(name: str) -> str:
    return re.sub(r"(^|[-_.])(prefill|prefiller|decode|decoder)(?=$|[-_.])", "", name.lower()).strip("-_.")


#: Labels many unrelated workloads share (tooling, not identity): never a reason to pair two engines.
_GENERIC_LABELS = {"pod-template-hash", "app.kubernetes.io/managed-by", "app.kubernetes.io/version", "helm.sh/chart",
                   "app.kubernetes.io/part-of", "controller-revision-hash", "statefulset.kubernetes.io/pod-name"}


def _group(*label_sets: dict | None) -> tuple[tuple[str, str], ...]:
    out = {}
    for labels in label_sets:
        for k, v in (labels or {}).items():
            if k in _ROLE_LABELS or k in _GENERIC_LABELS or (isinstance(v, str) and _role_hint(v)):
                continue
            out[str(k)] = str(v)
    return tuple(sorted(out.items()))


#: KServe kinds with the LLMInferenceService spec shape: the service itself and the LLMInferenceServiceConfig
#: it names in ``baseRefs`` (same ``spec.template`` / ``spec.prefill.template``; kserve config/llmisvcconfig).
_KSERVE_LLM_KINDS = ("LLMInferenceService", "LLMInferenceServiceConfig")


#: What marks a document as configuring P/D KV transfer (a KV connector or role), in any key or value. A folder of a
#: path (``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py``, the proxy a node may run alone, as
#: kvcache-ai/Mooncake's mooncake-wheel README starts it) is vLLM's source tree, not a setting.
_PD_MARKER = re.compile(r"kv[-_]?transfer[-_]?config|(?<!/)kv_connector(?!/)|\bkv_?role\b", re.I)
#: Dynamo's vLLM worker's own P/D role flags, as :func:`_classify` reads them, written as words of a command line
#: or as items of a YAML list (``'--disaggregation-mode', 'prefill'`` in a document's repr).
_DYNAMO_ROLE_FLAG = re.compile(r"--is-(?:prefill|decode)-worker\b|--disaggregation-mode['\",=\s]+(?:prefill|decode)\b")


def pd_marked(text: str) -> bool:
    """``text`` (a file, or the repr of a document) configures P/D KV transfer: it names a KV connector or
    ``kv_role`` (:data:`_PD_MARKER`), or runs Dynamo's vLLM worker (``dynamo.vllm``) with one of its role flags
    (``--is-prefill-worker``, ``--is-decode-worker``, ``--disaggregation-mode prefill|decode``). Before Dynamo 1.0
    that worker builds its NixlConnector itself (``--connector nixl`` by default, ai-dynamo/dynamo
    components/src/dynamo/vllm/args.py), so a script of such workers names no KV connector at all
    (ai-dynamo/dynamo#3046: two ``python -m dynamo.vllm`` workers, one with ``--is-prefill-worker``)."""
    return bool(_PD_MARKER.search(text) or ("dynamo.vllm" in text and _DYNAMO_ROLE_FLAG.search(text)))


#: A chart preset named in values (llm-d-deployer's ``sampleApplication.baseConfigMapRefName``): group 1 the name.
_PRESET_REF = re.compile(r"""\bbaseConfigMapRefName['"]?\s*[:=]\s*['"]?([\w.-]+)""")
#: The words of a preset's name that say its engines transfer KV between prefill and decode (llm-d-deployer's
#: basic-gpu-with-nixl-preset, basic-gpu-with-nixl-and-redis-lookup-preset; a simulator preset, basic-sim-preset,
#: names none).
_PD_PRESET_WORDS = frozenset({"nixl", "lmcache", "mooncake", "disagg", "disaggregated", "pd"})
#: A Dynamo SDK graph served by its CLI (``dynamo serve graphs.disagg:Frontend``; ``compoundai serve
#: disaggregated.client:Client``, the SDK's name in triton-inference-server/triton_distributed's README-NOVA-INIT.md at
#: f4dfcbfc): group 1 the graph, whose module names disaggregation.
_GRAPH_SERVE = re.compile(r"(?:^|[\s;&|(])(?:compoundai|dynamo)\s+serve\s+([\w.]*disagg[\w.]*:\w+)", re.M | re.I)
#: A program a command line runs (``python prefill.py``, ``python3 -m pkg.decode_worker``, ``./prefill.sh``, ``bash
#: decode.sh``): group 1 its path or module.
_PROGRAM_RUN = re.compile(r"(?:^|[\s;&|(])(?:(?:\S*/)?python3?(?:\.\d+)?\s+(?:-[A-Za-z]+\s+)*(?:-m\s+)?|(?:ba)?sh\s+|(?=\./))"
                          r"([\w./-]+?(?:\.py|\.sh)?)(?=\s|$)", re.M)


def pd_preset(text: str) -> str | None:
    """The chart preset ``text`` (values, or their repr) names whose name names a KV transfer
    (:data:`_PD_PRESET_WORDS`), else ``None``. Pure."""
    return next((m.group(1) for m in _PRESET_REF.finditer(text)
                 if _PD_PRESET_WORDS & set(re.split(r"[-_.]", m.group(1).lower()))), None)


def pd_signal(text: str) -> str | None:
    """What in ``text`` (a script, a README's commands, the repr of a document) shows a prefill/decode deployment, as
    a phrase to name it, or ``None``: a KV connector or ``kv_role`` (:func:`pd_marked`), a chart preset whose name
    names a KV transfer (:data:`_PD_PRESET_WORDS`: ``basic-gpu-with-nixl-preset``), a Dynamo SDK graph of
    disaggregation served (:data:`_GRAPH_SERVE`), or commands that run a program named for prefill and another
    named for decode (``python prefill.py`` and ``python decode.py``, ``prefill_worker.py`` / ``decode_worker.py``).
    Comment lines are not read. Pure.

    Such an input is a P/D deployment whether or not its engines can be read: where none can, it is "not checked"
    (naming this), never "nothing to check"."""
    lines = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    if pd_marked(lines):
        found = _PD_MARKER.search(lines) or _DYNAMO_ROLE_FLAG.search(lines)
        return f"it names {found.group(0) if found else 'a KV connector'}"
    if (preset := pd_preset(lines)) is not None:
        return f"its preset {preset} names a KV transfer"
    if (graph := _GRAPH_SERVE.search(lines)) is not None:
        return f"it serves the disaggregated graph {graph.group(1)}"
    programs = [m.group(1) for m in _PROGRAM_RUN.finditer(lines)]
    prefill = next((p for p in programs if "prefill" in p.rsplit("/", 1)[-1].lower()), None)
    decode = next((p for p in programs if "decode" in p.rsplit("/", 1)[-1].lower()), None)
    if prefill and decode:
        return f"it runs {prefill} and {decode}"
    return None


def _modelbooster_pods(spec: dict) -> list[dict] | None:
    """A Kthena ModelBooster ``vLLMDisaggregated`` backend's prefill/decode workers as the pod specs its controller
    makes, or ``None`` for another backend. Source: volcano-sh/kthena pkg/model-booster-controller/convert
    (model_serving.go buildCommands: ``python3 -m vllm.entrypoints.openai.api_server --model <downloaded model>``
    then utils.ConvertVLLMArgsFromJson(worker.config): each key, sorted, as ``--key`` (``_`` to ``-``) followed by
    its value unless that is empty; buildEngineEnvVars: the backend's ``env`` first; the worker's image and
    resources). The model is named by its ``modelURI`` without the ``hf://`` scheme, as it was downloaded from."""
    backend = spec.get("backend") if isinstance(spec.get("backend"), dict) else {}
    workers = backend.get("workers")
    if backend.get("type") != "vLLMDisaggregated" or not isinstance(workers, list):
        return None
    model = re.sub(r"^[a-z]+://", "", str(backend.get("modelURI") or ""))
    env = [e for e in backend.get("env") or [] if isinstance(e, dict)]
    pods = []
    for w in workers:
        if not isinstance(w, dict) or w.get("type") not in ("prefill", "decode"):
            continue
        config = w.get("config") if isinstance(w.get("config"), dict) else {}
        args = []
        for key in sorted(config, key=str):
            value = config[key]
            text = str(value).lower() if isinstance(value, bool) else str(value)
            args += [f"--{str(key).replace('_', '-')}"] + ([text] if text != "" else [])
        command = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", model, *args]
        pods.append({"type": w["type"], "containers": [
            {"name": str(w["type"]), "image": str(w.get("image") or ""), "command": command, "env": env,
             "resources": w.get("resources") if isinstance(w.get("resources"), dict) else {}}]})
    return pods


#: Where an LLMInferenceService(Config) holds pod templates, and the role each serves when ``spec.prefill`` is set.
_KSERVE_TEMPLATES = (("prefill", "template"), ("prefill", "worker"), ("template",), ("worker",))


def _kserve_templated(spec: dict, origin: str, release: Version | None = None) -> tuple[frozenset[int], list[Unreadable]]:
    """The ``main`` containers whose command KServe supplies (their ``id``, for the walk to skip), and those of a
    P/D service as Unreadable.

    KServe merges an LLMInferenceService over its LLMInferenceServiceConfigs (the well-known
    ``config/llmisvcconfig/config-llm-template.yaml``, ``config-llm-prefill-template.yaml``, ... and any
    ``baseRefs``) by container name: a ``main`` container without ``command`` gets the template's command
    (``vllm serve /mnt/models`` in some releases, a shell script over ``${KV_TRANSFER_ARGS}`` and
    ``${VLLM_ADDITIONAL_ARGS}`` in others), not the image's entrypoint, and its own ``args`` replace the
    template's. What the engine runs is therefore not in these files. Such a container is reported when the
    service is P/D (``spec.prefill`` set, or KV transfer named in its args or env); otherwise it is left out
    silently, as an aggregated server is. What vLLM refuses in such a container for its image, env and user args
    alone (:func:`~pdd_operator.compat.templated.templated_findings`) rides on its Unreadable as ``findings``.
    ``release``: the KServe release the files name (:func:`~pdd_operator.compat.kserve_merge.kserve_release`), whose
    templates decide which user parts are read (:func:`~pdd_operator.compat.templated.template_reads`); ``None``
    reads them as KServe v0.18.0 and later do.
    """
    pd = isinstance(spec.get("prefill"), dict)
    skip: set[int] = set()
    unreadable: list[Unreadable] = []
    mains: dict[tuple[str, ...], tuple[dict, int, Reads]] = {}  # P/D mains: keys -> (container, Unreadable, reads)
    for keys in _KSERVE_TEMPLATES:
        parent: Any = spec
        for key in keys:
            parent = parent.get(key) if isinstance(parent, dict) else None
        containers = parent.get("containers") if isinstance(parent, dict) else None
        if not isinstance(containers, list):
            continue
        for c in containers:
            if not (isinstance(c, dict) and c.get("name") == "main" and not c.get("command")):
                continue
            skip.add(id(c))
            if pd or _PD_MARKER.search(repr([c.get("args"), c.get("env")])):
                role = "prefill" if keys[0] == "prefill" else ("decode" if pd else "P/D")
                where = f"{origin} spec.{'.'.join(keys)}.containers(main)"
                part = spec["prefill"] if keys[0] == "prefill" else spec
                reads = template_reads(release, template_variant(part) == "-worker-data-parallel")
                refused = templated_findings(c, where, reads)
                if pd:
                    mains[keys] = (c, len(unreadable), reads)
                configs = ", ".join(well_known_configs(spec, role))
                if release is None:
                    taken = (f"read as KServe v0.18.0 and later run it: {ADDITIONAL_ARGS_ENV} and args appended; "
                             f"v0.16/v0.17's single-node templates never read {ADDITIONAL_ARGS_ENV}, and the KServe "
                             "release is not in these files")
                else:
                    parts = [n for n, r in zip((ADDITIONAL_ARGS_ENV, "args"), reads, strict=True) if r]
                    taken = (f"KServe {fmt(release)}'s template appends {' and '.join(parts)} to vllm serve /mnt/models"
                             + ("" if reads[0] else f" and never reads {ADDITIONAL_ARGS_ENV}")
                             + ("" if reads[1] else "; the container's own args replace its script"))
                unreadable.append(Unreadable(
                    where,
                    f"the {role} engine's command comes from KServe's LLMInferenceServiceConfig templates ({configs}: "
                    "the container has no command, and KServe's template replaces the image's entrypoint), which are "
                    "not in these files, so its KV connector and flags cannot be read (before kserve#6027 the "
                    "templates set no --kv-transfer-config at all); give the container an explicit command, or the "
                    f"configs' files, to have it checked ({taken})", refused,
                    fmt(version_from_image(str(c.get("image") or ""))) if refused else "unknown"))
    if ("prefill", "template") in mains and ("template",) in mains:
        (p, at, p_reads), (d, _, d_reads) = mains[("prefill", "template")], mains[("template",)]
        found = _templated_pair(spec, origin, (p, p_reads), (d, d_reads), release)
        if found:
            u = unreadable[at]
            version = fmt(version_from_image(str(p.get("image") or "")))
            unreadable[at] = replace(u, findings=u.findings + found, version=u.version if u.findings else version)
            # (a pair finding rides on the prefill's "not checked" entry: the rest of both engine lines is unread)
    return frozenset(skip), unreadable


def _templated_pair(spec: dict, origin: str, prefill: tuple[dict, Reads], decode: tuple[dict, Reads],
                    release: Version | None = None) -> tuple[Finding, ...]:
    """What a KServe P/D service's two templated ``main`` engines (``spec.prefill.template`` and ``spec.template``,
    each with the user parts its template reads) fail on from their user part alone
    (:func:`~pdd_operator.compat.templated.templated_pair_findings`), each read as KServe ``release``'s template runs
    it (:func:`~pdd_operator.compat.templated.template_engine`); ``()`` for none."""
    model = spec.get("model") if isinstance(spec.get("model"), dict) else {}
    served = str(model["name"]) if model.get("name") else None
    engines = []
    for role, (c, reads), keys in (("prefill", prefill, "spec.prefill.template"), ("decode", decode, "spec.template")):
        run = template_engine(c, served, reads)
        if run is None:
            return ()
        image = str(c.get("image") or "")
        version = version_from_image(image)
        text = image_version_text(image) or (fmt(version) if version else None)
        at = f"{origin} {keys}.containers(main)"
        config = replace(role_from_container(role, run, {}, version_text=text), workload_kind=origin.split("/", 1)[0])
        config = _with_model_source(config, spec)
        engines.append(Engine(where=at, role=role, config=config, pod_id=id(c), role_from="type",
                              container=f"{origin} {keys}", flags_key="env"))
    offloading = frozenset(role for role, part in (("prefill", spec.get("prefill")), ("decode", spec))
                           if isinstance(part, dict) and part.get("kvCacheOffloading"))
    unread = any(not reads[0] and env_values(c.get("env")).get(ADDITIONAL_ARGS_ENV) for c, reads in (prefill, decode))
    return templated_pair_findings(_pair(*engines, "KServe spec.prefill and spec.template (the user's part of "
                                                    "the templates' vllm serve lines)"), offloading,
                                   fmt(release) if unread and release else "")


def _with_model_source(config: RoleConfig, spec: dict) -> RoleConfig:
    """``config`` of an engine of a KServe LLMInferenceService(Config) ``spec`` with the model KServe puts in the
    ``/mnt/models`` it serves (:func:`~pdd_operator.compat.kserve_merge.model_source`: ``spec.model.uri``
    ``hf://owner/model``, or a known ``spec.model.name`` beside a ``pvc://`` / ``oci://`` uri, with a note saying
    which, or that none is named); unchanged where the engine serves another model."""
    if (config.model or "").rstrip("/") != TEMPLATE_MODEL_PATH:
        return config
    source, note = model_source(spec)
    return replace(config, model_source=source, model_source_note=note) if note else config


def _certainly_connectorless(e: Engine) -> bool:
    """The engine's own line names no KV connector and nothing of it may hold one (no ``--kv-transfer-config``,
    readable or not, and no launcher that builds one), as :func:`aggregated_alone` reads it."""
    c = e.config
    return (c.connector is None and not c.kv_transfer and not c.launcher
            and not any(name in ("--kv-transfer-config", "--kv_transfer_config") for name, _ in c.opaque))


def _own_lines_without_connector(found: list, origin: str) -> list:
    """``found`` (the engines and unreadable engines of one KServe P/D service) with a ``kv-connector-missing`` error
    (:func:`~pdd_operator.compat.templated.own_line_without_connector`) on the templated role's Unreadable where the
    other role's engines run their own lines without a KV connector: no template reaches them, so the pair moves no
    KV whatever the template gives the templated role. Unchanged where no role is templated (both lines are then
    judged as a pair) or the explicit role's engines name, or may name, a connector."""
    templated = {("prefill" if " spec.prefill." in u.where else "decode"): i for i, u in enumerate(found)
                 if isinstance(u, Unreadable) and u.where.startswith(f"{origin} spec.")
                 and u.where.endswith(".containers(main)")}
    engines = [e for e in found if isinstance(e, Engine) and e.role in ("prefill", "decode")]
    for role, at in templated.items():
        other = [e for e in engines if e.role != role]
        if other and len(templated) == 1 and all(_certainly_connectorless(e) for e in other):
            u = found[at]
            finding = own_line_without_connector(other[0].role, other[0].where, role)
            found[at] = replace(u, findings=(*u.findings, finding),
                                version=u.version if u.findings else fmt(other[0].config.version)
                                if other[0].config.version else "unknown")
    return found


def _is_ray_serve_config(doc: dict) -> bool:
    """A Ray Serve config file (``serve deploy`` / ``serve run``, Ray's ServeDeploySchema): ``applications``, a
    list of objects each naming its ``import_path``."""
    apps = doc.get("applications")
    return isinstance(apps, list) and bool(apps) and all(isinstance(a, dict) and "import_path" in a for a in apps)


#: The worker sections of a Dynamo SDK graph config (ai-dynamo/dynamo 0.1-0.3 examples/llm/configs: the
#: ``VllmWorker`` and ``PrefillWorker`` service classes of graphs/disagg.py).
_DYNAMO_SDK_WORKERS = ("VllmWorker", "PrefillWorker")
#: The KV connector of Dynamo's patched vLLM (vllm#16677's branch on 0.8), registered in no vLLM release.
_DYNAMO_SDK_CONNECTOR = re.compile(r"\bDynamoNixlConnector\b")


def _is_dynamo_serve_config(doc: dict) -> bool:
    """A Dynamo SDK service config (``dynamo serve graphs.<graph>:Frontend -f config.yaml``, Dynamo 0.1-0.3): one
    section per service class, whose keys include ``ServiceArgs`` or ``common-configs`` (ai-dynamo/dynamo
    examples/llm/configs), or that has a ``VllmWorker``/``PrefillWorker`` section or names Dynamo's own
    ``DynamoNixlConnector`` (a user's config for that SDK, without the examples' ServiceArgs)."""
    if any(isinstance(v, dict) and ("ServiceArgs" in v or "common-configs" in v) for v in doc.values()):
        return True
    return (any(isinstance(doc.get(k), dict) for k in _DYNAMO_SDK_WORKERS)
            or bool(_DYNAMO_SDK_CONNECTOR.search(repr(doc))))


#: The top-level keys of a Compose file (Compose specification: ``version``, ``name``, ``include``, ``services``,
#: ``networks``, ``volumes``, ``configs``, ``secrets``, ``models``; ``x-`` extensions besides).
_COMPOSE_KEYS = {"version", "name", "include", "services", "networks", "volumes", "configs", "secrets", "models"}


def is_compose_file(doc: dict) -> bool:
    """A Compose file (docker compose): ``services``, a map of services each with an ``image`` or ``build``, or
    ``extends`` (the Compose specification: a service may take both from the service it extends); or a file whose
    services are all in the files its ``include`` list names (only Compose's top-level keys, no ``services`` of
    another shape)."""
    services = doc.get("services")
    if (isinstance(services, dict) and bool(services)
            and all(isinstance(v, dict) and ("image" in v or "build" in v or "extends" in v) for v in services.values())):
        return True
    include = doc.get("include")
    return (isinstance(include, list) and bool(include) and services in (None, {})
            and all(isinstance(i, str) or isinstance(i, dict) and "path" in i for i in include)
            and all(str(k) in _COMPOSE_KEYS or str(k).startswith("x-") for k in doc))


#: The ``type`` values of dstack run configurations whose replicas run ``commands`` (dstack configurations.py:
#: ``ServiceConfiguration``, ``TaskConfiguration``, ``DevEnvironmentConfiguration``).
DSTACK_TYPES = ("service", "task", "dev-environment")

#: The top-level keys of a dstack run configuration beyond ``type`` (configurations.py at 511c318, the fields of
#: the configuration classes and their base classes); a document with keys outside them is not taken for one.
_DSTACK_KEYS = {
    "type", "name", "image", "user", "privileged", "entrypoint", "working_dir", "registry_auth", "python", "nvcc",
    "single_branch", "env", "shell", "resources", "priority", "volumes", "docker", "repos", "files", "setup",
    "commands", "port", "gateway", "model", "https", "auth", "replicas", "scaling", "rate_limits", "probes",
    "router", "strip_prefix", "nodes", "ports", "ide", "version", "init", "inactivity_duration", "backends",
    "regions", "availability_zones", "instance_types", "reservation", "spot_policy", "retry", "max_duration",
    "stop_duration", "max_price", "creation_policy", "idle_duration", "utilization_policy", "startup_order",
    "stop_criteria", "schedule", "fleets", "tags", "placement", "instances", "blocks",
}

def is_dstack_configuration(doc: dict) -> bool:
    """A dstack run configuration: ``type`` one of :data:`DSTACK_TYPES`, no ``kind``/``apiVersion``, only dstack's
    keys (:data:`_DSTACK_KEYS`), and ``commands`` at the top or in a replica group."""
    if doc.get("type") not in DSTACK_TYPES or "kind" in doc or "apiVersion" in doc:
        return False
    if not set(map(str, doc)) <= _DSTACK_KEYS:
        return False
    groups = doc.get("replicas")
    return bool(doc.get("commands")) or isinstance(groups, list) and any(
        isinstance(g, dict) and g.get("commands") for g in groups)


#: Top-level keys of a SkyPilot task YAML (skypilot docs, "YAML configuration": ``resources``, ``setup``, ``run``,
#: ``envs``, ``num_nodes``, ``service``, ``file_mounts``, ``workdir``); a task has ``run`` or ``setup``.
_SKYPILOT_KEYS = {"resources", "setup", "run", "envs", "num_nodes", "service", "file_mounts", "workdir", "name",
                  "secrets", "config"}


def is_skypilot_task(doc: dict) -> bool:
    """A SkyPilot task YAML: a ``run`` or ``setup`` script and only SkyPilot's top-level keys (:data:`_SKYPILOT_KEYS`)."""
    return ("run" in doc or "setup" in doc) and set(doc) <= _SKYPILOT_KEYS


def _kindless_launcher(doc: dict) -> str | None:
    """The name of a launcher format whose document has no ``kind``: a SkyPilot task (``run``/``setup`` scripts), a
    Nomad job in JSON (``nomad job run -json``: a top-level ``Job``) or a dstack run configuration whose commands
    hold no engine :mod:`~pdd_operator.compat.dstack_inputs` reads, else ``None``."""
    if is_dstack_configuration(doc):
        return "dstack run configuration"
    if is_skypilot_task(doc):
        return "SkyPilot task"
    if set(doc) == {"Job"} and isinstance(doc["Job"], dict):
        return "Nomad job (JSON)"
    return None


def _values_file(doc: dict) -> Unreadable | None:
    """A document with no ``kind`` that configures P/D KV transfer (or holds a Ray Serve LLM P/D application that names
    no connector, :func:`~pdd_operator.compat.ray_serve.pd_applications`), or ``None``: Helm values (llm-d-modelservice,
    production-stack ``servingEngineSpec``), whose charts build the engine commands (llm-d's
    ``modelCommand``/``parallelism``, production-stack's ``lmcacheConfig.kvRole``); a Ray Serve config, whose
    LLMConfigs Ray Serve LLM turns into engines (``engine_kwargs``) with the vLLM of Ray's image; a Dynamo SDK
    ``dynamo serve`` config, whose service sections Dynamo's SDK turns into engines with its own vLLM build; or a
    Compose file in which :mod:`~pdd_operator.compat.compose_inputs` found no service running vLLM (the services
    that do are read there, before this). None of them holds the engines as they start; the reason
    says what to check instead, in the file's own terms."""
    marked = pd_marked(repr(doc))
    if doc.get("kind"):
        return None
    applications = pd_applications(doc)
    preset = None if marked or applications else pd_preset(repr(doc))  # a preset of its chart, by name
    if not (marked or applications or preset):
        return None
    if preset:
        return Unreadable("Helm values (a document with no kind)", (
            f"it deploys prefill and decode engines from a chart preset ({preset}, whose name names a KV transfer): "
            "the preset ConfigMap of the chart "
            "holds their image, vLLM command, arguments and KV connector, none of which is in these values; render "
            "the chart with them (helm template) and check the rendered manifests"))
    if _is_ray_serve_config(doc):
        return Unreadable("Ray Serve config (applications with import_path)", (
            "it configures prefill/decode KV transfer in Ray Serve LLMConfigs: Ray Serve LLM builds the vLLM engines "
            "from their engine_kwargs at deploy time, with the vLLM version of the Ray image, so neither the engines' "
            f"arguments as they start nor that version is in this file{connectorless_note(doc, marked)}; check the "
            "engines Ray starts (the vLLM arguments in the replicas' logs) against the same rules as a vllm serve "
            "command"))
    if _is_dynamo_serve_config(doc):
        return Unreadable("Dynamo serve config (Dynamo SDK service sections)", (
            "it configures prefill/decode KV transfer for `dynamo serve`: Dynamo's SDK (0.1-0.3) builds the workers' "
            "engines from these sections with Dynamo's own vLLM build (its DynamoNixlConnector), which these rules "
            "(upstream vLLM's NixlConnector) do not describe; move to a Dynamo release whose workers run upstream "
            "vLLM (python3 -m dynamo.vllm in a DynamoGraphDeployment) to have it checked"))
    launcher = _kindless_launcher(doc)
    if launcher is not None:
        return Unreadable(launcher, (
            f"it is a {launcher}: it configures prefill/decode KV transfer in commands its launcher runs (their "
            "environment, hosts and vLLM version are set where they run), which these rules do not read; give the same "
            "vllm serve commands as the commands of Kubernetes containers to have them checked"))
    if is_compose_file(doc):
        return Unreadable("Compose file (services)", (
            "it configures prefill/decode KV transfer in Compose services, which these rules do not read; run the "
            "same engines as Kubernetes workloads (or give their vllm serve commands as container commands) to have "
            "them checked"))
    return Unreadable("Helm values (a document with no kind)", (
        "it configures prefill/decode KV transfer, but as chart values: the chart's templates build the engine "
        "commands, which are not in this file; render it (helm template) and check the rendered manifests"))


def _controller_input(doc: dict) -> Unreadable | None:
    """A custom resource in which no engine container was found but that configures P/D KV transfer (a RayService's
    Ray Serve LLM P/D application counts even where it names no connector), or ``None``:
    it holds the engines' settings in another shape than container commands (a RayService's ``serveConfigV2``
    LLMConfigs, a Kthena ModelBooster's worker ``config`` maps), which its controller turns into engines. Built-in
    kinds (``v1`` ConfigMaps, ``apps/v1``, ``*.k8s.io`` groups) run no such controller: text in them is not taken
    for engines."""
    group = str(doc.get("apiVersion") or "").rpartition("/")[0]
    custom = "." in group and not group.endswith(".k8s.io")
    if not doc.get("kind") or not custom:
        return None
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    where = f"{doc['kind']}/{meta.get('name', '?')}"
    marked = pd_marked(repr(doc))
    if marked or pd_applications(doc):
        return Unreadable(where, (
            "it configures prefill/decode KV transfer, but not as container commands: its controller builds the "
            f"engines from it, so they cannot be read here{connectorless_note(doc, marked)}; check the pods it "
            "creates (kubectl get pod -o yaml)"))
    roles = declared_pd_roles(doc)
    if roles is None or idle_workload(doc):
        return None
    return Unreadable(where, (
        f"it declares prefill and decode roles ({roles}), but none of them holds a vLLM engine command or KV transfer "
        "settings: its controller or its images build the engines (a preset, an image's own entrypoint), so neither "
        "their vLLM arguments nor their version is in this file; check the pods it creates (kubectl get pod -o yaml), "
        "or give their vllm serve commands as container commands"))


#: The whole script of a container that only idles (after a ``sh``/``bash -c`` wrapper, :func:`runs_shell`):
#: ``sleep N``/``sleep infinity``, ``tail -f /dev/null``, or a ``while true; do sleep N; done`` loop, optionally
#: ``exec``-ed. Such a container starts no process but the idle one, so no engine.
_IDLE_SCRIPT = re.compile(
    r"(?:exec\s+)?(?:sleep\s+(?:\d+[smhd]?|inf(?:inity)?)|tail\s+-f\s+/dev/null"
    r"|while\s+(?:true|:)\s*;?\s*do\s+sleep\s+\S+\s*;?\s*done)\s*;?", re.IGNORECASE)


def _pod_containers(node: Any) -> list[dict]:
    """Every entry of a ``containers`` list anywhere in ``node`` (pod templates of any controller's shape);
    ``initContainers`` are not among them: they end before a pod serves."""
    if isinstance(node, list):
        return [c for item in node for c in _pod_containers(item)]
    if not isinstance(node, dict):
        return []
    own = [c for c in node.get("containers") or [] if isinstance(c, dict)] if isinstance(node.get("containers"), list) else []
    return own + [c for k, v in node.items() if k != "containers" for c in _pod_containers(v)]


#: Commands that only print something about the pod (POSIX ``echo``, ``printf``, ``hostname``, ``date``, ``uname``,
#: ``id``, ``pwd``, ``whoami``) or do nothing (``true``, ``:``): a placeholder script runs them before it idles
#: (ai-dynamo/grove's user-guide PodCliques: ``echo 'Prefill Worker on node:' && hostname && sleep infinity``). None
#: of them runs another program (``env``, ``exec``, ``nohup`` and ``timeout`` do, so they are not here).
_REPORT_ONLY = frozenset({"echo", "printf", "hostname", "date", "uname", "id", "pwd", "whoami", "true", ":"})


def idle_container(container: dict) -> bool:
    """Whether a container's own ``command`` (with its ``args``) only idles (:data:`_IDLE_SCRIPT`), or is a shell
    script of simple commands (:func:`~pdd_operator.vllm.script.simple_commands`) that only print or idle
    (:data:`_REPORT_ONLY`) and ends idling. A container with no ``command`` runs its image's entrypoint, which may
    start an engine: never idle."""
    command = container.get("command")
    if not isinstance(command, list) or not command:
        return False
    argv = [str(a) for a in [*command, *(container.get("args") or [])]]
    words = shell_operands(argv)[:1] if runs_shell(argv) else [" ".join(argv)]
    if not words:
        return False
    if _IDLE_SCRIPT.fullmatch(words[0].strip()) is not None:
        return True
    steps = simple_commands(words[0]) if runs_shell(argv) else None
    return bool(steps) and _IDLE_SCRIPT.fullmatch(" ".join(steps[-1])) is not None and all(
        step[0] in _REPORT_ONLY or _IDLE_SCRIPT.fullmatch(" ".join(step)) is not None for step in steps[:-1])


def idle_workload(doc: dict) -> bool:
    """Whether every container of ``doc``'s pod templates only idles (:func:`idle_container`), runs a simulator of
    vLLM's API (:func:`simulator_container`) or is a routing sidecar in front of one
    (:func:`~pdd_operator.compat.pd_proxy.routing_sidecar_image`), so that the
    document, whatever roles it names (:func:`declared_pd_roles`), starts no engine: a scheduling sample whose
    prefill/decode roles run ``busybox`` ``sleep 3600`` (aibrix samples/disaggregation/vllm/volcano-gang-pd.yaml in
    zhangjyr/aibrix) deploys no P/D pair, which is nothing to check, not a P/D deployment left unchecked."""
    containers = _pod_containers(doc)
    idle = [idle_container(c) or simulator_container(c) for c in containers]
    return any(idle) and all(i or routing_sidecar_image(c) for i, c in zip(idle, containers, strict=True))


def simulator_container(container: dict) -> bool:
    """Whether ``container`` runs a simulator of vLLM's API (:data:`SIMULATOR`: Dynamo's mocker, llm-d's
    inference-sim), by its image or the program its command runs: it answers vLLM's HTTP API without an engine."""
    command = [str(x) for x in (container.get("command") or []) + (container.get("args") or [])]
    other = _other_pd_engine(command, str(container.get("image") or ""), [], False)
    return other is not None and other[0] == SIMULATOR


#: Keys by which an entry of a list is a workload role (pods the controller makes), not a routing or scheduling
#: profile that happens to be named ``prefill``/``decode`` (llm-d's EndpointPickerConfig ``schedulingProfiles``):
#: KAITO MultiRoleInference ``roles[]`` (``replicas``, ``instanceType``), kthena ModelServing ``roles[]``
#: (``replicas``, ``entryTemplate``, ``workerTemplate``), AIBrix StormService ``roles[]`` (``replicas``, ``template``),
#: kthena ModelBooster ``workers[]`` (``replicas``, ``pods``, ``image``), NVIDIA Grove PodCliqueSet
#: ``spec.template.cliques[]`` (``name`` beside a ``spec`` of ``roleName``, ``replicas`` and ``podSpec``: the entry's
#: ``spec`` is read with it, :func:`_role_entry`).
_WORKLOAD_ROLE_KEYS = frozenset({"replicas", "template", "entryTemplate", "workerTemplate", "workerReplicas",
                                 "instanceType", "resources", "image", "containers", "pods", "podGroupSize",
                                 "podSpec"})
#: Keys that name a workload role's phase.
_ROLE_NAME_KEYS = ("name", "type", "role", "roleName")


def _role_entry(item: dict) -> dict:
    """A list entry with the keys of its ``spec`` beside its own where that ``spec`` holds a pod template
    (``podSpec``): a Grove PodClique template, ``{name, spec: {roleName, replicas, podSpec}}`` (ai-dynamo/grove
    operator/api/core/v1alpha1 PodCliqueTemplateSpec), whose role is named by ``name`` or ``spec.roleName``. Other
    entries as they are. Pure."""
    spec = item.get("spec")
    return {**spec, **item} if isinstance(spec, dict) and "podSpec" in spec else item


def declared_pd_roles(doc: Any, path: str = "") -> str | None:
    """Where a manifest document declares a prefill/decode topology by its structure, or ``None``: the dotted path
    (``spec.roles``) of the first list holding a workload role (:data:`_WORKLOAD_ROLE_KEYS`) whose name, type or
    role (:data:`_ROLE_NAME_KEYS`) names prefill and another that names decode (:func:`_role_hint`).

    Such a resource is a P/D deployment even where no engine command and no KV transfer setting is written in it
    (KAITO's MultiRoleInference builds the engines from its preset; a kthena ModelServing may run images whose
    entrypoint starts the engine): "not checked", never "nothing to check"."""
    if isinstance(doc, dict):
        return next((found for k, v in doc.items()
                     if (found := declared_pd_roles(v, f"{path}.{k}" if path else str(k))) is not None), None)
    if not isinstance(doc, list):
        return None
    entries = [_role_entry(item) for item in doc if isinstance(item, dict)]
    hints = {_role_hint(str(item.get(key))) for item in entries if _WORKLOAD_ROLE_KEYS & set(item)
             for key in _ROLE_NAME_KEYS if isinstance(item.get(key), str)}
    if {"prefill", "decode"} <= hints:
        return path or "the document"
    return next((found for i, item in enumerate(doc)
                 if (found := declared_pd_roles(item, f"{path}[{i}]")) is not None), None)


def scan(doc: dict) -> tuple[list[Engine], list[Unreadable]]:
    """Every vLLM engine of a P/D topology in one manifest document, and the P/D engines it cannot read.

    A RoleBasedGroup's roles built from ``spec.roleTemplates`` get their merged pod templates first, in ``doc``
    itself (:func:`~pdd_operator.compat.role_templates.resolve_role_templates`), and a DynamoGraphDeployment's
    components their ``device`` field (:func:`~pdd_operator.compat.dynamo_devices.resolve_component_devices`), and
    a Modelplane PrefillDecode ModelDeployment what its compose function adds to the engines' pods
    (:func:`~pdd_operator.compat.modelplane.resolve_modelplane_plumbing`)."""
    from pdd_operator.compat.llmd_values import is_llmd_values, llmd_scan  # it scans what it renders

    if is_llmd_values(doc):  # llm-d-modelservice values: the engines its chart renders
        return llmd_scan(doc)
    from pdd_operator.compat.llmd_wrappers import wrapped_llmd_values

    wrapped = wrapped_llmd_values(doc)  # the same values inside a Flux HelmRelease or an Argo CD Application
    if wrapped is not None:
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        where = f"{doc.get('kind')}/{meta.get('name', '?')}"
        scans = [llmd_scan(v, where, prefix) if isinstance(v, dict) else (
            [], [Unreadable(f"{where} {prefix.rstrip('.')}", f"not checked, because {v}")] if _PD_MARKER.search(
                repr(doc)) else []) for prefix, v in wrapped]
        return [e for s in scans for e in s[0]], [u for s in scans for u in s[1]]
    ray = ray_serve_scan(doc)  # a Ray Serve LLM P/D application: the engines Ray builds from its LLMConfigs
    if ray is not None:
        return ray
    resolve_role_templates(doc)
    resolve_component_devices(doc)
    resolve_modelplane_plumbing(doc)
    meta = doc.get("metadata") or {}
    origin = f"{doc.get('kind', '?')}/{meta.get('name', '?')}"
    found: list = []
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    skip: frozenset[int] = frozenset()
    if doc.get("kind") in _KSERVE_LLM_KINDS:
        skip, templated = _kserve_templated(spec, origin, release_of(doc))
        found.extend(templated)
    if doc.get("kind") in _KSERVE_LLM_KINDS and isinstance(spec.get("prefill"), dict):
        # KServe P/D: spec.prefill is the prefill side and the rest of spec (template, worker) the decode
        # side, by the resource's structure, whatever the engines' flags say.
        ctx = [str(doc.get("kind", "")), str(meta.get("name", ""))]
        _walk(spec["prefill"], ["spec", "prefill"], ctx, ("prefill", "type"), found, origin, None, skip=skip)
        rest = {k: v for k, v in spec.items() if k != "prefill"}
        _walk(rest, ["spec"], ctx, ("decode", "type"), found, origin, None, skip=skip)
        found = _own_lines_without_connector(found, origin)
    elif (ome := _ome_pd_parts(doc)) is not None:
        ctx = [str(doc.get("kind", "")), str(meta.get("name", ""))]
        for key, role in zip(ome, ("prefill", "decode"), strict=True):
            if isinstance(spec.get(key), dict):
                _walk(spec[key], ["spec", key], ctx, (role, "type"), found, origin, None)
        rest = {k: v for k, v in spec.items() if k not in ome}
        _walk(rest, ["spec"], ctx, None, found, origin, None)
        if (arch := ome_architecture(doc)) is not None:
            found = [replace(e, config=replace(e.config, declared_architecture=arch)) if isinstance(e, Engine) else e
                     for e in found]
    elif doc.get("kind") == "ModelBooster" and _modelbooster_pods(spec) is not None:
        ctx = [str(doc.get("kind", "")), str(meta.get("name", ""))]
        _walk(_modelbooster_pods(spec), ["spec", "backend", "workers"], ctx, None, found, origin, None)
    else:
        _walk(doc, [], [str(doc.get("kind", ""))], None, found, origin, None, skip=skip)
    if doc.get("kind") in _KSERVE_LLM_KINDS:
        found = [replace(e, config=_with_model_source(e.config, spec)) if isinstance(e, Engine) else e for e in found]
    unreadable = [u for u in found if isinstance(u, Unreadable)]
    out = [e for e in found if isinstance(e, Engine)]
    # A container of args for an unknown entrypoint says less than the readers of values files and controller inputs.
    strong = [u for u in unreadable if not u.reason.startswith(UNKNOWN_ENTRYPOINT)]
    values = None if out or strong else _values_file(doc)
    if values is not None:
        return [], [values]
    # One object holding a prefill engine and otherwise unlabelled engines (KServe's spec.template
    # beside spec.prefill): the others are its decode side.
    roles = [e.role for e in out]
    if roles.count("prefill") >= 1 and "decode" not in roles:
        out = [Engine(**{**e.__dict__, "role": "decode", "role_from": "type"})
               if e.role in (None, "both") and not e.role_unknown else e for e in out]
    owners = tuple(f"{o.get('kind')}/{o.get('name')}" for o in meta.get("ownerReferences") or [])
    written_ns = str(meta["namespace"]) if meta.get("namespace") else None
    out = [Engine(**{**e.__dict__, "namespace": written_ns or "default", "doc_id": id(doc),
                     "config": replace(e.config, namespace=written_ns),
                     "group": _group(meta.get("labels"), e.config.pod_labels), "stem": _stem(str(meta.get("name", ""))),
                     "owners": owners}) for e in out]
    controller_input = None if out or strong else _controller_input(doc)
    return out, (strong + [controller_input]) if controller_input else unreadable


def find_engines(doc: dict) -> list[Engine]:
    """Every vLLM engine of a P/D topology in one manifest document (see :func:`scan`)."""
    return scan(doc)[0]


@dataclass(frozen=True)
class Unpaired:
    """An engine for which no counterpart was found (reported, not checked).

    aggregated: the engine names no KV connector and no engine of the other role serves its model in its namespace
    (:func:`aggregated_alone`): it serves whole requests on its own, so there is no P/D pair to check, and ``pdd
    check`` counts it as nothing to check (the same as any plain vLLM Deployment), not as "not checked".
    """

    engine: Engine
    reason: str
    aggregated: bool = False


def aggregated_alone(e: Engine, engines: list[Engine]) -> str | None:
    """Why an engine without a counterpart is plain aggregated serving, not half of a P/D pair, or ``None``.

    vLLM moves KV between instances only through a KV connector (``--kv-transfer-config``; without it the engine
    creates none: vllm/v1/core/sched/scheduler.py ``self.connector = None`` unless ``kv_transfer_config is not None``,
    0.11.0 lines 84-85, 0.34.0 lines 164-173), so an engine naming none, with no engine of the other
    role for its model in its namespace among the files, computes every prompt itself and answers it: a role word
    around it (llm-d-modelservice's ``decode`` values with ``prefill.create: false``) does not make it P/D. Not so where
    the connector may come from elsewhere: a ``--kv-transfer-config`` whose value is not in the files (``opaque``), a
    Dynamo vLLM worker (its runtime may add NixlConnector itself, :mod:`pdd_operator.compat.dynamo_engine_defaults`),
    or an engine of unknown role beside it. An engine in a P/D topology (its counterpart is in the files) with no
    connector stays ``kv-connector-missing``'s error (issue 9 item 2). Nor is an engine whose object's structure makes
    it one role of a P/D service (:func:`kserve_pd_role`: KServe creates the other role's pods whatever the files show
    of them): its counterpart is there even where its line is not in the files.

    A Dynamo vLLM worker of a DynamoGraphDeployment with no role of its own (:func:`dynamo_default_role`: Dynamo
    registers it as the ``backend`` component) and no ``--kv-transfer-config`` (none, or only the NixlConnector its
    runtime is assumed to add where the Dynamo release is not known) is aggregated too where no prefill worker
    of its model is in the files: the graph is one object and holds all its workers (Dynamo's Motif-3 aggregated
    recipe, set 114), and a backend worker that finds no ``prefill`` component prefills and decodes every request
    itself, whether or not its runtime adds a NixlConnector (:mod:`pdd_operator.compat.dynamo_roles`).
    """
    c = e.config
    # a graph's backend worker with no connector, or only the one its runtime is assumed to add (release not known)
    graph_backend = (e.role_from == "dynamo" and c.launcher == "dynamo.vllm" and (not c.kv_transfer or c.connector_assumed)
                     and c.workload_kind == "DynamoGraphDeployment")
    if e.role not in ("prefill", "decode") or not graph_backend and (c.connector is not None or c.kv_transfer or c.launcher):
        return None
    if kserve_pd_role(e):
        return None
    if any(name in ("--kv-transfer-config", "--kv_transfer_config") for name, _ in c.opaque):
        return None
    other = "decode" if e.role == "prefill" else "prefill"
    if any(o is not e and o.config.model == c.model and o.namespace == e.namespace
           and (o.role in (other, "both") or o.role is None) for o in engines):
        return None
    if graph_backend:
        return (f"it runs Dynamo's vLLM worker with no prefill role and no --kv-transfer-config, and its graph holds no "
                f"prefill worker of model {c.model}: Dynamo registers it as the backend component, which prefills and "
                "decodes every request itself (aggregated serving, not prefill/decode)")
    return (f"it names no KV connector (no --kv-transfer-config) and no {other} engine of model {c.model} is in "
            f"the files: aggregated serving, not prefill/decode (pass the {other} engine's file too if it runs "
            "elsewhere: a P/D engine without a KV connector never moves KV)")


def kserve_pd_role(e: Engine) -> bool:
    """``e`` is the ``prefill`` or ``decode`` engine of a KServe LLMInferenceService (or LLMInferenceServiceConfig)
    whose ``spec.prefill`` is set, its role told by the object's structure (:func:`scan`): KServe then creates both
    roles' workloads, the prefill from ``spec.prefill`` and the decode from the rest of ``spec`` (kserve v0.16.0
    pkg/controller/v1alpha1/llmisvc/workload_single_node.go reconcileSingleNodePrefill l.146-151, and the P/D
    well-known configs, config_merge.go l.121), so the engine is one half of a P/D pair, never aggregated serving, even where the
    other role's line is KServe's well-known template and not in the files."""
    return e.role in ("prefill", "decode") and e.role_from == "type" and e.config.workload_kind in _KSERVE_LLM_KINDS


def _same_deployment(p: Engine, d: Engine) -> str | None:
    """How ``p`` and ``d`` are known to be roles of one deployment, or ``None``."""
    if p.namespace != d.namespace:
        return None
    script = p.config.workload_kind == SCRIPT_KIND == d.config.workload_kind  # engines a host script starts
    if p.doc_id == d.doc_id:
        return "the script starts both on one host" if script else "both roles are in one object"
    shared_owner = set(p.owners) & set(d.owners)
    if shared_owner:
        owner = sorted(shared_owner)[0]
        return f"the script {owner.split('/', 1)[1]} starts both" if script else f"both are owned by {owner}"
    if p.group and p.group == d.group:
        return "their labels match once the role label is set aside (" + ", ".join(f"{k}={v}" for k, v in p.group) + ")"
    if p.stem and p.stem == d.stem:
        return f"their names differ only in the role word ({p.stem})"
    return None


def _pair(p: Engine, d: Engine, how: str, either_way: bool = False) -> PDPair:
    """The :class:`PDPair` of prefill engine ``p`` and decode engine ``d``, joined as ``how`` says."""
    notes = []
    for e in (p, d):
        text = e.config.version_text
        if text and dev_build(text):
            notes.append(dev_build_note(text) + f" ({e.config.role if e.config.role != '?' else e.role} image tag)")
    if (p.config.version is None or d.config.version is None) and not notes:
        # where each unknown release would come from: a template value or variable, a digest, a moving tag
        sources = list(dict.fromkeys(f"{e.config.role if e.config.role != '?' else e.role}'s {why}" for e in (p, d)
                                     if e.config.version is None and (why := tag_uncertainty(e.config.image))))
        notes.append("the vLLM version cannot be read from the engine image tags"
                     + (f" ({'; '.join(sources)})" if sources else ""))
        # a launcher's or vendor's own release tag (Ray, NGC, RHAIIS): say which, and why it names no vLLM
        notes += sorted({n for e in (p, d) if e.config.version is None and (n := unknown_tag_note(e.config.image))})
    read = sorted({c[1] for e in (p, d) if (c := custom_tag_version(e.config.image))})
    if read:  # a custom image's tag: say which words named the release (versions.custom_tag_version)
        how = f"{how}; vLLM {', '.join(read)}"
    served = p.config.served_model_name if p.config.served_model_name == d.config.served_model_name else None
    source = p.config.model_source if p.config.model_source == d.config.model_source else None
    alias = None if source else served_as_known(p.config.model, served)
    if alias:
        notes.append(f"the model is the local path {p.config.model}; its config.json is read as that of {alias}, the "
                     "known checkpoint both engines serve it as (--served-model-name)")
    declared = p.config.declared_architecture if p.config.declared_architecture == d.config.declared_architecture \
        else None
    named = resolve_model(SimpleNamespace(name=source or alias or p.config.model or "", architecture=None, ssm_kind=None,
                                          hf_architecture=declared, num_kv_heads=None, mamba_n_groups=None))
    return PDPair(
        source=f"{p.where} + {d.where}",
        prefill=RoleConfig(**{**p.config.__dict__, "role": "prefill"}),
        decode=RoleConfig(**{**d.config.__dict__, "role": "decode"}),
        model=named.traits, checkpoint_dtype=named.checkpoint_dtype, num_kv_heads=named.num_kv_heads,
        n_groups=named.n_groups, checkpoint_kv_cache_dtype=named.checkpoint_kv_cache_dtype, hf_architecture=named.hf_architecture,
        model_read_as=named.read_as, model_quantized=named.quantized,
        shared_network=p.pod_id == d.pod_id, notes=tuple(notes), paired_by=how,
        containers=((p.container, p.flags_key), (d.container, d.flags_key)), either_way=either_way,
    )


def _either_way_pairs(engines: list[Engine]) -> tuple[list[tuple[PDPair, Engine, Engine]], set[int]]:
    """Pairs of two ``kv_both`` engines whose roles nothing names (no ``kv_role``, flag, label, name, or proxy of the
    same script naming their ``--port``), and the ``id`` of each engine so paired.

    vLLM's own NIXL tests start a prefill and a decode engine with the same ``kv_role`` ``kv_both`` from one
    script (``tests/v1/kv_connector/nixl_integration/run_accuracy_test.sh``); a proxy then sends each request's
    prefill to one and its decode to the other, and a ``kv_both`` engine serves either side
    (``KVTransferConfig.is_kv_producer`` and ``is_kv_consumer`` are both true). Exactly two such engines of one
    deployment (:func:`_same_deployment`) serving one model, beside no prefill or decode engine of it, are
    paired with ``either_way`` set, the first found taken as prefill; :func:`~pdd_operator.compat.engine.evaluate`
    then judges both orientations. Three or more stay unpaired (which pairs the proxy forms is not in the files).

    Two ``kv_both`` NixlConnector engines that one shell script starts, its only engines, but serving different
    models (a smaller model on the decode host, set 61's spark-decode-model-3b) are paired the same way: a
    NixlConnector engine transfers KV only with a peer, and a script that starts just these two gives it no other.
    Not in manifests: one object may hold pools of several models each ready for P/D (set 40's Grove cliques without
    a role hint stay unpaired, tests/unit/test_public_report_kinds_40.py). vLLM's NIXL
    handshake then refuses the pair (model and layer count are compatibility-hash factors: nixl_connector.py 0.13.0
    lines 145-200, raised at lines 1015-1030), which ``model-mismatch`` reports. Engines of different deployments
    (other objects, scripts, owners, label groups) are never paired so (issue 9 item 1: two valid pairs in one call).
    """
    both = [e for e in engines if e.role == "both"]
    named = [e for e in engines if e.role in ("prefill", "decode")]
    pairs: list[tuple[PDPair, Engine, Engine]] = []
    taken: set[int] = set()
    for a in both:
        group = [e for e in both if e.config.model == a.config.model and (e is a or _same_deployment(a, e))]
        if id(a) in taken or len(group) != 2 or group[0] is not a:
            continue
        b = group[1]
        if any(n.config.model == a.config.model and _same_deployment(a, n) for n in named):
            continue
        how = (f"{_same_deployment(a, b)}; both run kv_role kv_both and nothing names which one prefills, so the "
               "pair was judged both ways round (an error only where both orientations fail)")
        pairs.append((_pair(a, b, how, either_way=True), a, b))
        taken |= {id(a), id(b)}
    for a in both:
        kin = [e for e in engines if e is not a and _same_deployment(a, e)]
        if (id(a) in taken or len(kin) != 1 or kin[0] not in both or id(kin[0]) in taken or not a.config.nixl
                or not a.config.workload_kind == SCRIPT_KIND == kin[0].config.workload_kind):
            continue
        b = kin[0]
        if not b.config.nixl or b.config.model == a.config.model or engines.index(b) < engines.index(a):
            continue
        how = (f"{_same_deployment(a, b)}, and they are the only engines it starts: both run NixlConnector with kv_role "
               "kv_both and serve different models, so they are judged as its prefill and decode both ways round (from "
               "vLLM 0.13.0 the NIXL handshake hashes the model into its compatibility check)")
        pairs.append((_pair(a, b, how, either_way=True), a, b))
        taken |= {id(a), id(b)}
    return pairs, taken


#: vLLM's single-engine KV offloading connectors: they move an engine's KV blocks between its own GPU cache and its
#: own CPU memory (or further tiers of its own) and never hand KV to another engine: no remote engine id, host, port
#: or side channel in kv_connector/v1/offloading_connector.py with offloading/ and in simple_cpu_offload_connector.py
#: (0.23.0 and 0.34.0 sdists; factory.py 0.34.0 lines 236-240 and 268-272 register them).
OFFLOAD_ONLY_CONNECTORS = frozenset({"OffloadingConnector", "SimpleCPUOffloadConnector"})
#: LMCache's vLLM connectors: one engine's KV cache on CPU, disk or a remote store (a Mooncake store, Redis, an LMCache
#: server) unless LMCache's own P/D mode is on, which LMCache reads from its config file or its ``LMCACHE_*``
#: variables (lmcache/v1/config.py ``_CONFIG_DEFINITIONS``: ``enable_pd`` default False, ``pd_role``; the older
#: ``enable_nixl`` / ``nixl_role`` transfer channel likewise).
LMCACHE_CONNECTORS = frozenset({"LMCacheConnectorV1", "LMCacheMPConnector"})
#: What can switch LMCache's P/D mode on for an engine: a config file (not read here) or the variables themselves.
_LMCACHE_PD_SOURCES = ("LMCACHE_CONFIG_FILE", "LMCACHE_ENABLE_PD", "LMCACHE_PD_ROLE", "LMCACHE_ENABLE_NIXL",
                       "LMCACHE_NIXL_ROLE")
#: A key of ``kv_connector_extra_config`` that can carry LMCache's P/D settings or its config file.
_LMCACHE_PD_KEY = re.compile(r"pd|nixl|config_file", re.I)


def single_engine_cache(e: Engine) -> str | None:
    """Why ``e`` is a lone engine's KV cache and not one side of a prefill/decode pair, or ``None``.

    Such an engine runs ``kv_role`` ``kv_both`` (as written) with a connector that only caches or offloads its own
    KV: one of :data:`OFFLOAD_ONLY_CONNECTORS`, or one of :data:`LMCACHE_CONNECTORS` with nothing that can turn
    LMCache's P/D mode on (no variable of ``_LMCACHE_PD_SOURCES`` in its environment, no P/D, NIXL or config-file key
    in ``kv_connector_extra_config``), or a MultiConnector whose children all are. A lone ``kv_both`` NixlConnector,
    MooncakeConnector or P2pNcclConnector engine is half of a pair whose other half is elsewhere: ``None``."""
    written = e.config.kv_transfer_written or e.config.kv_transfer
    if written.get("kv_role") != "kv_both" or not _cache_connector(written, e.config.env):
        return None
    return (f"{written.get('kv_connector')} with kv_role kv_both caches or offloads this engine's own KV and hands "
            "none to another engine")


def _cache_connector(kv: dict, env: dict | None) -> bool:
    """``kv`` (a ``--kv-transfer-config`` object) names a connector that only caches or offloads its engine's own KV
    (:func:`single_engine_cache`): an offloading one, a MultiConnector of such, or an LMCache one whose P/D mode
    nothing can turn on. ``env``: the engine's environment, read for LMCache's P/D sources; ``None`` leaves those
    (and the P/D keys of the extra config) out: the connector is an LMCache one whatever they turn on."""
    name = kv.get("kv_connector")
    extra = kv.get("kv_connector_extra_config") if isinstance(kv.get("kv_connector_extra_config"), dict) else {}
    if name == "MultiConnector":
        children = extra.get("connectors")
        return (isinstance(children, list) and bool(children)
                and all(isinstance(c, dict) and _cache_connector(c, env) for c in children))
    if name in OFFLOAD_ONLY_CONNECTORS:
        return True
    return name in LMCACHE_CONNECTORS and (env is None or (not any(k in env for k in _LMCACHE_PD_SOURCES)
                                                           and not any(_LMCACHE_PD_KEY.search(str(k)) for k in extra)))


def lone_lmcache_engine(e: Engine, engines: list[Engine]) -> str | None:
    """Why ``e`` is no side of a prefill/decode pair in these files although LMCache's P/D mode may be on in it, or
    ``None``: a ``kv_both`` engine of an LMCache connector (or a MultiConnector of LMCache and offloading ones) that
    something can switch to LMCache's P/D mode (its ``LMCACHE_CONFIG_FILE``, not in the files, ``LMCACHE_*`` P/D
    variables or extra-config keys: :func:`single_engine_cache` says ``None`` for it), with no other engine at all among
    ``engines`` (all the files' engines, encoders left out) but engines that cache only their own KV. LMCache's P/D
    channel moves KV only between two engines (lmcache/v1/config.py ``enable_pd`` with ``pd_role`` sender /
    receiver): with no second engine in the input no pair exists, whatever the file holds, so there is nothing to
    check (with this note). Where a second engine is there, which side each plays depends on their config files,
    which are not read: that pair stays "not checked" (commit d2de55a2)."""
    written = e.config.kv_transfer_written or e.config.kv_transfer
    if e.role != "both" or written.get("kv_role") != "kv_both" or not _cache_connector(written, None):
        return None
    if any(o is not e and not (o.role == "both" and single_engine_cache(o)) for o in engines):
        return None
    source = next((k for k in _LMCACHE_PD_SOURCES if k in e.config.env), "its kv_connector_extra_config")
    return (f"a lone {written.get('kv_connector')} engine with kv_role kv_both: {source} may turn LMCache's P/D mode "
            "on (its settings are not in these files), but no other vLLM engine is in the files to hand KV to or take "
            "it from, so no prefill/decode pair is here (give pdd check the peer engine's file too if it runs "
            "elsewhere)")


#: The side a ``kv_both`` engine takes opposite engines whose ``kv_role`` fixes theirs.
_OPPOSITE = {"decode": "prefill", "prefill": "decode"}


def _complement_roles(engines: list[Engine]) -> list[Engine]:
    """``engines`` with each lone ``kv_both`` engine given the role its deployment's other engines leave open.

    vLLM's ``KVTransferConfig`` makes a ``kv_consumer`` engine a consumer only and a ``kv_producer`` a producer only
    (``is_kv_producer`` / ``is_kv_consumer``: ``kv_role in ("kv_producer", "kv_both")`` / ``("kv_consumer",
    "kv_both")``, vllm/config/kv_transfer.py in every release read, 0.9.0-0.34.0). So where the other engines of a
    ``kv_both`` engine's deployment (:func:`_same_deployment`) serving its model all have their role from their
    ``kv_role`` and all the same one, the ``kv_both`` engine is the only one that can play the other side: beside
    ``kv_consumer`` decodes it is their prefill (AWS Deep Learning Containers' EFA test runs a ``kv_both``
    prefill launcher with a ``kv_consumer`` decode launcher), beside ``kv_producer`` prefills their decode. A second
    ``kv_both`` engine or an engine of unknown role of that deployment leaves the roles as they are.
    """
    out = []
    for e in engines:
        kin = [x for x in engines if x is not e and x.config.model == e.config.model and _same_deployment(e, x)]
        sides = {x.role for x in kin}
        if (e.role != "both" or e.role_unknown or len(sides) != 1 or not sides <= set(_OPPOSITE)
                or any(x.role_from != "kv_role" for x in kin)):
            out.append(e)
            continue
        out.append(Engine(**{**e.__dict__, "role": _OPPOSITE[sides.pop()], "role_from": "kv_role"}))
    return out


def _one_side_alone(p: Engine, decodes: list[Engine], prefills: list[Engine]) -> list[tuple[Engine, str]]:
    """The decode engines prefill ``p`` pairs with when one side of its model has a single engine in its namespace.

    ``decodes`` and ``prefills``: the engines of ``p``'s model and namespace (``p`` among the prefills). A router
    (llm-d's EPP, a proxy) sends each request's prefill to any prefill engine of the model and its decode to any
    decode engine, and with NIXL the decode pulls the KV from whichever prefill it is told (vLLM's
    ``kv_transfer_params``: remote engine id, host and port). So where several prefill pools share the only decode
    engine (llm-d's context-length-aware guide: ``prefill-short`` and ``prefill-long`` beside one ``decode``), or
    several decodes share the only prefill, every engine of the larger side meets the single one, whatever their
    labels and names say. Returns ``[(decode, how)]``; ``[]`` where both sides have several engines (which meet
    which is then not in the files) or one side has none.
    """
    if len(decodes) == 1 and len(prefills) > 1:
        return [(decodes[0], f"the only decode engine of model {p.config.model} in namespace {p.namespace}, shared "
                 f"by its {len(prefills)} prefill engines")]
    if len(prefills) == 1 and len(decodes) > 1:
        return [(d, f"the only prefill engine of model {p.config.model} in namespace {p.namespace}, shared by its "
                 f"{len(decodes)} decode engines") for d in decodes]
    return []


def pair_engines(engines: list[Engine]) -> tuple[list[tuple[PDPair, Engine, Engine]], list[Unpaired]]:
    """Pair each prefill engine with the decode engines of the same deployment (see the module docstring).

    Returns ``(pairs, unpaired)``; each pair comes with the two engines it was built from, and its
    ``paired_by`` says how the two were joined.
    """
    encoders = [e for e in engines if e.role == ENCODE]  # E/P/D encode workers: no P/D role, never paired
    engines = _complement_roles([e for e in engines if e.role != ENCODE])
    prefills = [e for e in engines if e.role == "prefill"]
    decodes = [e for e in engines if e.role == "decode"]
    pairs, either = _either_way_pairs(engines)
    unpaired = [Unpaired(e, lone, aggregated=True) if (lone := lone_lmcache_engine(e, engines)) else
                Unpaired(e, f"not checked: cannot tell prefill from decode because {e.role_unknown}" if e.role_unknown
                         else "its role (prefill or decode) cannot be told from kv_role, flags, labels or names")
                for e in engines if e.role not in ("prefill", "decode") and id(e) not in either
                and not (e.role == "both" and single_engine_cache(e))]  # a lone engine's cache: no P/D side
    unknown = [e for e in engines if e.role_unknown]

    def alone(e: Engine, wanted: str) -> str:
        """Why engine ``e`` has no ``wanted`` engine to pair with, naming engines of its deployment whose role is
        unknown (one of them may be that engine)."""
        maybe = [u for u in unknown if u.config.model == e.config.model and _same_deployment(e, u)]
        if maybe:
            return (f"not checked: its {wanted} engine may be {maybe[0].where}, whose role cannot be told "
                    f"({maybe[0].role_unknown}), so the pair was not checked")
        if kserve_pd_role(e):  # KServe creates the other role from spec.prefill / spec: its line is not here
            part = "spec.prefill" if wanted == "prefill" else "spec.template"
            return (f"it is the {e.role} engine of a KServe prefill/decode service (spec.prefill set), "
                    f"whose {wanted} engine's line is not in these files ({part}'s main container takes KServe's "
                    f"well-known {wanted} template, or is not given), so the pair was not checked")
        dynamo = (": it runs Dynamo's vLLM worker with no --is-prefill-worker / --disaggregation-mode prefill, so it "
                  "is the decode (or aggregated) worker, and its prefill workers are not in these files"
                  if e.role_from == "dynamo" and wanted == "prefill" else "")
        return (f"no {wanted} engine of the same deployment (namespace, owner, labels or name) serving the same "
                f"model{dynamo}")
    used: set[int] = set()
    for p in prefills:
        matched = [(d, how) for d in decodes if d.config.model == p.config.model
                   for how in [_same_deployment(p, d)] if how]
        if not matched:
            same = [d for d in decodes if d.config.model == p.config.model and d.namespace == p.namespace]
            rivals = [q for q in prefills if q.config.model == p.config.model and q.namespace == p.namespace]
            if len(same) == 1 and len(rivals) == 1:
                matched = [(same[0], f"the only prefill and decode engines of model {p.config.model} in namespace "
                            f"{p.namespace}")]
            elif len(prefills) == 1 and len(decodes) == 1 and p.namespace == decodes[0].namespace:
                matched = [(decodes[0], "the only prefill and decode engines in the files")]
            else:
                matched = _one_side_alone(p, same, rivals)
        if not matched:
            unpaired.append(Unpaired(p, alone(p, "decode")))
            continue
        for d, how in matched:
            used.add(id(d))
            pairs.append((_pair(p, d, how), p, d))
    for d in decodes:
        if id(d) not in used:
            unpaired.append(Unpaired(d, alone(d, "prefill")))
    unpaired = [replace(u, reason=why, aggregated=True) if (why := aggregated_alone(u.engine, engines)) else u
                for u in unpaired]
    return [(_with_encoders(_with_neighbours(pair, p, d, engines), p, encoders), p, d) for pair, p, d in pairs], unpaired


def _with_encoders(pair: PDPair, p: Engine, encoders: list[Engine]) -> PDPair:
    """``pair`` with :attr:`PDPair.encoders`: the encode workers (:func:`encode_worker`) of prefill ``p``'s deployment
    (:func:`_same_deployment`) that serve its model."""
    mine = tuple((e.where, e.config) for e in encoders if e.config.model == p.config.model and _same_deployment(p, e))
    return replace(pair, encoders=mine) if mine else pair


def encoder_alone(e: Engine) -> PDPair:
    """The :class:`PDPair` that holds encode worker ``e`` on both sides, each named ``encode``, for the rules that judge
    one engine by its own argv and image (:func:`pdd_operator.compat.engine.evaluate_alone` with role ``encode``):
    what stops a vLLM engine at startup (its argument parser, its KV and EC connector lookups) stops an encoder too."""
    pair = lone_pair(e)
    return replace(pair, source=e.where, prefill=replace(pair.prefill, role=ENCODE),
                   decode=replace(pair.decode, role=ENCODE), paired_by="the encode worker alone (not a P/D role)")


def lone_pair(e: Engine) -> PDPair:
    """The :class:`PDPair` that holds engine ``e`` on both sides, for the rules that judge one engine by its own
    argv and image (:func:`pdd_operator.compat.engine.evaluate_alone`) where no counterpart was found: what stops
    ``e`` at startup stops it whatever it would have been paired with."""
    return _pair(e, e, f"the {e.role} engine alone (no counterpart found)")


def _with_neighbours(pair: PDPair, p: Engine, d: Engine, engines: list[Engine]) -> PDPair:
    """``pair`` with :attr:`PDPair.neighbours`: the other engines of ``p``'s role in ``p``'s pod (or script host) and
    of ``d``'s role in ``d``'s, which share a network namespace with them but are never paired with them."""
    if pair.either_way:
        return pair
    near = tuple((e.role, e.where, e.config) for e in engines if e is not p and e is not d
                 and (e.role == "prefill" and e.pod_id == p.pod_id or e.role == "decode" and e.pod_id == d.pod_id))
    return replace(pair, neighbours=near) if near else pair


def with_model_config(pair: PDPair, model_config: dict) -> PDPair:
    """``pair`` with what the model's config.json (``pdd check --model-config``) says: its architecture
    traits, total KV heads and Mamba ``n_groups``, resolved exactly as for a PDDeployment
    (:func:`~pdd_operator.vllm.model_config.resolve_model`, with no ``spec.model`` fields set)."""
    model = SimpleNamespace(name=pair.prefill.model or "", architecture=None, ssm_kind=None, hf_architecture=None,
                            num_kv_heads=None, mamba_n_groups=None)
    resolved = resolve_model(model, model_config)
    return replace(pair, model=resolved.traits, num_kv_heads=resolved.num_kv_heads, n_groups=resolved.n_groups,
                   checkpoint_dtype=resolved.checkpoint_dtype,
                   checkpoint_kv_cache_dtype=resolved.checkpoint_kv_cache_dtype, hf_architecture=resolved.hf_architecture,
                   model_read_as=resolved.read_as,
                   model_quantized=resolved.quantized)


def with_vllm_version(pair: PDPair, text: str) -> PDPair:
    """``pair`` with vLLM ``text`` (``pdd check --vllm-version``, a release such as ``0.26.0``) for each engine
    whose image names no release (``latest``, ``nightly-<sha>``, a digest, llm-d's tags, Dynamo tags its release table lacks, a
    development build); an engine whose tag names a release keeps it. The NIXL version each such engine loads is
    then read from that release's pin where its command pins none. Raises ``ValueError`` for a ``text`` that
    is not a release version."""
    version = rules_version(text)
    if version is None or dev_build(text):
        raise ValueError(f"--vllm-version {text!r} is not a vLLM release version (e.g. 0.26.0)")

    def given(r: RoleConfig) -> RoleConfig:
        if r.version is not None:
            return r
        nixl, nixl_from = (r.nixl_version, r.nixl_from) if r.nixl_version is not None else nixl_version("", r.image, version)
        return replace(r, version=version, version_text=text, nixl_version=nixl, nixl_from=nixl_from)

    return replace(pair, prefill=given(pair.prefill), decode=given(pair.decode), notes=())
