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
"""

from __future__ import annotations

from typing import Any

import yaml

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
