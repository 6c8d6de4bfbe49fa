"""pdd-operator: a Kubernetes operator for disaggregated prefill/decode vLLM serving over NIXL.

Package map (each subpackage has one job; the layers are enforced by import-linter, pyproject.toml:
``cli`` > ``controller`` > ``compat`` > ``render`` > ``vllm`` > ``api``; ``router`` imports only ``api``;
``api``, ``vllm``, ``render`` and ``compat`` import neither kopf nor kubernetes nor aiohttp):

- ``api``: pydantic models of the ``PDDeployment`` spec and status (the CRD is generated from them)
  and the constants of the operator-router contract (labels, annotations, port names).
- ``vllm``: facts about vLLM itself: version strings, ``vllm serve`` argv parsing, model
  architectures, a model's config.json, and ``must_match``, the one definition of what prefill and
  decode must share.
- ``render``: spec -> child objects (Deployments, Services, the router and its RBAC), pure and
  deterministic.
- ``compat``: the NixlConnector compatibility rules as data plus small pure checks, the P/D pair
  they judge, foreign manifests (Deployments, LeaderWorkerSets, ...) read into pairs, ``evaluate``.
- ``controller``: thin kopf handlers over a pure status folding and an idempotent reconcile
  (server-side apply), the watch-fed read caches (``cache``) and the reconcile work queue
  (``workqueue``), the admission webhook, its TLS, the Kubernetes client calls, metrics.
- ``router``: the P/D router (``pdd router``), one OpenAI-compatible endpoint per PDDeployment:
  endpoints and pairing, static and Kubernetes discovery, the pull/push proxy.
- ``preflight``: the KV transport check run in each engine pod's init container
  (``python -m pdd_operator.preflight``).
- ``cli``: the ``pdd`` command (``run``, ``render``, ``check``, ``rules``, ``crd``, ``router``).
- ``kubeclient``: the one place Kubernetes API clients are made (the operator's and the router's):
  a (connect, read) timeout on every request, watch timeouts.
- ``pins`` (``pins.json``): the default engine image and the versions baked into the images.

Not shipped: the tests' fakes (tests/fakes/) and the developer tools (dev/) live outside this package
and are never imported by it.
"""

__version__ = "0.1.0"
