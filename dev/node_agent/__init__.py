"""A dev/test node agent: the kubelet of ONE node of the local test cluster, with local processes.

NOT part of the operator and never used in production. The local cluster (dev/cluster) has a real
control plane whose kwok nodes run nothing; this agent registers one more Node (labelled and tainted
``pdd-operator.dev/node-agent=true``, which kwok does not manage: kwok only takes nodes annotated
``kwok.x-k8s.io/node=fake``) and runs the pods bound to it as local processes:

- each pod gets its own loopback address from the node's pod CIDR (``127.0.100.0/24``): it is the
  pod's ``status.podIP``, what its downward API says, and where its wildcard binds go (a preloaded
  ``bind()``, bindshim.c, since all pods share the host's network namespace);
- a container's command and args run with the env the kubelet would build (downward API values,
  ConfigMap/Secret references, ``$(VAR)`` expansion, the ``kubernetes`` Service variables pointing at
  the API server's real address: there is no kube-proxy); the image is stood for by a local
  virtualenv (runtimes.yaml); a pod with an image, a volume or a device it cannot provide is refused
  and its container status says why;
- volumes (emptyDir, configMap, secret, downwardAPI, projected service account tokens from the
  TokenRequest API) are directories bind-mounted at their mountPaths in a private mount namespace
  per container (a mountPath missing on the host is created there as an empty directory, e.g.
  ``/var/run/secrets/kubernetes.io/serviceaccount``; the mounts themselves are private); an emptyDir
  of medium Memory at ``/dev/shm`` is the host's /dev/shm;
- a pod whose CPU request is whole cores gets cores of its own while free ones last (as the kubelet's
  static CPU manager gives them); the others share the rest (the process's affinity). vLLM's OpenMP
  threads are bound (``VLLM_CPU_OMP_THREADS_BIND``, runtimes.yaml ``{omp_bind}``) to cores of the pod's
  own only: bound to a shared set, every engine's worker thread sat on its first core and a
  busy-waiting prefill starved decode (podspec.py ``omp_bind``);
- init containers run first, in order; startup, readiness and liveness probes (httpGet, tcpSocket,
  exec) run as the kubelet runs them; exited containers restart with the kubelet's back-off;
- a deleted pod gets its preStop hooks, SIGTERM, SIGKILL after the grace period, then its object is
  removed; the Node's Lease in ``kube-node-lease`` and its Ready condition are kept fresh.

Not done (unlike a kubelet): CPU/memory limits (cgroups), network isolation, image pulls, security
contexts (users, capabilities, read-only root filesystems, seccomp), ``kubectl logs``/``exec`` (logs are
files under the state dir), ephemeral containers, token rotation.

Run: ``python -m dev.node_agent --kubeconfig ... --node-name local-cpu`` (see ``--help``).
"""
