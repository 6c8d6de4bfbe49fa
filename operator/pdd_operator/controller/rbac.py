"""The Kubernetes permissions pdd-operator needs: one definition, as pure data.

Everything that grants or checks the operator's access derives from :func:`rules`:

- ``pdd rbac`` prints the ClusterRole/Role objects (:func:`manifests`) and the reference table
  (:func:`markdown`, committed as ``docs/rbac.md``);
- the Helm chart's RBAC template reads ``charts/pdd-operator/files/rbac-rules.yaml``
  (:func:`chart_rules`), and a unit test renders the chart and compares its roles with :func:`manifests`;
- ``pdd run`` asks the apiserver (SelfSubjectAccessReview) for every :func:`access_checks` entry
  before it starts and refuses to start when one is missing, naming it
  (:func:`pdd_operator.controller.kube.Kube.missing_access`).

The verbs are those the code calls (read in ``controller/kube.py``, ``handlers.py``, ``informer.py``,
``webhook.py`` and kopf 1.45's watcher) and were confirmed on a kube-apiserver's audit log
(``/work/shared/docs/helm-gitops-facts.md``, "What the operator calls"). Deliberately absent:

- ``delete`` on anything: children go by garbage collection through their ownerReferences;
- ``patch``/``update`` of PDDeployments themselves: the operator writes only their status;
- Secrets other than the webhook's own (``resourceNames``), and ``create`` of that one (the chart
  creates it empty);
- CustomResourceDefinitions and Namespaces: kopf's scanning of them is switched off
  (``settings.scanning.disabled`` in :mod:`pdd_operator.controller.handlers`);
- ``patch``/``update`` of Events: kopf's event posting is switched off (``settings.posting.enabled =
  False``); the operator only creates its own Events, one per status transition
  (:mod:`pdd_operator.controller.events`: repeats are dropped in the operator, not aggregated by a patch
  of ``count``), and ReconcileError;
- wildcards of any kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pdd_operator.api.constants import GROUP, PLURAL
from pdd_operator.render.workloads import ROUTER_RULES

#: How the operator treats the ValidatingWebhookConfiguration (``pdd run --webhook-configuration-mode``):
#: ``apply`` writes the whole object (a laptop run), ``ca-bundle`` only patches ``caBundle`` of the one
#: the Helm chart made, ``none`` leaves it alone (cert-manager's CA injector fills ``caBundle``).
WebhookConfigurationMode = Literal["apply", "ca-bundle", "none"]
WEBHOOK_CONFIGURATION_MODES: tuple[str, ...] = ("apply", "ca-bundle", "none")

#: Where a rule is granted: in every watched namespace (a ClusterRole when all are watched),
#: cluster-wide for cluster-scoped objects, or in the operator's own namespace.
Scope = Literal["watched", "cluster", "operator-namespace"]

#: Placeholders of :func:`chart_rules` for names the chart chooses; the chart's template replaces them.
WEBHOOK_CONFIGURATION_PLACEHOLDER = "WEBHOOK_CONFIGURATION_NAME"
WEBHOOK_SECRET_PLACEHOLDER = "WEBHOOK_SECRET_NAME"
LEASE_PLACEHOLDER = "LEADER_ELECTION_LEASE_NAME"


@dataclass(frozen=True)
class Rule:
    """One RBAC policy rule and why the operator needs it.

    ``api_group``: ``""`` for the core group. ``resource_names``: empty means every object of the
    resources. ``scope``: see :data:`Scope`.
    """

    api_group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    scope: Scope
    why: str
    resource_names: tuple[str, ...] = ()

    def policy_rule(self) -> dict:
        """The rule as a ``rbac.authorization.k8s.io/v1`` PolicyRule dict."""
        out: dict = {"apiGroups": [self.api_group], "resources": list(self.resources)}
        if self.resource_names:
            out["resourceNames"] = list(self.resource_names)
        out["verbs"] = list(self.verbs)
        return out


@dataclass(frozen=True)
class Options:
    """What the operator is configured to do, which decides the rules it needs.

    - ``namespace``: where the operator runs (its ServiceAccount, the webhook Secret);
    - ``watch_namespaces``: the namespaces whose PDDeployments it serves; empty means all;
    - ``webhook_configuration``: the ValidatingWebhookConfiguration's name, or ``None`` when the
      operator serves no webhook; ``webhook_configuration_mode`` how it writes it;
    - ``webhook_secret``: the Secret in ``namespace`` holding the webhook's CA and serving certificate
      (``None``: certificates live on local disk only);
    - ``leader_election_lease``: the Lease in ``namespace`` replicas elect their leader with (``None``:
      no leader election, a single replica).
    """

    namespace: str = "pdd-system"
    watch_namespaces: tuple[str, ...] = ()
    webhook_configuration: str | None = None
    webhook_configuration_mode: WebhookConfigurationMode = "apply"
    webhook_secret: str | None = None
    leader_election_lease: str | None = None

    def __post_init__(self) -> None:
        if self.webhook_configuration_mode not in WEBHOOK_CONFIGURATION_MODES:
            raise ValueError(f"webhook configuration mode must be one of {', '.join(WEBHOOK_CONFIGURATION_MODES)}, "
                             f"got {self.webhook_configuration_mode!r}")
        if len(set(self.watch_namespaces)) != len(self.watch_namespaces):
            raise ValueError(f"watch namespaces are listed twice: {', '.join(self.watch_namespaces)}")


def _merged(*verb_lists: Sequence[str]) -> tuple[str, ...]:
    order = ("get", "list", "watch", "create", "update", "patch")
    verbs = {v for vs in verb_lists for v in vs}
    return tuple(v for v in order if v in verbs) + tuple(sorted(verbs - set(order)))


#: The pods verbs: list and watch for the operator (its informer, the status of each role), plus
#: whatever the router Role it creates grants: RBAC escalation prevention refuses to let anyone
#: grant a verb it does not hold itself ("attempting to grant RBAC permissions not currently held").
_POD_VERBS = _merged(("list", "watch"), *(r["verbs"] for r in ROUTER_RULES if "pods" in r["resources"]))


def rules(options: Options) -> list[Rule]:
    """Every rule the operator needs with ``options``, in a stable order."""
    out = [
        Rule(GROUP, (PLURAL,), ("get", "list", "watch"), "watched",
             "kopf watches PDDeployments; each reconcile reads one; the resync lists them"),
        Rule(GROUP, (f"{PLURAL}/status",), ("patch",), "watched",
             "status is written with a merge patch of the status subresource"),
        Rule(GROUP, (f"{PLURAL}/finalizers",), ("update",), "watched",
             "children set blockOwnerDeletion on their ownerReference, which the "
             "OwnerReferencesPermissionEnforcement admission plugin (on in OpenShift) allows only to "
             "who may update the owner's finalizers"),
        Rule("apps", ("deployments",), ("get", "list", "watch", "create", "patch"), "watched",
             "prefill, decode and router Deployments: server-side apply (authorized as create for a new "
             "object, patch for an existing one); its informer watches them to restore deleted children"),
        Rule("", ("services",), ("get", "list", "watch", "create", "patch"), "watched",
             "engine and router Services, as for Deployments"),
        Rule("", ("pods",), _POD_VERBS, "watched",
             "an informer watches engine pods (scheduling reasons, preflight verdicts); get because the router "
             "Role the operator creates grants it"),
        Rule("", ("configmaps",), ("get", "list", "watch"), "watched",
             "the model's config.json named by spec.model.configMapRef: an informer watches ConfigMaps (they carry "
             "no label of the operator's to filter by) and keeps the referenced ones; get for one "
             "referenced before its next watch event"),
        Rule("", ("serviceaccounts",), ("get", "list", "watch", "create", "patch"), "watched",
             "the router's ServiceAccount (server-side apply); an informer watches it to restore it when deleted"),
        Rule("rbac.authorization.k8s.io", ("roles", "rolebindings"), ("get", "list", "watch", "create", "patch"),
             "watched", "the router's Role and RoleBinding (server-side apply); informers watch them as children"),
        Rule("", ("events",), ("create",), "watched",
             "an Event on the PDDeployment for each status transition (Scaled, RolledOut, Incompatible, "
             "InvalidSpec, a Degraded reason such as ApplyFailed, Recovered; controller/events.py) and a failed "
             "reconcile (ReconcileError); repeats are dropped in the operator, so no patch"),
    ]
    if options.webhook_configuration and options.webhook_configuration_mode != "none":
        verbs = ("get", "patch") if options.webhook_configuration_mode == "ca-bundle" else ("get", "create", "patch")
        what = ("patches caBundle of the chart's ValidatingWebhookConfiguration"
                if options.webhook_configuration_mode == "ca-bundle"
                else "writes its ValidatingWebhookConfiguration (server-side apply; create the first time)")
        out.append(Rule("admissionregistration.k8s.io", ("validatingwebhookconfigurations",), verbs, "cluster",
                        f"the webhook {what}", resource_names=(options.webhook_configuration,)))
    if options.webhook_secret:
        out.append(Rule("", ("secrets",), ("get", "update", "patch"), "operator-namespace",
                        "the webhook's CA and serving certificate live in this one Secret, which the chart "
                        "creates empty (update with resourceVersion, so replicas never overwrite each other)",
                        resource_names=(options.webhook_secret,)))
    if options.leader_election_lease:
        out.append(Rule("coordination.k8s.io", ("leases",), ("get", "update"), "operator-namespace",
                        "leader election: read and renew or take over the Lease (controller/leader.py)",
                        resource_names=(options.leader_election_lease,)))
        out.append(Rule("coordination.k8s.io", ("leases",), ("create",), "operator-namespace",
                        "leader election: create the Lease the first time (a create cannot be limited to a name)"))
    return out


# --- objects ----------------------------------------------------------------------------------------


def _meta(name: str, namespace: str | None, labels: dict[str, str]) -> dict:
    meta: dict = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    return meta


def _binding(kind: str, name: str, namespace: str | None, role_kind: str, labels: dict[str, str],
             service_account: str, sa_namespace: str) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": _meta(name, namespace, labels),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": sa_namespace}],
    }


def _role(kind: str, name: str, namespace: str | None, labels: dict[str, str], rule_list: list[Rule]) -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": _meta(name, namespace, labels),
            "rules": [r.policy_rule() for r in rule_list]}


def manifests(options: Options, *, name: str = "pdd-operator", service_account: str = "pdd-operator",
              labels: dict[str, str] | None = None) -> list[dict]:
    """The RBAC objects that grant :func:`rules` to ``service_account`` in ``options.namespace``.

    - all namespaces watched: ClusterRole + ClusterRoleBinding ``name`` with the watched and cluster
      rules;
    - listed namespaces: a Role + RoleBinding ``name`` in each, and a ClusterRole + ClusterRoleBinding
      ``name`` only for cluster-scoped rules (the webhook configuration), none when there are none;
    - a Role + RoleBinding ``name`` in ``options.namespace`` for its rules (the webhook Secret).
    """
    labels = labels or {}
    sa = (service_account, options.namespace)
    rule_list = rules(options)
    watched = [r for r in rule_list if r.scope == "watched"]
    cluster = [r for r in rule_list if r.scope == "cluster"]
    own = [r for r in rule_list if r.scope == "operator-namespace"]
    out: list[dict] = []
    cluster_rules = cluster if options.watch_namespaces else watched + cluster
    if cluster_rules:
        out.append(_role("ClusterRole", name, None, labels, cluster_rules))
        out.append(_binding("ClusterRoleBinding", name, None, "ClusterRole", labels, *sa))
    for ns in options.watch_namespaces:
        rules_here = watched + (own if ns == options.namespace else [])
        out.append(_role("Role", name, ns, labels, rules_here))
        out.append(_binding("RoleBinding", name, ns, "Role", labels, *sa))
    if own and options.namespace not in options.watch_namespaces:
        out.append(_role("Role", name, options.namespace, labels, own))
        out.append(_binding("RoleBinding", name, options.namespace, "Role", labels, *sa))
    return out


def chart_rules() -> dict[str, list[dict]]:
    """The rules for ``charts/pdd-operator/files/rbac-rules.yaml``, by scope, with the names the chart
    chooses as placeholders (:data:`WEBHOOK_CONFIGURATION_PLACEHOLDER`, :data:`WEBHOOK_SECRET_PLACEHOLDER`).

    ``cluster-ca-bundle`` and ``cluster-apply`` are the webhook configuration rule of each mode; the
    chart uses ``ca-bundle`` (or none with cert-manager). In the operator's namespace,
    ``operator-namespace-webhook`` (the certificate Secret) comes before ``operator-namespace-leader-election``.
    """
    def scoped(opts: Options, scope: Scope) -> list[dict]:
        return [r.policy_rule() for r in rules(opts) if r.scope == scope]

    ca = Options(webhook_configuration=WEBHOOK_CONFIGURATION_PLACEHOLDER, webhook_configuration_mode="ca-bundle",
                 webhook_secret=WEBHOOK_SECRET_PLACEHOLDER)
    apply = Options(webhook_configuration=WEBHOOK_CONFIGURATION_PLACEHOLDER, webhook_configuration_mode="apply")
    return {
        "watched": scoped(ca, "watched"),
        "cluster-ca-bundle": scoped(ca, "cluster"),
        "cluster-apply": scoped(apply, "cluster"),
        "operator-namespace-webhook": scoped(ca, "operator-namespace"),
        "operator-namespace-leader-election": scoped(Options(leader_election_lease=LEASE_PLACEHOLDER),
                                                     "operator-namespace"),
    }


# --- checks at startup ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AccessCheck:
    """One SelfSubjectAccessReview: may the operator ``verb`` ``resource`` (``group``) in ``namespace``
    (``""``: all namespaces, or a cluster-scoped object), object ``name`` (``""``: any)?"""

    group: str
    resource: str
    verb: str
    namespace: str = ""
    name: str = ""
    why: str = field(default="", compare=False)

    def describe(self) -> str:
        """``verb group/resource "name" in namespace`` for messages."""
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        where = f" in namespace {self.namespace}" if self.namespace else ""
        named = f" {self.name!r}" if self.name else ""
        return f"{self.verb} {what}{named}{where}"


def access_checks(options: Options) -> list[AccessCheck]:
    """One :class:`AccessCheck` per verb of every rule, per watched namespace (or all namespaces) and
    per resource name, for ``pdd run`` to verify before it starts."""
    out = []
    for r in rules(options):
        if r.scope == "watched":
            namespaces: Sequence[str] = options.watch_namespaces or ("",)
        elif r.scope == "operator-namespace":
            namespaces = (options.namespace,)
        else:
            namespaces = ("",)
        for ns in namespaces:
            for resource in r.resources:
                for verb in r.verbs:
                    for name in r.resource_names or ("",):
                        out.append(AccessCheck(r.api_group, resource, verb, ns, name, why=r.why))
    return out


def missing_message(missing: Sequence[AccessCheck], service_account_hint: str = "") -> str:
    """The startup error for permissions the apiserver denied: one line each, and the fix."""
    lines = [f"  - {c.describe()}: {c.why}" for c in missing]
    who = f" ({service_account_hint})" if service_account_hint else ""
    return (f"the operator's identity{who} lacks {len(missing)} permission(s) it needs:\n" + "\n".join(lines)
            + "\nFix: grant the roles that `pdd rbac` prints for the same options (the Helm chart does), "
              "or run with an identity that has them.")


# --- docs -------------------------------------------------------------------------------------------

_SCOPE_TEXT = {
    "watched": "each watched namespace (ClusterRole when all are watched)",
    "cluster": "cluster (ClusterRole)",
    "operator-namespace": "the operator's namespace (Role)",
}


def markdown() -> str:
    """``docs/rbac.md``: the rules, why each is needed, and how the chart grants them."""
    opts = Options(webhook_configuration="<webhook configuration>", webhook_configuration_mode="ca-bundle",
                   webhook_secret="<webhook secret>", leader_election_lease="<lease>")
    apply_rule = next(r for r in rules(Options(webhook_configuration="pdd-operator.dev")) if r.scope == "cluster")
    rows = []
    for r in rules(opts):
        group = r.api_group or "core"
        names = ", ".join(f"`{n}`" for n in r.resource_names) or "all"
        rows.append(f"| {group} | {', '.join(f'`{x}`' for x in r.resources)} | {', '.join(r.verbs)} | {names} "
                    f"| {_SCOPE_TEXT[r.scope]} | {r.why} |")
    return "\n".join([
        "# The operator's RBAC",
        "",
        "<!-- Generated by `pdd rbac --markdown` from operator/pdd_operator/controller/rbac.py; a unit test "
        "fails when this file drifts. -->",
        "",
        "Exactly what pdd-operator calls, nothing more: no wildcards, no `delete` (children go by garbage "
        "collection), no write to PDDeployments other than their status, no Secret but the webhook's own, "
        "no CustomResourceDefinitions or Namespaces (kopf's scanning is off), no Event but the operator's own "
        "(create only; kopf's posting is off).",
        "",
        "| API group | resources | verbs | names | granted in | why |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        f"Run outside the chart (`pdd run --webhook-port ...`), the operator writes the whole webhook "
        f"configuration itself and needs {', '.join(apply_rule.verbs)} on it instead.",
        "",
        "## Print the objects",
        "",
        "```sh",
        "pdd rbac --namespace pdd-system                       # all namespaces: one ClusterRole",
        "pdd rbac --namespace pdd-system -w team-a -w team-b   # a Role in each, a ClusterRole only for the webhook",
        "```",
        "",
        "The Helm chart grants the same rules (`charts/pdd-operator/files/rbac-rules.yaml`, generated by "
        "`pdd rbac --chart-rules`); `watchNamespaces` in its values selects the namespaced form.",
        "",
        "## Checked at startup",
        "",
        "`pdd run` asks the apiserver (SelfSubjectAccessReview) for every verb above, for the options it runs "
        "with, before it starts. A missing one stops it with exit code 2 and a message naming each missing "
        "permission, instead of a 403 logged on every retry.",
        "",
    ])
