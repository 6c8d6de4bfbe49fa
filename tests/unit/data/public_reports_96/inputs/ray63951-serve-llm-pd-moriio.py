# ray-project/ray PR #63951 ("[serve.llm] Add MoRIIO KV-connector backend for prefill/decode", merged 2026-06-12): the
# worked example the author added to build_pd_openai_app's docstring. Selecting MoRIIO is a per-engine
# kv_transfer_config change (prefill kv_producer, decode kv_consumer); Ray Serve's MoRIIOConnectorBackend fills the
# MoRIIO ports, peer binding and handshake. Filled: the model id, TP size and replica counts.
from ray import serve
from ray.serve.llm import LLMConfig, build_pd_openai_app


def _config(role: str) -> LLMConfig:
    return LLMConfig(
        model_loading_config=dict(model_id="qwen", model_source="Qwen/Qwen3-8B"),
        deployment_config=dict(autoscaling_config=dict(min_replicas=1, max_replicas=1)),
        engine_kwargs=dict(
            tensor_parallel_size=1,
            kv_transfer_config=dict(
                kv_connector="MoRIIOConnector",
                kv_role="kv_producer" if role == "prefill" else "kv_consumer",
            ),
        ),
    )


app = build_pd_openai_app({"prefill_config": _config("prefill"), "decode_config": _config("decode")})
serve.run(app)
