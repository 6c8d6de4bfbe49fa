"""The Helm chart charts/pdd-operator, rendered by the real helm (built by scripts/install-helm.sh into
~/.cache/pdd-operator/bin on first use): lint, strict values, the generated files, RBAC equal to the
operator's own definition, and the Deployment's hardening. tests/e2e/test_chart.py installs it."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from pdd_operator.controller import chart, rbac, webhook
from tests.helpers import ROOT

CHART = ROOT / "charts" / "pdd-operator"
KUBE_VERSION = "1.37.2"  # without it, helm template assumes v1.20.0


#: The chart supports Helm 3 and Helm 4 (which installs with server-side apply): every test runs with both.
HELM_VERSIONS = ("v3.22.0", "v4.3.1")


@pytest.fixture(scope="session", params=HELM_VERSIONS)
def helm(request) -> str:
    """Path of helm ``request.param``, built by scripts/install-helm.sh on first use (minutes, cached)."""
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "install-helm.sh")], capture_output=True, text=True,
                          env={**os.environ, "HELM_VERSION": request.param}, timeout=3600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def template(helm: str, *sets: str, namespace: str = "ops", check: bool = True, values: dict | None = None,
             tmp_path=None) -> list[dict] | subprocess.CompletedProcess:
    args = [helm, "template", "pdd-operator", str(CHART), "--namespace", namespace, "--kube-version", KUBE_VERSION]
    for s in sets:
        args += ["--set", s]
    if values is not None:
        path = tmp_path / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        args += ["-f", str(path)]
    proc = subprocess.run(args, capture_output=True, text=True)
    if not check:
        return proc
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def find(docs: list[dict], kind: str, name: str | None = None) -> list[dict]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def test_generated_files_are_current():
    for rel, text in chart.chart_files().items():
        assert (CHART / rel).read_text() == text, f"charts/pdd-operator/{rel} drifted: run `pdd chart-files`"


def test_helm_lint_is_clean(helm):
    proc = subprocess.run([helm, "lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_crd_is_kept_on_uninstall_and_optional(helm):
    docs = template(helm)
    (crd,) = find(docs, "CustomResourceDefinition")
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert crd["spec"] == yaml.safe_load((ROOT / "crds" / "pddeployment.yaml").read_text())["spec"]
    assert not find(template(helm, "crds.install=false"), "CustomResourceDefinition")


def rbac_docs(docs):
    return [{k: d[k] for k in d if k != "metadata"} | {"metadata": {k: v for k, v in d["metadata"].items() if k != "labels"}}
            for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")]


@pytest.mark.parametrize("sets, options", [
    ((), rbac.Options(namespace="ops", webhook_configuration="pdd-operator.pdd-operator.dev",
                      webhook_configuration_mode="ca-bundle", webhook_secret="pdd-operator-webhook-certs",
                      leader_election_lease="pdd-operator")),
    (("watchNamespaces={team-a,ops}",),
     rbac.Options(namespace="ops", watch_namespaces=("team-a", "ops"), webhook_configuration="pdd-operator.pdd-operator.dev",
                  webhook_configuration_mode="ca-bundle", webhook_secret="pdd-operator-webhook-certs",
                  leader_election_lease="pdd-operator")),
    (("watchNamespaces={team-a}", "webhook.enabled=false"),
     rbac.Options(namespace="ops", watch_namespaces=("team-a",), leader_election_lease="pdd-operator")),
    (("webhook.certManager.enabled=true", "leaderElection.enabled=false"), rbac.Options(namespace="ops")),
])
def test_chart_rbac_is_the_operators_definition(helm, sets, options):
    docs = template(helm, *sets)
    want = rbac.manifests(options, name="pdd-operator", service_account="pdd-operator")
    def key(d):  # helm orders objects by kind
        return d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]

    assert sorted(rbac_docs(docs), key=key) == sorted(want, key=key)


def test_namespaced_install_has_no_cluster_role_for_pddeployments(helm):
    docs = template(helm, "watchNamespaces={team-a,team-b}")
    for role in find(docs, "ClusterRole"):
        assert all(r["resources"] == ["validatingwebhookconfigurations"] for r in role["rules"])
    assert {r["metadata"]["namespace"] for r in find(docs, "Role")} == {"team-a", "team-b", "ops"}
    (dep,) = find(docs, "Deployment")
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args and "--namespace=team-b" in args


def test_deployment_is_hardened_and_probed(helm):
    (dep,) = find(template(helm), "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"] and sc["capabilities"]["drop"] == ["ALL"]
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz" and c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert "--liveness=http://0.0.0.0:8080/healthz" in c["args"] and ports["healthz"] == 8080
    assert "--readiness-port=8081" in c["args"] and ports["readyz"] == 8081
    assert "--webhook-configuration-mode=ca-bundle" in c["args"]
    assert "--webhook-host=pdd-operator-webhook.ops.svc" in c["args"]
    assert {v["mountPath"] for v in c["volumeMounts"]} == {"/tmp"}
    assert c["image"] == "ghcr.io/pdd-operator/pdd-operator:v0.1.0"


def test_the_operators_flags_exist(helm):
    """Every flag the chart passes to `pdd run` is one the command line accepts."""
    from pdd_operator.cli import build_parser

    for sets in [(), ("webhook.certManager.enabled=true", "watchNamespaces={a}", "extraArgs={--verbose}",
                      "leaderElection.enabled=false")]:
        (dep,) = find(template(helm, *sets), "Deployment")
        args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
        build_parser().parse_args(args)


def test_webhook_configuration_is_the_operators_with_the_charts_service(helm):
    docs = template(helm)
    (conf,) = find(docs, "ValidatingWebhookConfiguration")
    want = webhook.webhook_configuration({"service": {"name": "pdd-operator-webhook", "namespace": "ops", "port": 443,
                                                      "path": "/validate-pddeployment"}}, b"",
                                         name="pdd-operator.pdd-operator.dev")
    del want["webhooks"][0]["clientConfig"]["caBundle"]  # the operator patches it in
    assert conf["metadata"]["name"] == want["metadata"]["name"] and conf["webhooks"] == want["webhooks"]
    (svc,) = find(docs, "Service", "pdd-operator-webhook")
    assert svc["spec"]["ports"][0]["port"] == 443 and svc["spec"]["ports"][0]["targetPort"] == "webhook"
    url = find(template(helm, "webhook.url=https://127.0.0.1:9443/validate-pddeployment"),
               "ValidatingWebhookConfiguration")[0]
    assert url["webhooks"][0]["clientConfig"] == {"url": "https://127.0.0.1:9443/validate-pddeployment"}


def test_cert_manager_mode(helm):
    docs = template(helm, "webhook.certManager.enabled=true")
    (conf,) = find(docs, "ValidatingWebhookConfiguration")
    assert conf["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "ops/pdd-operator-webhook-certs"
    (cert,) = find(docs, "Certificate", "pdd-operator-webhook-certs")
    assert cert["spec"]["dnsNames"] == ["pdd-operator-webhook.ops.svc"]
    assert not find(docs, "Secret")
    (dep,) = find(docs, "Deployment")
    assert "--webhook-configuration-mode=none" in dep["spec"]["template"]["spec"]["containers"][0]["args"]


def test_no_webhook_no_webhook_objects(helm):
    docs = template(helm, "webhook.enabled=false")
    assert not find(docs, "ValidatingWebhookConfiguration") and not find(docs, "Secret")
    (dep,) = find(docs, "Deployment")
    assert not any(a.startswith("--webhook") for a in dep["spec"]["template"]["spec"]["containers"][0]["args"])


def test_leader_election_lease_and_identity(helm):
    (dep,) = find(template(helm, "replicaCount=2"), "Deployment")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert "--leader-election-lease=pdd-operator" in c["args"]
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in c["env"]
    (dep,) = find(template(helm, "leaderElection.enabled=false"), "Deployment")
    assert not any(a.startswith("--leader-election") for a in dep["spec"]["template"]["spec"]["containers"][0]["args"])


def test_pdb_only_with_more_than_one_replica(helm):
    assert not find(template(helm), "PodDisruptionBudget")
    (pdb,) = find(template(helm, "replicaCount=2"), "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1


def test_service_monitor_is_optional(helm):
    assert not find(template(helm), "ServiceMonitor")
    (sm,) = find(template(helm, "metrics.serviceMonitor.enabled=true"), "ServiceMonitor")
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"


def test_global_registry_and_pull_secrets(helm):
    (dep,) = find(template(helm, "global.imageRegistry=mirror.local:5000", "global.imagePullSecrets[0].name=regcred"),
                  "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "mirror.local:5000/pdd-operator/pdd-operator:v0.1.0"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    digest = "sha256:" + "a" * 64
    (dep,) = find(template(helm, f"image.digest={digest}"), "Deployment")
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == f"ghcr.io/pdd-operator/pdd-operator@{digest}"


@pytest.mark.parametrize("values, complaint", [
    ({"replicas": 2}, "replicas"),                      # a typo of replicaCount
    ({"webhook": {"enable": False}}, "enable"),          # a typo of enabled
    ({"replicaCount": "two"}, "replicaCount"),
    ({"webhook": {"failurePolicy": "Never"}}, "failurePolicy"),
    ({"watchNamespaces": ["Team_A"]}, "watchNamespaces"),
    ({"webhook": {"timeoutSeconds": 31}}, "timeoutSeconds"),
])
def test_values_schema_refuses_unknown_keys_and_wrong_types(helm, tmp_path, values, complaint):
    proc = template(helm, check=False, values=values, tmp_path=tmp_path)
    assert proc.returncode != 0 and "values don't meet the specifications of the schema" in proc.stderr, proc.stderr
    assert complaint in proc.stderr


def test_values_schema_allows_a_parent_charts_globals(helm):
    """As a subchart it receives every global of its parent: those must not fail the strict schema."""
    assert find(template(helm, "global.storageClass=fast"), "Deployment")


def test_values_schema_accepts_the_defaults():
    import jsonschema

    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.validate(yaml.safe_load((CHART / "values.yaml").read_text()), schema)


def test_cert_manager_mode_the_operator_writes_no_certificate_and_no_configuration(helm, tmp_path):
    """The container arguments the chart renders in cert-manager mode, parsed by the real ``pdd run``
    parser and run through the operator's webhook setup: the mounted certificates (as cert-manager
    writes them: ca.crt, tls.crt, tls.key) are used as they are, no Secret is synced, the
    ValidatingWebhookConfiguration is never written (cert-manager's CA injector fills ``caBundle``,
    named by the annotation), and the RBAC holds neither Secrets nor webhook configurations."""
    from pdd_operator import cli
    from pdd_operator.controller import tls

    docs = template(helm, "webhook.certManager.enabled=true")
    (dep,) = find(docs, "Deployment")
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0] == "run"
    args = cli.build_parser().parse_args(container["args"])
    assert args.webhook_configuration_mode == "none" and args.webhook_cert_secret is None
    assert args.webhook_cert_dir == "/etc/pdd-operator/webhook-certs"
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == args.webhook_cert_dir)
    assert mount["readOnly"] is True
    (volume,) = [v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
    (cert,) = find(docs, "Certificate", volume["secret"]["secretName"])
    assert cert["spec"]["secretName"] == volume["secret"]["secretName"]
    (conf,) = find(docs, "ValidatingWebhookConfiguration")
    assert conf["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"ops/{cert['metadata']['name']}"
    assert "caBundle" not in conf["webhooks"][0]["clientConfig"]

    # What cert-manager mounts: the operator must use it as it is and write nothing there (compared
    # byte for byte afterwards; the tests run as root, so a read-only mode would prove nothing).
    ca = tls.generate_ca()
    serving = tls.issue_serving_cert(ca, [args.webhook_host])
    mounted = {"ca.crt": ca.cert_pem(), "tls.crt": serving.cert_pem(), "tls.key": serving.key_pem()}
    for name, data in mounted.items():
        (tmp_path / name).write_bytes(data)
    endpoint = webhook.prepare(port=args.webhook_port, host=args.webhook_host, listen="127.0.0.1",
                               cert_dir=tmp_path, configuration=args.webhook_configuration_name,
                               mode=args.webhook_configuration_mode)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == mounted
    assert endpoint.ca_file == tmp_path / "ca.crt"

    class NoWrites:
        def __getattr__(self, name):
            raise AssertionError(f"the operator called {name} in cert-manager mode")

    assert webhook.keep_once(NoWrites(), endpoint) is False
    options = cli.run_options(args)
    assert options.webhook_secret is None
    granted = {(r.api_group, res) for r in rbac.rules(options) for res in r.resources}
    assert ("", "secrets") not in granted
    assert ("admissionregistration.k8s.io", "validatingwebhookconfigurations") not in granted
    roles = find(docs, "ClusterRole") + find(docs, "Role")
    assert not any(res in ("secrets", "validatingwebhookconfigurations")
                   for role in roles for rule in role["rules"] for res in rule["resources"])
