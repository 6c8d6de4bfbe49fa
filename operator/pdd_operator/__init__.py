"""pdd-operator: a Kubernetes operator for disaggregated prefill/decode vLLM serving over NIXL.

Package map (each module has one job):

- ``api``: pydantic models of the ``PDDeployment`` spec and status; the CRD is generated from them.
- ``compat``: the NixlConnector compatibility rules as data plus small pure check functions.
- ``render``: spec -> child objects (Deployments, Services), pure and deterministic.
- ``controller``: thin kopf handlers that call ``compat`` and ``render`` and apply the result.
- ``cli``: the ``pdd`` command (``run``, ``render``, ``check``, ``crd``).
"""

__version__ = "0.1.0"
