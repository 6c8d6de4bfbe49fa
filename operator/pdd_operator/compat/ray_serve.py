"""Ray Serve LLM prefill/decode applications in a Serve config or a KubeRay RayService.

A Ray Serve config (``serve run`` / ``serve deploy``: Ray's ServeDeploySchema, ``applications`` each naming an
``import_path`` and its ``args``) or the same config as a RayService's ``spec.serveConfigV2`` (a YAML string) holds no
engine command: Ray Serve LLM builds the vLLM engines from the LLMConfigs in ``args`` when it deploys them. Its
prefill/decode builders take the two LLMConfigs as the args ``prefill_config`` and ``decode_config`` (Ray's
``PDServingArgs``: python/ray/llm/_internal/serve/serving_patterns/prefill_decode/builder.py, fields
``prefill_config: Union[str, dict, LLMConfig]`` and ``decode_config``; the same keys in the first implementation,
python/ray/llm/_internal/serve/deployments/prefill_decode_disagg/prefill_decode_disagg.py ``build_app``), so an
application with both keys is a P/D deployment even where its file names no KV connector:

- the first builder added ``KVTransferConfig(kv_connector="NixlConnector", kv_role="kv_both")`` to every prefill and
  decode LLMConfig whose ``engine_kwargs`` had no ``kv_transfer_config`` (Ray's release test
  ``serve_llama_3dot1_8b_quantized_tp1_2p1d.yaml`` relies on it);
- the later ``PDServingArgs._validate_kv_transfer_config`` refuses such a config ("kv_transfer_config is required for
  P/D disaggregation");
- an LLMConfig may be given as a file path (``prefill_config: ./configs/model_config/qwen_3_8B_fp8_1replica.yaml``,
  ``LLMConfig.from_file``), whose connector is in that other file.

Custom builders that wrap ``build_pd_openai_app`` (Anyscale's ``builder:pd_builder``) keep the same two keys.

How an LLMConfig becomes a vLLM engine (Ray's ``VLLMEngineConfig``, python/ray/llm/_internal/serve/engines/vllm/
vllm_models.py ``from_llm_config`` and ``get_initialization_kwargs``): every ``engine_kwargs`` key must be a field of
vLLM's ``AsyncEngineArgs`` (or of the frontend's ``FrontendArgs``), else Ray refuses it ("Unknown engine argument"),
so each key is the engine flag ``--<key with dashes>``; the model is ``model_loading_config.model_source`` when it is
a string (a Hub id or path), else ``model_id``; Ray adds ``served_model_name = [model_id]`` and, on GPUs,
``distributed_executor_backend="ray"`` (refusing any other), refuses ``model`` or ``served_model_name`` in
``engine_kwargs``, and turns ``disable_log_requests`` into ``enable_log_requests``. The first builder's release
(deployments/llm/vllm/vllm_models.py, ray-project/ray 017a84f) read the model the same way and passed
``engine_kwargs`` as written; the request-logging keys are left out here either way (:data:`_RAY_HANDLED`). For a NIXL
connector Ray's ``NixlConnectorBackend`` (engines/vllm/kv_transfer/nixl.py ``setup``) sets
``VLLM_NIXL_SIDE_CHANNEL_HOST`` to the replica's own IP and ``VLLM_NIXL_SIDE_CHANNEL_PORT`` to a free port plus a
per-replica offset where they are not set, and gives each replica its own ``engine_id``. :func:`ray_serve_scan` reads
each P/D application's two LLMConfigs so, as the ``vllm serve`` commands of two synthetic Deployments (one per role,
the RayService's Ray image as their image), and hands them to the manifest reader, so the rules judge the pair as any
other; what the file does not hold (an LLMConfig given as a file path, a model given as a cloud mirror, a builder that
adds no connector) stays "not checked".

Which vLLM the engines run is the Ray image's (``rayproject/ray-llm:<ray release>-<python>-<cuda>``): its tag is read
through the table of images that wrap vLLM (:func:`~pdd_operator.vllm.versions.wrapped_vllm_version`), which holds
every Ray release with the P/D builder (2.47.0 on) as its setup.py ``llm`` extra requires vLLM: exactly
(``vllm[audio]==X``, Ray 2.56.0 on) or as a floor (``vllm>=X``, before), a floor naming the image's vLLM only where
another public source states it (2.50.0, 2.51.0). A Serve config names no image; a floor-only release, a tag the table
does not list (``nightly``, ``latest``) or a plain ``rayproject/ray`` image names no vLLM, and the unknown-version
warning says which (:func:`~pdd_operator.vllm.versions.unknown_tag_note`): the rules then judge the pair as for any
unknown release.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import yaml

from pdd_operator.vllm.args import engine_arg_words
from pdd_operator.vllm.versions import RAY_LLM_REQUIREMENT, ray_llm_vllm

#: The args of a Ray Serve LLM P/D application that hold its prefill and decode LLMConfigs (``PDServingArgs``).
PD_ARGS = ("prefill_config", "decode_config")


def serve_applications(doc: Any) -> list[dict]:
    """The Serve applications of ``doc``: its ``applications`` (a Serve config), or those of a RayService's
    ``spec.serveConfigV2`` (a YAML string, parsed; one that does not parse holds none). Each is a mapping with an
    ``import_path``; anything else is left out. Pure."""
    if not isinstance(doc, dict):
        return []
    apps = doc.get("applications")
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    if apps is None and isinstance(spec.get("serveConfigV2"), str):
        try:
            config = yaml.safe_load(spec["serveConfigV2"])
        except yaml.YAMLError:
            return []
        apps = config.get("applications") if isinstance(config, dict) else None
    return [a for a in apps if isinstance(a, dict) and "import_path" in a] if isinstance(apps, list) else []


def pd_applications(doc: Any) -> list[str]:
    """The names (``import_path`` where unnamed) of the Serve applications in ``doc`` (a Serve config or a
    RayService, :func:`serve_applications`) whose ``args`` hold both :data:`PD_ARGS`: Ray Serve LLM P/D
    deployments, whether or not their LLMConfigs name a KV connector. Pure."""
    return [str(a.get("name") or a["import_path"]) for a in serve_applications(doc)
            if isinstance(a.get("args"), dict) and all(k in a["args"] for k in PD_ARGS)]


def connectorless_note(doc: Any, marked: bool) -> str:
    """The clause a "not checked" reason adds for a Ray Serve P/D application whose file names no KV connector
    (``marked`` false: no ``kv_transfer_config``, ``kv_connector`` or ``kv_role`` anywhere in it), else ``""``: what
    Ray does with such a config (see the module docstring). Pure."""
    apps = pd_applications(doc)
    if marked or not apps:
        return ""
    return (f"; its P/D application {', '.join(apps)} names no KV connector in this file: Ray's first P/D builder "
            "(prefill_decode_disagg.build_app) gives each LLMConfig NixlConnector kv_both itself, the later "
            "PDServingArgs refuses to build without a kv_transfer_config, and an LLMConfig given as a file path "
            "holds its own")


#: The import path of Ray's first P/D builder, which gives a prefill or decode LLMConfig without
#: ``kv_transfer_config`` the connector ``KVTransferConfig(kv_connector="NixlConnector", kv_role="kv_both")``
#: (prefill_decode_disagg.py ``build_app``); the later builders refuse such a config or leave it to a custom builder.
FIRST_PD_BUILDER = "ray.llm._internal.serve.deployments.prefill_decode_disagg.prefill_decode_disagg:build_app"
#: The connector :data:`FIRST_PD_BUILDER` adds (its ``engine_id`` is a fresh uuid per LLMConfig, left out here).
FIRST_BUILDER_CONNECTOR = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
#: The workload kind (:attr:`~pdd_operator.compat.pair.RoleConfig.workload_kind`) of engines read from a Serve config.
RAY_SERVE_KIND = "Ray Serve LLMConfig"
#: ``engine_kwargs`` keys Ray handles itself rather than passing as written: the request-logging switch (Ray turns
#: ``disable_log_requests`` into ``enable_log_requests`` and sets it false by default, vllm_models.py
#: ``get_initialization_kwargs``; the first builder's Ray passed it to the vLLM of its time, whose parser still had it).
_RAY_HANDLED = frozenset({"disable_log_requests", "enable_log_requests"})


def _replicas(config: dict) -> int | None:
    """Replicas of one LLMConfig's deployment: ``deployment_config.num_replicas``, else
    ``autoscaling_config.min_replicas`` (Serve starts that many; 1 when not given), ``None`` when not an integer."""
    deployment = config.get("deployment_config") if isinstance(config.get("deployment_config"), dict) else {}
    autoscaling = deployment.get("autoscaling_config")
    value = deployment.get("num_replicas", (autoscaling or {}).get("min_replicas", 1) if isinstance(
        autoscaling, dict) else 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ray_image(doc: dict) -> str:
    """The Ray image a RayService's cluster runs the replicas on: the one image of its worker groups' first containers
    (the head's where it has no worker group), ``""`` for a Serve config or groups of different images."""
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    cluster = spec.get("rayClusterConfig") if isinstance(spec.get("rayClusterConfig"), dict) else {}
    groups = [g for g in cluster.get("workerGroupSpecs") or [] if isinstance(g, dict)] or [
        cluster.get("headGroupSpec") or {}]
    images = set()
    for group in groups:
        containers = (((group.get("template") or {}).get("spec") or {}).get("containers") or [{}]) if isinstance(
            group, dict) else [{}]
        images.add(str((containers[0] or {}).get("image") or "") if isinstance(containers[0], dict) else "")
    return images.pop() if len(images) == 1 else ""


#: A ``vllm`` requirement in a runtime_env's ``pip``/``uv`` list: ``vllm==0.11.2`` (extras allowed) pins a release.
_VLLM_REQUIREMENT = re.compile(r"^\s*vllm(?:\[[^\]]*\])?\s*(?:==\s*v?(\d+\.\d+\.\d+(?:\.\d+)?)\s*)?(?:$|[<>=!~;,\s])", re.I)


def _runtime_image(runtime_envs: list[Any], image: str) -> str:
    """The image whose vLLM the engine runs, given the runtime_envs that apply to it (the LLMConfig's, then the
    application's): a ``vllm==X`` requirement in the first that installs vLLM (``pip`` or ``uv``: a list, or a mapping
    with ``packages``) replaces the Ray image's vLLM in the replica's environment (Ray's runtime_env installs it into a
    virtualenv of its own), read as vLLM X's image; a ``vllm`` requirement without an exact pin leaves the release
    unknown (``""``); a ``ray[llm]==R`` requirement installs Ray R's llm extra, whose vLLM is known where that extra
    pins it exactly (:func:`~pdd_operator.vllm.versions.ray_llm_vllm`), else unknown; none keeps ``image``."""
    for env in runtime_envs:
        if not isinstance(env, dict):
            continue
        for key in ("pip", "uv"):
            spec = env.get(key)
            packages = spec.get("packages") if isinstance(spec, dict) else spec
            for req in packages if isinstance(packages, list) else []:
                m = _VLLM_REQUIREMENT.match(str(req))
                if m:
                    return f"vllm/vllm-openai:v{m.group(1)}" if m.group(1) else ""
                ray = RAY_LLM_REQUIREMENT.match(str(req).strip())
                if ray:  # ray[llm]==R: the vLLM its llm extra pins exactly, else unknown (a floor lets pip choose)
                    pinned = ray_llm_vllm(ray.group(1))
                    return f"vllm/vllm-openai:v{pinned[0]}" if pinned else ""
    return image


def _role_container(config: Any, import_path: str, image: str) -> dict | str:
    """The ``vllm serve`` container Ray Serve LLM starts for one LLMConfig (module docstring), or why it cannot be
    read from the file."""
    if not isinstance(config, dict):
        return (f"the LLMConfig is {config!r}, a file that LLMConfig.from_file reads when the application deploys: its "
                "engine_kwargs are not in this file")
    loading = config.get("model_loading_config") if isinstance(config.get("model_loading_config"), dict) else {}
    source = loading.get("model_source")
    model = source if isinstance(source, str) else loading.get("model_id") if source is None else None
    if not isinstance(model, str):
        return "its model_loading_config.model_source is a cloud mirror (or no model is named): the model is not in this file"
    kwargs = config.get("engine_kwargs") if isinstance(config.get("engine_kwargs"), dict) else {}
    if "kv_transfer_config" not in kwargs:
        if import_path != FIRST_PD_BUILDER:
            return "its engine_kwargs name no kv_transfer_config"
        kwargs = {**kwargs, "kv_transfer_config": dict(FIRST_BUILDER_CONNECTOR)}
    transfer = kwargs.get("kv_transfer_config")
    if isinstance(transfer, dict) and transfer.get("kv_connector") == "NixlConnector" and "engine_id" in transfer:
        # NixlConnectorBackend.setup suffixes the written engine_id per replica: no two replicas share it
        kwargs = {**kwargs, "kv_transfer_config": {k: v for k, v in transfer.items() if k != "engine_id"}}
    argv = ["vllm", "serve", model]
    for key, value in kwargs.items():
        if key not in _RAY_HANDLED:
            argv += engine_arg_words(str(key), value)
    if "distributed_executor_backend" not in kwargs:
        argv += ["--distributed-executor-backend", "ray"]  # Ray's default on GPUs (the only backend it allows there)
    if isinstance(loading.get("model_id"), str):
        argv += ["--served-model-name", loading["model_id"]]
    runtime = config.get("runtime_env") if isinstance(config.get("runtime_env"), dict) else {}
    env = {str(k): str(v) for k, v in (runtime.get("env_vars") or {}).items()} if isinstance(
        runtime.get("env_vars"), dict) else {}
    from pdd_operator.vllm.args import POD_IP

    env.setdefault("VLLM_NIXL_SIDE_CHANNEL_HOST", POD_IP)  # NixlConnectorBackend.setup: the replica's own IP
    return {"name": "vllm", "image": image, "command": argv[:2], "args": argv[2:],
            "env": [{"name": k, "value": v} for k, v in env.items()]}


def ray_serve_scan(doc: Any):
    """``(engines, unreadable)`` of the Ray Serve LLM P/D applications in ``doc`` (a Serve config or a RayService,
    :func:`pd_applications`), as :func:`~pdd_operator.compat.manifests.scan` returns them, or ``None`` where ``doc``
    holds none. Each application whose two LLMConfigs are in the file becomes two engines (module docstring), each
    named by its key (``Ray Serve config application pd-app args.decode_config``) and both of one object, so they
    pair with each other only; an application whose LLMConfig is not (a file path, a cloud mirror, no connector under
    a builder that adds none) is one "not checked" record."""
    from pdd_operator.compat.manifests import Unreadable, scan

    names = pd_applications(doc)
    if not names:
        return None
    kind = doc.get("kind")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    origin = f"{kind}/{meta.get('name', '?')}" if kind else "Ray Serve config"
    image = _ray_image(doc) if kind else ""
    engines, unreadable = [], []
    for app in serve_applications(doc):
        args = app.get("args") if isinstance(app.get("args"), dict) else {}
        if not all(k in args for k in PD_ARGS):
            continue
        name = str(app.get("name") or app["import_path"])
        import_path = str(app["import_path"])
        built = {role: _role_container(args[f"{role}_config"], import_path, _runtime_image(
            [(args[f"{role}_config"] or {}).get("runtime_env") if isinstance(args[f"{role}_config"], dict) else None,
             app.get("runtime_env")], image)) for role in ("prefill", "decode")}
        why = [f"{role}_config: {c}" for role, c in built.items() if isinstance(c, str)]
        if why:
            marked = "kv_transfer_config" in repr(args)
            unreadable.append(Unreadable(f"{origin} application {name}", (
                f"not checked, because Ray Serve LLM builds the vLLM engines from these LLMConfigs and {'; '.join(why)}"
                f"{connectorless_note({'applications': [app]}, marked)}")))
            continue
        for role, container in built.items():
            replicas = _replicas(args[f"{role}_config"])
            pod = {"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": f"{name}-{role}", "labels": {"ray.io/serve-role": role}},
                   "spec": {"replicas": replicas, "template": {
                       "metadata": {"labels": {"ray.io/serve-role": role}}, "spec": {"containers": [container]}}}}
            found, missed = scan(pod)
            key = f"applications[{name}].args.{role}_config"
            for e in found:
                # each replica is its own Ray actor (its own side-channel port, no vLLM HTTP server): one synthetic
                # pod per application and role, whose identity must not be the id() of a pod freed after this loop
                engines.append(replace(e, where=f"{origin} {key}", container=key, doc_id=id(doc),
                                       pod_id=hash(("ray-serve", id(doc), name, role)),
                                       role=role, role_from="type", stem="", group=(),
                                       config=replace(e.config, workload_kind=RAY_SERVE_KIND, replicas=replicas)))
            unreadable += [replace(u, where=f"{origin} {key}") for u in missed]
    return engines, unreadable


#: A hand-written manifest's wording of a fix or message -> the words of a Ray Serve LLMConfig, longest first: the
#: engine's flags are its ``engine_kwargs``, its environment the LLMConfig's ``runtime_env.env_vars``, its vLLM the Ray
#: image's (:func:`ray_serve_scan`).
RAY_TERMS: tuple[tuple[str, str], ...] = (
    ("an image tag that names the vLLM release (vllm/vllm-openai:v0.20.2) on both containers",
     "a Ray image whose release names its vLLM (rayproject/ray-llm:2.51.0-py311-cu128 ships vLLM 0.11.0) in the "
     "RayService's rayClusterConfig"),
    ("on the prefill and decode containers", "in the prefill_config and decode_config engine_kwargs"),
    ("the prefill container's", "prefill_config's"),
    ("the decode container's", "decode_config's"),
    ("on the prefill container", "in prefill_config.engine_kwargs"),
    ("on the decode container", "in decode_config.engine_kwargs"),
    ("in each container's env", "in each LLMConfig's runtime_env.env_vars"),
    ("on both containers", "in both LLMConfigs' engine_kwargs"),
)
#: ``pdd check``'s own options, which a fix may name and which are no engine_kwargs.
_PDD_OPTIONS = ("--vllm-version", "--model-config", "--allow-unchecked", "--allow-empty")
_FLAG = re.compile(r"(?<![\w-])--(no-)?([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


def in_ray_terms(text: str) -> str:
    """``text`` (a fix or message in a hand-written manifest's terms) in the terms of a Ray Serve LLMConfig:
    :data:`RAY_TERMS`, and each vLLM flag as the ``engine_kwargs`` key Ray passes it as (``--kv-cache-dtype`` ->
    ``kv_cache_dtype``, ``--no-enable-prefix-caching`` -> ``enable_prefix_caching: false``); ``pdd check``'s own
    options stay."""
    for manifest, ray in RAY_TERMS:
        text = text.replace(manifest, ray)

    def key(m: re.Match) -> str:
        if m.group(0) in _PDD_OPTIONS or any(o.startswith(m.group(0)) and m.end() < len(text) and
                                             text[m.end()] == "-" for o in _PDD_OPTIONS):
            return m.group(0)
        name = m.group(2).replace("-", "_")
        return f"{name}: false" if m.group(1) else name

    return _FLAG.sub(key, text)


def ray_fields(fields: list[str], containers: tuple[tuple[str, str], ...]) -> list[str]:
    """``fields`` (paths of a manifest, :func:`~pdd_operator.compat.rules.base.manifest_fields`) for engines read from
    LLMConfigs (:func:`ray_serve_scan`, whose "container" is ``applications[<app>].args.<role>_config``): the
    container's flags as its ``engine_kwargs``, ``env[NAME]`` as ``runtime_env.env_vars.NAME``, its image as the Ray
    cluster's image; the rest as written. Order kept, duplicates dropped."""
    out: list[str] = []
    for field in fields:
        where = next((c for c, _ in containers if field.startswith(c + ".")), None)
        rest = field[len(where) + 1:] if where is not None else ""
        name = re.fullmatch(r"env\[(.+)\]", rest)
        text = (f"{where}.runtime_env.env_vars.{name.group(1)}" if name and where else
                f"{where}.engine_kwargs" if where and rest in ("args", "command") else
                "rayClusterConfig (the Ray image)" if where and rest == "image" else field)
        if text not in out:
            out.append(text)
    return out
