"""The P/D router: one OpenAI-compatible endpoint in front of a PDDeployment's prefill and decode pods.

- :mod:`.endpoints`: endpoints, the registry that pairs them by compat hash, load-aware choice;
- :mod:`.discovery`: static endpoint lists and Kubernetes discovery (watch of the engine pods);
- :mod:`.proxy`: the aiohttp server, the pull and push request protocols (vllm-nixl-facts.md section 6).
"""
