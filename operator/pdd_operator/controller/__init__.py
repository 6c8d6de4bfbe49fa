"""The operator: thin kopf handlers (``handlers``) over a pure status folding (``status``) and an
idempotent reconcile (``reconcile``) that applies rendered children with server-side apply (``kube``)."""
