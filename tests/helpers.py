"""Small builders shared by the tests."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from pdd_operator.api.spec import PDDeploymentSpec

ROOT = Path(__file__).resolve().parent.parent
#: The second batch of real-world inputs (../shared beside the checkout, or $PDD_SHARED_DIR).
TURN2_INPUTS = Path(os.environ.get("PDD_SHARED_DIR", ROOT.parent / "shared")) / "cases" / "turn2" / "inputs"
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
#: The team's shared, read-only material (cases/, docs/): ``PDD_SHARED_DIR``, else ``../shared`` beside
#: the checkout, as on every developer machine and in CI.
SHARED_DIR = Path(os.environ.get("PDD_SHARED_DIR") or ROOT.parent / "shared")


def shared_file(relative: str) -> Path:
    """``SHARED_DIR / relative``; fails the calling test (never skips it) when that file is missing,
    naming the path and how to point the tests at the shared material."""
    path = SHARED_DIR / relative
    if not path.is_file():
        pytest.fail(f"{path} is missing: the tests need the shared material ({relative}); put it at "
                    f"../shared beside the checkout or set PDD_SHARED_DIR to the folder that holds {relative}",
                    pytrace=False)
    return path


def load_example(name: str) -> dict:
    """The whole PDDeployment document of ``examples/<name>.yaml``."""
    return yaml.safe_load((ROOT / "examples" / f"{name}.yaml").read_text())


def spec_of(doc: dict) -> PDDeploymentSpec:
    return PDDeploymentSpec.model_validate(doc["spec"])


def merge(base: dict, patch: dict) -> dict:
    """Deep-merge ``patch`` into a copy of ``base`` (dicts merge, everything else replaces)."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def make_spec(**patch) -> PDDeploymentSpec:
    """A dense Llama spec on vLLM 0.20.2 with ``patch`` deep-merged into its spec dict (camelCase)."""
    base = {
        "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "hfArchitecture": "LlamaForCausalLM", "numKvHeads": 8},
        "engine": {"image": "vllm/vllm-openai:v0.20.2"},
        "network": {"rdma": {"resourceName": "rdma/ib", "count": 1}},
    }
    return PDDeploymentSpec.model_validate(merge(base, patch))


#: A compatible NemotronH (hybrid Mamba2) spec on vLLM 0.20.2, TP 2 / 2, block 128 (camelCase dict).
HYBRID = {
    "model": {"name": "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", "hfArchitecture": "NemotronHForCausalLM",
              "trustRemoteCode": True, "maxModelLen": 8192},
    "engine": {"image": "vllm/vllm-openai:v0.20.2"},
    "prefill": {"tensorParallelSize": 2, "blockSize": 128},
    "decode": {"tensorParallelSize": 2, "blockSize": 128},
    "network": {"rdma": {"resourceName": "rdma/ib", "count": 1}},
}


def hybrid(**patch) -> PDDeploymentSpec:
    """:data:`HYBRID` with ``patch`` deep-merged into it."""
    return PDDeploymentSpec.model_validate(merge(HYBRID, patch))


class FakeAdmissionApi:
    """The two AdmissionregistrationV1Api calls the webhook makes: records patches; answers reads from
    ``live`` (the ValidatingWebhookConfiguration as a dict; ``None``: 404)."""

    def __init__(self, live: dict | None) -> None:
        self.live = live
        self.patches: list[tuple[str, dict, dict]] = []

    def read_validating_webhook_configuration(self, name, _preload_content=True):
        if self.live is None:
            raise ApiException(status=404)
        return type("Resp", (), {"data": json.dumps(self.live).encode()})()

    def patch_validating_webhook_configuration(self, name, body, **kwargs):
        self.patches.append((name, body, kwargs))
