"""Ids users see that no check function reports: the admission webhook's, the controller's and the
engine's version warnings. They are registered here so ``pdd rules`` and docs/rules.md list them; the
code that reports each one imports its constant from here (or, in the controller, names it literally
and a unit test keeps the two equal)."""

from __future__ import annotations

from pdd_operator.api.messages import SPEC_INVALID_RULE
from pdd_operator.compat.rules.base import record
from pdd_operator.render.admission import ADMISSION_RULES
from pdd_operator.render.admission import SOURCE as ADMISSION_SOURCE

INVALID_RULE = record(
    id=SPEC_INVALID_RULE, family="api", severity="error",
    summary="The spec is accepted by the PDDeployment API models (every bad field is named).",
    fields=("spec",), source="PDDeployment API (operator/pdd_operator/api/spec.py)",
    reported_by="controller/webhook.py (admission), controller/reconcile.py (status)",
)
MODEL_CONFIG_UNAVAILABLE = record(
    id="model-config-unavailable", family="api", severity="warning",
    summary="The ConfigMap named by spec.model.configMapRef holds the model's config.json.",
    fields=("spec.model.configMapRef",), source="PDDeployment API (spec.model.configMapRef)",
    reported_by="compat/engine.py model_config_unavailable (pdd check; the operator's load_model_config)",
)
ROLLOUT_RULE = record(
    id="rollout-incompatible-change", family="rollout", severity="warning",
    summary=("A change of a must-match setting replaces every pod of both roles (a coordinated rollout: both "
             "revisions run side by side until the new one is Ready)."),
    fields=("spec",), source="vllm/must_match.py MUST_MATCH (the compat hash)",
    reported_by="controller/webhook.py (admission warning on UPDATE)",
)
VERSION_UNKNOWN = record(
    id="vllm-version-unknown", family="version", severity="warning",
    summary=("The vLLM version is known (spec.engine.vllmVersion or the image tag); else the version-bounded "
             "rules are judged on every release: an error where all refuse it, not checked where some do."),
    fields=("spec.engine.vllmVersion", "spec.engine.image"), source="vllm-nixl-facts.md section 7 (version timeline)",
    reported_by="compat/engine.py evaluate",
)
VERSION_UNVERIFIED = record(
    id="vllm-version-unverified", family="version", severity="warning",
    summary=("The vLLM version is a release the rules were built from (0.9.0 to 0.34.0); another (0.35.0, an "
             "unreleased 0.34.1) is judged with the rules of the releases around it, the newest for a later one."),
    fields=("spec.engine.vllmVersion", "spec.engine.image"), source="vllm-nixl-facts.md section 0",
    reported_by="compat/engine.py evaluate",
)
#: Where ``env-from-not-in-files`` comes from.
ENV_FROM_SOURCE = "Kubernetes core/v1 EnvFromSource; vllm/envs.py (variables read at startup)"
ENV_FROM_UNSEEN = record(
    id="env-from-not-in-files", family="version", severity="warning",
    summary=("Every variable the rules read has its value in the files: an envFrom ConfigMap or Secret that is not "
             "among them may set any variable (an error stands only where it holds with and without them)."),
    fields=("env", "envFrom"), source=ENV_FROM_SOURCE,
    reported_by="compat/engine.py evaluate",
)

#: Where ``dynamo-prefill-role-missing`` comes from.
DYNAMO_ROLE_SOURCE = ("ai-dynamo/dynamo components/src/dynamo/vllm/args.py: the worker registers as the 'prefill' "
                      "component only with --is-prefill-worker / --disaggregation-mode prefill, else as 'backend' "
                      "(decode/aggregated; the older base_parse_args layout's default endpoint dyn://<ns>.backend.generate;"
                      " 1.4.0 wheel args.py lines 175-184); deploy/operator/internal/dynamo/backend_vllm.go "
                      "VLLMBackend.UpdateContainer writes no role flag from a subComponentType or type; "
                      "ai-dynamo/dynamo#13238 (a DGDR's typed VllmPrefillWorker without the flag ran as backend)")
DYNAMO_PREFILL_ROLE_MISSING = record(
    id="dynamo-prefill-role-missing", family="connector", severity="warning",
    summary=("A DynamoGraphDeployment that names or types a prefill worker runs one: some dynamo.vllm worker passes "
             "--is-prefill-worker (or --disaggregation-mode prefill); without, every worker serves aggregated."),
    fields=("spec.prefill.extraArgs",), source=DYNAMO_ROLE_SOURCE,
    reported_by="compat/dynamo_roles.py flagless_dynamo_graph (pdd check)",
)

#: Where ``manifest-field-type-invalid`` comes from.
FIELD_TYPE_SOURCE = ("Kubernetes core/v1 Container, EnvVar, PodSpec and meta/v1 ObjectMeta (k8s.io/api: args []string, "
                     "EnvVar.Value string, NodeSelector, Labels and Annotations map[string]string); the apiserver's "
                     "JSON decoder refuses another type ('cannot unmarshal bool into Go struct field ... of type string')")
MANIFEST_FIELD_TYPE_INVALID = record(
    id="manifest-field-type-invalid", family="kubernetes-objects", severity="error",
    summary=("Each field of a Kubernetes object that the checker reads has the type of the Kubernetes API: strings "
             "in labels, annotations, nodeSelector, env values and args items (quoted where YAML would read a "
             "boolean or a number), lists for args and env, mappings for labels; else the apiserver refuses the "
             "object. A boolean or number where a string is wanted is judged as if quoted; any other is not checked."),
    fields=("metadata.labels", "metadata.annotations", "nodeSelector", "env", "args", "command"),
    source=FIELD_TYPE_SOURCE,
    reported_by="compat/shapes.py field_type_finding (pdd check)",
)

#: What the apiserver would refuse in the rendered children (render/admission.py), reported by the
#: webhook, ``pdd check`` and the operator's status.
for _id, _summary in ADMISSION_RULES.items():
    record(id=_id, family="kubernetes-objects", severity="error", summary=_summary, fields=("spec",),
           source=ADMISSION_SOURCE, reported_by="render/admission.py (webhook, pdd check, reconcile)")
