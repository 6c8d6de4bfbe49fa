"""The node agent: plays the kubelet for ONE node of the local test cluster with local processes.

Threads: one heartbeat (the node's Lease in ``kube-node-lease`` and its Ready condition), one list+watch
of the pods bound to the node, and one :class:`PodWorker` per pod, which runs the pod's init containers
then its containers, probes them, restarts them with the kubelet's back-off, writes the pod's status
and stops the processes when the pod is deleted (preStop hooks, SIGTERM, SIGKILL after the grace
period), then removes the pod object as the kubelet does (a delete with grace period 0).
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from dev.node_agent.podspec import (
    Refused,
    Runtime,
    all_containers,
    container_argv,
    container_env,
    cpu_millis,
    field_ref,
    port_number,
    refusal,
    runtime_env,
    runtime_for,
)

log = logging.getLogger("node_agent")

#: Label and taint of the agent's node: only pods that select and tolerate it land there.
NODE_LABEL = "pdd-operator.dev/node-agent"
LEASE_SECONDS = 40
HEARTBEAT_SECONDS = 10
TICK_SECONDS = 0.5
#: The kubelet's container restart back-off: 10 s doubling up to 5 minutes, reset after 10 minutes running.
BACKOFF_START, BACKOFF_MAX, BACKOFF_RESET = 10.0, 300.0, 600.0
#: Where a service account token volume appears in the container (the ServiceAccount admission plugin's path).
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"

#: The kubernetes client picks JSON patch for a dict body; every patch here is a JSON merge patch.
MERGE = "application/merge-patch+json"
_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_PR_SET_PDEATHSIG = 1


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_bind_shim(state_dir: Path) -> Path:
    """Compile ``bindshim.c`` (once per source change) into ``state_dir``; returns the ``.so`` path."""
    src = Path(__file__).with_name("bindshim.c")
    out = state_dir / f"bindshim-{int(src.stat().st_mtime)}.so"
    if not out.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise SystemExit("node agent: a C compiler (cc) is needed to build bindshim.c")
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(src), "-ldl"], check=True)
    return out


@dataclass
class Mount:
    source: str
    target: str
    read_only: bool = False


@dataclass
class Container:
    """One container's local process and what the kubelet would report about it."""

    spec: dict
    init: bool = False
    proc: subprocess.Popen | None = None
    log_file: object = None
    started_at: str | None = None
    started_mono: float = 0.0
    restarts: int = 0
    last_terminated: dict | None = None
    terminated: dict | None = None
    waiting: tuple[str, str] = ("ContainerCreating", "")
    started: bool = False  # startup probe passed (or none)
    ready: bool = False
    backoff: float = BACKOFF_START
    restart_at: float = 0.0
    probe_next: dict = field(default_factory=dict)
    probe_fail: dict = field(default_factory=dict)
    probe_ok: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec["name"]


class PodWorker(threading.Thread):
    """Runs one pod until it is deleted (or, restartPolicy permitting, its containers finished)."""

    def __init__(self, agent: NodeAgent, pod: dict) -> None:
        super().__init__(name=f"pod-{pod['metadata']['name']}", daemon=True)
        self.agent = agent
        self.pod = pod
        self.uid = pod["metadata"]["uid"]
        self.ns = pod["metadata"]["namespace"]
        self.pod_name = pod["metadata"]["name"]
        self.dir = agent.state_dir / "pods" / f"{self.ns}_{self.pod_name}_{self.uid}"
        self.gone = threading.Event()  # the pod object is gone from the API (DELETED)
        self.pod_ip = ""
        self.cpus: list[int] = []
        self.containers = [Container(c, init=True) for c in pod["spec"].get("initContainers") or []]
        self.containers += [Container(c) for c in pod["spec"].get("containers") or []]
        self.init_done = not pod["spec"].get("initContainers")
        self.mounts: dict[str, list[Mount]] = {}
        self.refused: Refused | None = None
        self.last_status: dict | None = None
        self.start_time = (pod.get("status") or {}).get("startTime") or now()
        self.failed_phase = False

    # ---- API helpers -----------------------------------------------------------------------

    def deleting(self) -> bool:
        return bool(self.pod["metadata"].get("deletionTimestamp")) or self.gone.is_set()

    def update(self, pod: dict) -> None:
        self.pod = pod

    def lookup(self, kind: str, name: str, key: str | None):
        core = self.agent.core
        try:
            if kind == "configMap":
                data = core.read_namespaced_config_map(name, self.ns).data or {}
            else:
                import base64

                raw = core.read_namespaced_secret(name, self.ns).data or {}
                data = {k: base64.b64decode(v).decode() for k, v in raw.items()}
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return data if key is None else data.get(key)

    # ---- volumes ----------------------------------------------------------------------------

    def _write_items(self, directory: Path, data: dict[str, str], items: list | None) -> None:
        if items:
            data = {it["path"]: data[it["key"]] for it in items if it["key"] in data}
        for path, value in data.items():
            target = directory / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(value)

    def _source(self, directory: Path, kind: str, src: dict) -> None:
        if kind in ("configMap", "secret"):
            name = src.get("name") or src.get("secretName")
            data = self.lookup(kind, name, None)
            if data is None:
                if src.get("optional"):
                    return
                raise Refused("CreateContainerConfigError", f"{kind} {name!r} not found (volume not mountable)")
            self._write_items(directory, data, src.get("items"))
        elif kind == "downwardAPI":
            for it in src.get("items") or []:
                if "fieldRef" not in it:
                    raise Refused("CreateContainerConfigError", "downwardAPI resourceFieldRef items are not supported")
                value = field_ref(self.pod, it["fieldRef"]["fieldPath"], self.pod_ip, self.agent.host_ip)
                self._write_items(directory, {it["path"]: value}, None)
        elif kind == "serviceAccountToken":
            body = {"spec": {**({"audiences": [src["audience"]]} if src.get("audience") else {}),  # else the API server's
                             "expirationSeconds": int(src.get("expirationSeconds", 3600)),
                             "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": self.pod_name,
                                                "uid": self.uid}}}
            sa = self.pod["spec"].get("serviceAccountName") or "default"
            token = self.agent.core.create_namespaced_service_account_token(sa, self.ns, body).status.token
            self._write_items(directory, {src.get("path", "token"): token}, None)

    def prepare_volumes(self) -> None:
        """Materialize the pod's volumes as directories; note each container's mounts."""
        vols: dict[str, Path | None] = {}
        for v in self.pod["spec"].get("volumes") or []:
            kind = next(k for k in v if k != "name")
            directory = self.dir / "volumes" / v["name"]
            directory.mkdir(parents=True, exist_ok=True)
            if kind == "emptyDir":
                pass
            elif kind == "projected":
                for src in v["projected"].get("sources") or []:
                    skind = next(iter(src))
                    self._source(directory, skind, src[skind])
            else:
                self._source(directory, kind, v[kind])
            vols[v["name"]] = directory
        memory_dirs = {v["name"] for v in self.pod["spec"].get("volumes") or []
                       if (v.get("emptyDir") or {}).get("medium") == "Memory"}
        for c in all_containers(self.pod):
            mounts = []
            for m in c.get("volumeMounts") or []:
                if m["name"] in memory_dirs and m["mountPath"] == "/dev/shm":
                    continue  # the host's /dev/shm is memory-backed already (shared by this node's pods)
                mounts.append(Mount(str(vols[m["name"]]), m["mountPath"], bool(m.get("readOnly"))))
            self.mounts[c["name"]] = mounts

    # ---- processes --------------------------------------------------------------------------

    def _command(self, c: Container) -> tuple[list[str], dict[str, str], str]:
        runtime = runtime_for(c.spec["image"], self.agent.runtimes)
        base = self.agent.service_env(self.pod_name)
        env = container_env(self.pod, c.spec, self.pod_ip, self.agent.host_ip, base, self.lookup,
                            self.agent.cpu_capacity)
        argv = container_argv(c.spec, env, runtime)
        cpus = ",".join(map(str, self.cpus))
        penv = runtime_env(runtime, env, cpus, exclusive=self.agent.has_exclusive_cores(self.uid))
        penv["LD_PRELOAD"] = str(self.agent.bind_shim)
        penv["PDD_AGENT_POD_IP"] = self.pod_ip
        mounts = self.mounts.get(c.name) or []
        for m in mounts:
            hidden = [p for p in (runtime.venv, *argv[:2]) if os.path.isabs(p) and
                      (p + "/").startswith(m.target.rstrip("/") + "/")]
            if hidden:
                raise Refused("CreateContainerConfigError", f"container {c.name}: volumeMount at {m.target} would hide "
                              f"{hidden[0]}, which stands for the image's files here")
        if mounts:
            # A private mount namespace per container: its volumes appear at their mountPaths.
            script = "".join(
                f'mkdir -p "{m.target}" && mount --bind "{m.source}" "{m.target}" && '
                + (f'mount -o remount,bind,ro "{m.target}" && ' if m.read_only else "")
                for m in mounts) + 'exec "$@"'
            argv = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-ec", script, "sh", *argv]
        cwd = c.spec.get("workingDir") or str(self.dir)
        return argv, penv, cwd

    def _preexec(self) -> None:
        with contextlib.suppress(OSError):
            if self.cpus:
                os.sched_setaffinity(0, self.cpus)
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    def start_container(self, c: Container) -> None:
        argv, env, cwd = self._command(c)
        self.dir.mkdir(parents=True, exist_ok=True)
        c.log_file = open(self.dir / f"{c.name}.log", "ab")
        c.log_file.write(f"\n===== {now()} node agent starts {c.name}: {json.dumps(argv)}\n".encode())
        c.log_file.flush()
        c.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=c.log_file,
                                  stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=self._preexec)
        c.started_at, c.started_mono = now(), time.monotonic()
        c.terminated, c.waiting = None, ("", "")
        c.started = "startupProbe" not in c.spec
        c.ready = False
        c.probe_next, c.probe_fail, c.probe_ok = {}, {}, {}
        log.info("%s/%s: started %s (pid %d) on %s cores %s", self.ns, self.pod_name, c.name, c.proc.pid,
                 self.pod_ip, self.cpus)

    def _reap(self, c: Container, reason: str | None = None) -> None:
        # A container ends with its main process: the runtime kills what is left in it (the PID
        # namespace's init died). Here that is the process group, e.g. vLLM's EngineCore child of a
        # killed API server, which would otherwise keep its ports and memory.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(c.proc.pid, signal.SIGKILL)
        code = c.proc.returncode if c.proc.returncode >= 0 else 128 - c.proc.returncode
        c.terminated = {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                        "startedAt": c.started_at, "finishedAt": now(), "containerID": f"pdd-agent://{c.proc.pid}"}
        c.proc = None
        c.ready = False
        if c.log_file:
            c.log_file.close()
            c.log_file = None

    def kill_container(self, c: Container, grace: float, reason: str | None = None) -> None:
        """SIGTERM the container's process group, SIGKILL after ``grace`` seconds."""
        if c.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(c.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.proc.wait(timeout=max(grace, 0.1))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(c.proc.pid, signal.SIGKILL)
        # SIGKILL cannot be refused, but a process with gigabytes mapped can take long to exit on a loaded
        # machine (seen: over 10 s at load average 28); its exit status is only there once it has.
        c.proc.wait()
        self._reap(c, reason)

    # ---- probes -----------------------------------------------------------------------------

    def _probe_once(self, c: Container, probe: dict) -> bool:
        timeout = float(probe.get("timeoutSeconds", 1))
        if "httpGet" in probe:
            h = probe["httpGet"]
            host = h.get("host") or self.pod_ip
            url = f"{h.get('scheme', 'HTTP').lower()}://{host}:{port_number(c.spec, h['port'])}{h.get('path', '/')}"
            req = urllib.request.Request(url, headers={x["name"]: x["value"] for x in h.get("httpHeaders") or []})
            try:
                with urllib.request.urlopen(req, timeout=timeout) as r:
                    return 200 <= r.status < 400
            except urllib.error.HTTPError as e:
                return 200 <= e.code < 400
            except (urllib.error.URLError, OSError):
                return False
        if "tcpSocket" in probe:
            t = probe["tcpSocket"]
            try:
                with socket.create_connection((t.get("host") or self.pod_ip, port_number(c.spec, t["port"])), timeout):
                    return True
            except OSError:
                return False
        if "exec" in probe:
            # The kubelet runs an exec handler's command as written (no $(VAR) expansion of the pod's env):
            # "$" is escaped so that the expansion in _command gives it back unchanged.
            command = [a.replace("$", "$$") for a in probe["exec"]["command"]]
            argv, env, cwd = self._command(Container({**c.spec, "command": command, "args": []}))
            try:
                return subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, timeout=timeout, start_new_session=True).returncode == 0
            except subprocess.TimeoutExpired:
                return False
        return False

    def _probe(self, c: Container, kind: str) -> bool | None:
        """Run ``kind`` if it is due; return True/False when it crossed its threshold, else None."""
        probe = c.spec.get(kind)
        if not probe:
            return None
        t = time.monotonic()
        due = c.probe_next.get(kind, c.started_mono + float(probe.get("initialDelaySeconds", 0)))
        if t < due:
            return None
        c.probe_next[kind] = t + float(probe.get("periodSeconds", 10))
        if self._probe_once(c, probe):
            c.probe_fail[kind] = 0
            c.probe_ok[kind] = c.probe_ok.get(kind, 0) + 1
            return True if c.probe_ok[kind] >= int(probe.get("successThreshold", 1)) else None
        c.probe_ok[kind] = 0
        c.probe_fail[kind] = c.probe_fail.get(kind, 0) + 1
        return False if c.probe_fail[kind] >= int(probe.get("failureThreshold", 3)) else None

    # ---- the pod's lifecycle ------------------------------------------------------------------

    def restart_policy(self, c: Container) -> str:
        return "OnFailure" if c.init and self.pod["spec"].get("restartPolicy", "Always") == "Always" else \
            self.pod["spec"].get("restartPolicy", "Always")

    def _after_exit(self, c: Container) -> None:
        """A container's process ended: schedule its restart per restartPolicy, with back-off."""
        policy = self.restart_policy(c)
        code = c.terminated["exitCode"]
        if policy == "Never" or (policy == "OnFailure" and code == 0):
            if c.init and code != 0:
                self.failed_phase = True
            return
        if time.monotonic() - c.started_mono > BACKOFF_RESET:
            c.backoff = BACKOFF_START
        c.restart_at = time.monotonic() + c.backoff
        c.backoff = min(c.backoff * 2, BACKOFF_MAX)
        c.last_terminated, c.terminated = c.terminated, None
        c.restarts += 1
        c.waiting = ("CrashLoopBackOff", f"back-off {c.restart_at - time.monotonic():.0f}s restarting failed "
                     f"container={c.name} pod={self.pod_name}")

    def tick(self) -> None:
        inits = [c for c in self.containers if c.init]
        mains = [c for c in self.containers if not c.init]
        if not self.init_done:
            for c in inits:
                if c.terminated and c.terminated["exitCode"] == 0:
                    continue
                self._step(c)
                if self.failed_phase:
                    return
                break
            else:
                self.init_done = True
        if self.init_done:
            for c in mains:
                self._step(c)

    def _step(self, c: Container) -> None:
        if c.proc is None:
            if c.terminated is not None:
                return  # finished for good (restartPolicy)
            if time.monotonic() >= c.restart_at:
                try:
                    self.start_container(c)
                except Refused as exc:
                    c.waiting = (exc.reason, exc.message)
                    c.restart_at = time.monotonic() + BACKOFF_START
                except OSError as exc:
                    c.waiting = ("RunContainerError", str(exc))
                    c.restart_at = time.monotonic() + BACKOFF_START
            return
        if c.proc.poll() is not None:
            self._reap(c)
            self._after_exit(c)
            return
        if c.init:
            return
        if not c.started:
            r = self._probe(c, "startupProbe")
            if r is True:
                c.started = True
            elif r is False:
                log.info("%s/%s: %s failed its startup probe; restarting", self.ns, self.pod_name, c.name)
                self.kill_container(c, self._grace(), "Error")
                self._after_exit(c)
            return
        if self._probe(c, "livenessProbe") is False:
            log.info("%s/%s: %s failed its liveness probe; restarting", self.ns, self.pod_name, c.name)
            self.kill_container(c, self._grace(), "Error")
            self._after_exit(c)
            return
        if "readinessProbe" in c.spec:
            r = self._probe(c, "readinessProbe")
            if r is not None:
                c.ready = r
        else:
            c.ready = True

    def _grace(self) -> float:
        g = self.pod["metadata"].get("deletionGracePeriodSeconds")
        if g is None:
            g = self.pod["spec"].get("terminationGracePeriodSeconds", 30)
        return float(g)

    def _container_status(self, c: Container) -> dict:
        st: dict = {"name": c.name, "image": c.spec["image"], "imageID": "", "restartCount": c.restarts,
                    "ready": c.ready and c.proc is not None, "started": c.proc is not None and c.started}
        if c.proc is not None:
            st["state"] = {"running": {"startedAt": c.started_at}}
            st["containerID"] = f"pdd-agent://{c.proc.pid}"
        elif c.terminated is not None:
            st["state"] = {"terminated": c.terminated}
            st["containerID"] = c.terminated["containerID"]
        else:
            reason, message = c.waiting
            st["state"] = {"waiting": {"reason": reason or "ContainerCreating", **({"message": message} if message else {})}}
        if c.last_terminated:
            st["lastState"] = {"terminated": c.last_terminated}
        return st

    def status(self) -> dict:
        """The pod's status as the kubelet would report it now."""
        mains = [c for c in self.containers if not c.init]
        inits = [c for c in self.containers if c.init]
        ready = bool(mains) and all(c.ready and c.proc is not None for c in mains)
        running = any(c.proc is not None for c in mains)
        if self.failed_phase:
            phase = "Failed"
        elif mains and all(c.terminated is not None for c in mains):
            phase = "Succeeded" if all(c.terminated["exitCode"] == 0 for c in mains) else "Failed"
        elif running and self.init_done:
            phase = "Running"
        else:
            phase = "Pending"
        t = now()

        def cond(type_: str, ok: bool, reason: str = "") -> dict:
            prev = next((x for x in (self.last_status or {}).get("conditions", []) if x["type"] == type_), None)
            status = "True" if ok else "False"
            since = prev["lastTransitionTime"] if prev and prev["status"] == status else t
            return {"type": type_, "status": status, "lastTransitionTime": since, "lastProbeTime": None,
                    **({"reason": reason} if reason and not ok else {})}

        out = {
            "phase": phase,
            "hostIP": self.agent.host_ip, "hostIPs": [{"ip": self.agent.host_ip}],
            "startTime": self.start_time,
            "conditions": [
                cond("PodReadyToStartContainers", bool(self.pod_ip)),
                cond("Initialized", self.init_done, "ContainersNotInitialized"),
                cond("ContainersReady", ready, "ContainersNotReady"),
                cond("Ready", ready, "ContainersNotReady"),
                cond("PodScheduled", True),
            ],
            "containerStatuses": [self._container_status(c) for c in mains],
        }
        if self.pod_ip:
            out["podIP"], out["podIPs"] = self.pod_ip, [{"ip": self.pod_ip}]
        if inits:
            out["initContainerStatuses"] = [self._container_status(c) for c in inits]
        if self.refused:
            for st in out["containerStatuses"] + out.get("initContainerStatuses", []):
                st["state"] = {"waiting": {"reason": self.refused.reason, "message": self.refused.message}}
            out["message"] = self.refused.message
            out["reason"] = "NodeAgentRefused"
        return out

    def publish(self) -> None:
        st = self.status()
        if st == self.last_status or self.gone.is_set():
            return
        try:
            self.agent.core.patch_namespaced_pod_status(self.pod_name, self.ns, {"status": st}, _content_type=MERGE)
            self.last_status = st
        except ApiException as exc:
            if exc.status == 404:
                self.gone.set()
            else:
                log.warning("%s/%s: status patch failed: %s %s", self.ns, self.pod_name, exc.status, exc.reason)

    def run_prestop(self, c: Container, deadline: float) -> None:
        hook = ((c.spec.get("lifecycle") or {}).get("preStop")) or {}
        if not hook or c.proc is None:
            return
        budget = max(deadline - time.monotonic(), 0.1)
        if "sleep" in hook:
            time.sleep(min(float(hook["sleep"]["seconds"]), budget))
        else:
            self._probe_once(c, {**hook, "timeoutSeconds": budget})

    def terminate(self) -> None:
        """The pod is being deleted: preStop hooks, then SIGTERM, SIGKILL at the end of the grace period."""
        grace = self._grace()
        deadline = time.monotonic() + grace
        mains = [c for c in self.containers if c.proc is not None]
        hooks = [threading.Thread(target=self.run_prestop, args=(c, deadline), daemon=True) for c in mains]
        for h in hooks:
            h.start()
        for h in hooks:
            h.join(max(deadline - time.monotonic(), 0))
        for c in mains:
            if c.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.proc.pid, signal.SIGTERM)
        for c in mains:
            if c.proc is not None:
                self.kill_container(c, max(deadline - time.monotonic(), 0))
        for c in self.containers:
            self.kill_container(c, 0)

    def run(self) -> None:
        try:
            self._run()
        except Exception:  # noqa: BLE001 - a broken pod must not take the agent down
            log.exception("%s/%s: worker failed", self.ns, self.pod_name)
            for c in self.containers:
                self.kill_container(c, 1)
        finally:
            self.agent.release(self)

    def _run(self) -> None:
        self.refused = refusal(self.pod, self.agent.runtimes)
        if self.refused:
            log.info("%s/%s: refused: %s", self.ns, self.pod_name, self.refused.message)
        else:
            self.pod_ip, self.cpus = self.agent.allocate(self)
        volumes_ready, next_mount = False, 0.0
        while not self.deleting() and not self.agent.stopping.is_set():
            if not self.refused and not volumes_ready and time.monotonic() >= next_mount:
                # Like the kubelet's FailedMount: retried until it works (e.g. kube-root-ca.crt not yet published).
                try:
                    self.prepare_volumes()
                    volumes_ready = True
                except (Refused, ApiException) as exc:
                    message = exc.message if isinstance(exc, Refused) else f"{exc.status} {exc.reason}"
                    for c in self.containers:
                        c.waiting = ("ContainerCreating", f"MountVolume failed (retrying): {message}")
                    next_mount = time.monotonic() + 2
            if volumes_ready:
                self.tick()
            self.publish()
            time.sleep(TICK_SECONDS)
        if self.agent.stopping.is_set() and not self.deleting():
            self.terminate()  # the agent stops: its processes go with it (the pod stays)
            return
        self.terminate()
        self.publish()
        if not self.gone.is_set():
            with contextlib.suppress(ApiException):
                self.agent.core.delete_namespaced_pod(
                    self.pod_name, self.ns, body=client.V1DeleteOptions(
                        grace_period_seconds=0, preconditions=client.V1Preconditions(uid=self.uid)))
        shutil.rmtree(self.dir / "volumes", ignore_errors=True)
        log.info("%s/%s: stopped and removed", self.ns, self.pod_name)


class NodeAgent:
    """The kubelet of one node, for pods whose processes run on this machine.

    Args:
        api: a ``kubernetes.client.ApiClient`` (admin credentials: the agent writes Nodes, Leases,
            pod status, token requests).
        node_name: the Node it registers and heartbeats.
        pod_cidr: loopback range for pod IPs (e.g. ``127.0.100.0/24``); must lie in 127.0.0.0/8.
        runtimes: which images it can run, and how (:class:`Runtime`).
        state_dir: pod directories (container logs ``<ns>_<pod>_<uid>/<container>.log``, volumes).
        cpu_capacity: CPUs the Node advertises (the scheduler's view; the real cores are shared).
        apiserver: ``(host, port)`` of the API server, given to pods as the ``kubernetes`` Service's
            address (there is no kube-proxy here).
    """

    def __init__(self, api, node_name: str, pod_cidr: str, runtimes: list[Runtime], state_dir: Path,
                 cpu_capacity: int, apiserver: tuple[str, int], memory: str | None = None) -> None:
        net = ipaddress.ip_network(pod_cidr)
        if not net.subnet_of(ipaddress.ip_network("127.0.0.0/8")):
            raise ValueError(f"--pod-cidr {pod_cidr}: must be a loopback range inside 127.0.0.0/8 (e.g. 127.0.100.0/24)")
        self.api = api
        self.core = client.CoreV1Api(api)
        self.coord = client.CoordinationV1Api(api)
        self.node_name = node_name
        self.pod_cidr = net
        self.runtimes = runtimes
        self.state_dir = state_dir
        self.cpu_capacity = cpu_capacity
        self.memory = memory or f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 2**20}Mi"
        self.apiserver = apiserver
        self.host_ip = "127.0.0.1"
        self.bind_shim = build_bind_shim(state_dir)
        self.stopping = threading.Event()
        self.workers: dict[str, PodWorker] = {}
        self.lock = threading.Lock()
        self.ips: dict[str, str] = {}  # pod uid -> IP
        self.exclusive: dict[str, list[int]] = {}  # pod uid -> cores given to it alone
        self.cores = sorted(os.sched_getaffinity(0))

    # ---- node --------------------------------------------------------------------------------

    def node_object(self) -> dict:
        res = {"cpu": str(self.cpu_capacity), "memory": self.memory, "pods": "110", "ephemeral-storage": "100Gi"}
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.node_name, "labels": {
                "kubernetes.io/hostname": self.node_name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "local-processes", NODE_LABEL: "true"}},
            "spec": {"podCIDR": str(self.pod_cidr), "podCIDRs": [str(self.pod_cidr)],
                     "taints": [{"key": NODE_LABEL, "value": "true", "effect": "NoSchedule"}]},
            "status": {"capacity": res, "allocatable": res},
        }

    def node_status(self) -> dict:
        t = now()
        conds = [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                  "message": "pdd-operator dev node agent (local processes) is posting ready status"}]
        for type_, reason in (("MemoryPressure", "KubeletHasSufficientMemory"), ("DiskPressure", "KubeletHasNoDiskPressure"),
                              ("PIDPressure", "KubeletHasSufficientPID")):
            conds.append({"type": type_, "status": "False", "reason": reason, "message": ""})
        for c in conds:
            c["lastHeartbeatTime"] = t
            c.setdefault("lastTransitionTime", t)
        res = self.node_object()["status"]["capacity"]
        return {"status": {
            "capacity": res, "allocatable": res, "conditions": conds,
            "addresses": [{"type": "InternalIP", "address": self.host_ip}, {"type": "Hostname", "address": self.node_name}],
            "nodeInfo": {"kubeletVersion": "v0.0.0-pdd-node-agent", "operatingSystem": "linux", "architecture": "amd64",
                         "containerRuntimeVersion": "local-processes://0", "kernelVersion": os.uname().release,
                         "osImage": "pdd-operator dev node agent", "machineID": "", "systemUUID": "", "bootID": "",
                         "kubeProxyVersion": ""},
        }}

    def register(self) -> None:
        """Create (or take over) the Node, mark it Ready, create its Lease."""
        try:
            self.core.create_node(self.node_object())
        except ApiException as exc:
            if exc.status != 409:
                raise
            self.core.patch_node(self.node_name, {k: v for k, v in self.node_object().items() if k != "status"},
                                _content_type=MERGE)
        node = self.core.read_node(self.node_name)
        self._ready_transition = now()
        self.core.patch_node_status(self.node_name, self.node_status(), _content_type=MERGE)
        lease = {"metadata": {"name": self.node_name, "namespace": "kube-node-lease",
                              "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": self.node_name,
                                                   "uid": node.metadata.uid}]},
                 "spec": {"holderIdentity": self.node_name, "leaseDurationSeconds": LEASE_SECONDS,
                          "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}
        try:
            self.coord.create_namespaced_lease("kube-node-lease", lease)
        except ApiException as exc:
            if exc.status != 409:
                raise
            self.renew_lease()

    def renew_lease(self) -> None:
        self.coord.patch_namespaced_lease(self.node_name, "kube-node-lease", {"spec": {
            "holderIdentity": self.node_name, "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}, _content_type=MERGE)

    def heartbeat(self) -> None:
        beats = 0
        while not self.stopping.wait(HEARTBEAT_SECONDS):
            try:
                self.renew_lease()
                beats += 1
                if beats % 3 == 0:
                    self.core.patch_node_status(self.node_name, self.node_status(), _content_type=MERGE)
            except Exception as exc:  # noqa: BLE001 - keep beating whatever the apiserver does
                log.warning("heartbeat failed: %s", exc)

    def service_env(self, pod_name: str) -> dict[str, str]:
        """What the kubelet gives every container first: the ``kubernetes`` Service's variables (here the
        API server's own address: no kube-proxy) and ``HOSTNAME``."""
        host, port = self.apiserver
        return {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": str(port),
                "KUBERNETES_SERVICE_PORT_HTTPS": str(port), "KUBERNETES_PORT": f"tcp://{host}:{port}",
                "KUBERNETES_PORT_443_TCP": f"tcp://{host}:{port}", "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
                "KUBERNETES_PORT_443_TCP_ADDR": host, "KUBERNETES_PORT_443_TCP_PORT": str(port),
                "HOSTNAME": pod_name}

    # ---- pod addresses and cores ---------------------------------------------------------------

    def allocate(self, worker: PodWorker) -> tuple[str, list[int]]:
        """A pod's loopback IP (its existing one when it has one in the range) and CPU set: cores of its
        own for a whole-core CPU request while free cores last (like the kubelet's static CPU manager),
        else the cores nobody holds (else all)."""
        with self.lock:
            existing = (worker.pod.get("status") or {}).get("podIP")
            taken = set(self.ips.values())
            if existing and ipaddress.ip_address(existing) in self.pod_cidr and existing not in taken:
                ip = existing
            else:
                ip = next(str(a) for a in list(self.pod_cidr.hosts())[1:] if str(a) not in taken)
            self.ips[worker.uid] = ip
            millis = sum(cpu_millis(((c.get("resources") or {}).get("requests") or {}).get("cpu"))
                         for c in worker.pod["spec"].get("containers") or [])
            held = {c for cores in self.exclusive.values() for c in cores}
            free = [c for c in self.cores if c not in held]
            if millis >= 1000 and millis % 1000 == 0 and len(free) >= millis // 1000:
                cores = free[:millis // 1000]
                self.exclusive[worker.uid] = cores
            else:
                cores = free or list(self.cores)
            return ip, cores

    def has_exclusive_cores(self, uid: str) -> bool:
        """Whether the pod ``uid`` was given cores of its own (:meth:`allocate`), not the shared ones."""
        with self.lock:
            return uid in self.exclusive

    def release(self, worker: PodWorker) -> None:
        with self.lock:
            self.ips.pop(worker.uid, None)
            self.exclusive.pop(worker.uid, None)
            if self.workers.get(worker.uid) is worker:
                del self.workers[worker.uid]

    # ---- pods --------------------------------------------------------------------------------

    def dispatch(self, kind: str, pod: dict) -> None:
        uid = pod["metadata"]["uid"]
        with self.lock:
            worker = self.workers.get(uid)
            if kind == "DELETED":
                if worker:
                    worker.gone.set()
                return
            if worker is None:
                if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") and \
                        not pod["metadata"].get("deletionTimestamp"):
                    return  # finished before: nothing to run
                worker = PodWorker(self, pod)
                self.workers[uid] = worker
                worker.start()
            else:
                worker.update(pod)

    def watch_pods(self) -> None:
        serialize = self.api.sanitize_for_serialization
        selector = f"spec.nodeName={self.node_name}"
        while not self.stopping.is_set():
            try:
                listing = self.core.list_pod_for_all_namespaces(field_selector=selector)
                for p in listing.items:
                    self.dispatch("ADDED", serialize(p))
                w = watch.Watch()
                for ev in w.stream(self.core.list_pod_for_all_namespaces, field_selector=selector,
                                   resource_version=listing.metadata.resource_version, timeout_seconds=60):
                    if self.stopping.is_set():
                        w.stop()
                        break
                    if ev["type"] == "ERROR":
                        break
                    self.dispatch(ev["type"], serialize(ev["object"]))
            except Exception as exc:  # noqa: BLE001 - list again whatever happened to the connection
                if not self.stopping.is_set():
                    log.warning("pod watch failed: %s", exc)
                    time.sleep(1)

    def run(self) -> None:
        """Register the node and serve its pods until :meth:`stop`."""
        self.register()
        log.info("node %s registered (pod CIDR %s, %d CPUs advertised, cores %s)", self.node_name, self.pod_cidr,
                 self.cpu_capacity, self.cores)
        threads = [threading.Thread(target=self.heartbeat, name="heartbeat", daemon=True),
                   threading.Thread(target=self.watch_pods, name="pod-watch", daemon=True)]
        for t in threads:
            t.start()
        self.stopping.wait()
        with self.lock:
            workers = list(self.workers.values())
        for w in workers:
            w.join(120)

    def stop(self) -> None:
        self.stopping.set()

    def delete_node(self) -> None:
        with contextlib.suppress(ApiException):
            self.core.delete_node(self.node_name)
