"""Held-back variants of each kind of bad or awkward input of issue 11 (``../shared/cases/turn2``),
written here: one table shared by the unit test (``pdd check`` and the reconcile's own checks, no
cluster) and the end-to-end test (kubectl against the real apiserver, webhook off and on).

Each :class:`Variant` is a PDDeployment document (JSON text: kubectl sends it as it is, non-ASCII and
``\\uXXXX`` escapes included) and, where the input is an object beside it, a ConfigMap. The verdict a
variant must get is one of:

- ``"run"``: admitted, children applied, a status for the current generation with no error;
- ``"refuse"``: refused at admission (webhook) or reported in status (webhook off) naming ``field``;
- ``"either"``: the apiserver's own validation may refuse it first (names), else it must run.
"""

from __future__ import annotations

import copy
import json
import random
import string
from dataclasses import dataclass
from dataclasses import field as dataclass_field

import yaml

from tests.helpers import ROOT

LLAMA = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())
EMOJI = "\U0001F999"  # llama, outside the Basic Multilingual Plane
MATH = "\U0001D529\U0001D529\U0001D51E\U0001D52A\U0001D51E"  # mathematical fraktur "llama" (non-BMP)


@dataclass(frozen=True)
class Variant:
    """One input: ``id``, the PDDeployment ``name``, its ``body`` (JSON text), the verdict
    (``"run"``, ``"refuse"``, ``"either"``), the ``field`` a refusal must name, and objects to create
    first (``config_maps``: ConfigMap bodies as dicts)."""

    id: str
    name: str
    body: str
    verdict: str
    field: str = ""
    config_maps: list[dict] = dataclass_field(default_factory=list)


def document(name: str, patch: dict | None = None, config_map: str | None = None) -> dict:
    """The Llama example named ``name`` with ``patch`` merged into its spec, one level deep per
    section (``{"prefill": {"extraArgs": [...]}}`` keeps prefill's other fields)."""
    doc = copy.deepcopy(LLAMA)
    doc["metadata"] = {"name": name}
    del doc["spec"]["model"]["hfTokenSecretRef"]
    for key, value in (patch or {}).items():
        base = doc["spec"].get(key)
        doc["spec"][key] = {**base, **value} if isinstance(value, dict) and isinstance(base, dict) else value
    if config_map is not None:
        doc["spec"]["model"]["configMapRef"] = {"name": config_map}
    return doc


def _v(id_: str, name: str, patch: dict | None = None, verdict: str = "run", field_: str = "",
       config_maps: list[dict] | None = None, body: str | None = None) -> Variant:
    doc = document(name, patch, config_map=config_maps[0]["metadata"]["name"] if config_maps else None)
    return Variant(id_, name, body if body is not None else json.dumps(doc, ensure_ascii=False), verdict,
                   field_, config_maps or [])


def _random_text(n: int, seed: int) -> str:
    """``n`` incompressible printable characters (gzip cannot shrink them much)."""
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))


def _config_map(name: str, data: dict | None = None, binary: dict | None = None) -> dict:
    cm: dict = {"metadata": {"name": name}}
    if data is not None:
        cm["data"] = data
    if binary is not None:
        cm["binaryData"] = binary
    return cm


def _surrogate_body(name: str, value: str) -> str:
    """A PDDeployment whose servedModelName is ``value`` written as raw JSON text (``\\uXXXX``
    escapes kept, as a JSON encoder with ``ensure_ascii`` writes them)."""
    text = json.dumps(document(name, {"model": {**LLAMA["spec"]["model"], "servedModelName": "PLACEHOLDER"}}))
    return text.replace('"PLACEHOLDER"', f'"{value}"')


def _model(**fields) -> dict:
    base = {k: v for k, v in LLAMA["spec"]["model"].items() if k != "hfTokenSecretRef"}
    return {**base, **fields}


LLAMA_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_attention_heads": 32,
                "num_key_value_heads": 8, "num_hidden_layers": 32, "hidden_size": 4096}


def variants() -> list[Variant]:
    """Every held-back variant (ids are unique; names unique within a namespace)."""
    long_dotted = ".".join(["seg" + "x" * 58] * 4)[:253].rstrip(".-")
    return [
        # --- names: dots, uppercase, 63+ characters, unicode ---------------------------------------
        _v("name-many-dots", "llama.3.1.8b.instruct.v2"),
        _v("name-63", "q" * 63),
        _v("name-64-digits-end", "m" * 60 + "-123"),
        _v("name-253-dotted", long_dotted, verdict="either"),
        _v("name-uppercase", "Llama-3.1-8B", verdict="refuse", field_="metadata.name"),
        _v("name-unicode", "llama-\u00fc", verdict="refuse", field_="metadata.name"),
        _v("name-emoji", f"llama-{EMOJI}", verdict="refuse", field_="metadata.name"),
        # --- non-BMP text in every string field -----------------------------------------------------
        _v("emoji-served-model-name", "emoji-served", {"model": _model(servedModelName=MATH)}),
        _v("emoji-model-name", "emoji-model", {"model": _model(name=f"org/llama-{EMOJI}")}),
        _v("emoji-revision", "emoji-revision", {"model": _model(revision=f"main-{EMOJI}")}),
        _v("emoji-hf-architecture", "emoji-arch", {"model": _model(hfArchitecture=f"Llama{EMOJI}ForCausalLM")}),
        _v("emoji-env-value", "emoji-env", {"engine": {"env": [{"name": "GREETING", "value": EMOJI * 50}]}}),
        _v("emoji-env-name", "emoji-env-name", {"engine": {"env": [{"name": f"X{EMOJI}", "value": "1"}]}},
           verdict="refuse", field_="spec.engine.env"),
        _v("emoji-extra-arg", "emoji-arg", {"decode": {"extraArgs": ["--api-key", MATH]}}),
        _v("emoji-image-tag", "emoji-image", {"engine": {"image": f"vllm/vllm-openai:v0.24.0-{EMOJI}"}},
           verdict="refuse", field_="spec.engine.image"),  # the kubelet refuses it: InvalidImageName
        _v("emoji-node-selector", "emoji-selector", {"prefill": {"nodeSelector": {"gpu": EMOJI}}},
           verdict="refuse", field_="spec.prefill.nodeSelector"),
        _v("emoji-toleration-value", "emoji-toleration",
           {"decode": {"tolerations": [{"key": "gpu", "operator": "Equal", "value": EMOJI, "effect": "NoSchedule"}]}},
           verdict="refuse", field_="spec.decode.tolerations"),
        _v("emoji-gpu-product", "emoji-product", {"placement": {"gpuProduct": f"H200-{EMOJI}"}},
           verdict="refuse", field_="spec.placement.gpuProduct"),
        _v("emoji-ucx-devices", "emoji-ucx", {"network": {"rdma": {"resourceName": "rdma/ib"},
                                                          "ucx": {"netDevices": f"mlx5_{EMOJI}:1"}}}),
        _v("emoji-extra-config", "emoji-extra-config", {"kvTransfer": {"extraConfig": {"note": EMOJI}}}),
        _v("emoji-config-map-ref", "emoji-cmref", {"model": _model(configMapRef={"name": f"cfg-{EMOJI}"})},
           verdict="refuse", field_="spec.model.configMapRef.name"),
        # --- surrogate escapes in the JSON text -------------------------------------------------------
        _v("surrogate-pair-escaped", "surrogate-pair", body=_surrogate_body("surrogate-pair", "llama-\\ud83e\\udd99")),
        _v("surrogate-lone-high", "surrogate-lone", body=_surrogate_body("surrogate-lone", "llama-\\ud83e"),
           verdict="either"),
        # --- huge valid specs near and over the limits ------------------------------------------------
        _v("huge-env-near-limit", "huge-env-near",
           {"engine": {"env": [{"name": f"V{i}", "value": _random_text(2000, i)} for i in range(100)]}}),
        _v("huge-env-over-limit", "huge-env-over",
           {"engine": {"env": [{"name": f"V{i}", "value": _random_text(4000, i)} for i in range(200)]}},
           verdict="refuse", field_="spec"),
        _v("huge-extra-args-count", "huge-args",
           {"decode": {"extraArgs": [f"--x{i}" for i in range(3000)]}}),
        _v("huge-single-arg", "huge-one-arg", {"prefill": {"extraArgs": ["--api-key", "n" * 200_000]}}),
        # --- extraArgs with odd values ----------------------------------------------------------------
        _v("args-host-v6", "args-host-v6", {"prefill": {"extraArgs": ["--host", "::"]},
                                            "decode": {"extraArgs": ["--host=::"]}}),
        _v("args-host-bracketed", "args-host-bracket", {"decode": {"extraArgs": ["--host", "[::]"]}}),
        # set 94: a word of blanks only reaches vLLM as an extra positional, which argparse refuses ('unrecognized
        # arguments': FlexibleArgumentParser.parse_args, vllm/utils/argparse_utils.py 0.25.0 lines 243-300, ends in
        # argparse's); the operator passes extraArgs through as they are (render/engine.py)
        _v("args-empty-strings", "args-empty", {"decode": {"extraArgs": ["", " ", "\t"]}},
           verdict="refuse", field_="spec.decode.extraArgs"),
        _v("args-newlines", "args-newline", {"decode": {"extraArgs": ["--api-key", "a\nb"]}}),
        _v("args-dangling-flag", "args-dangling", {"decode": {"extraArgs": ["--max-num-seqs"]}}),
        _v("args-port-managed", "args-port", {"decode": {"extraArgs": ["--port", "99999"]}},
           verdict="refuse", field_="spec.decode.extraArgs"),
        _v("args-bad-kv-json", "args-kv-json", {"decode": {"extraArgs": ["--kv-transfer-config", "{not json"]}},
           verdict="refuse", field_="spec.decode.extraArgs"),
        _v("args-nul-byte", "args-nul", {"decode": {"extraArgs": ["--api-key", "a\u0000b"]}}, verdict="either"),
        # --- ConfigMaps: deep nesting, huge, invalid, binaryData ---------------------------------------
        _v("cm-deep-object", "cm-deep-object", config_maps=[_config_map(
            "cm-deep-object", {"config.json": '{"a":' * 20_000 + "1" + "}" * 20_000})]),
        _v("cm-invalid-json", "cm-invalid", config_maps=[_config_map("cm-invalid", {"config.json": "{architectures: ["})]),
        _v("cm-yaml-not-json", "cm-yaml", config_maps=[_config_map(
            "cm-yaml", {"config.json": yaml.safe_dump(LLAMA_CONFIG)})]),
        _v("cm-json-array", "cm-array", config_maps=[_config_map("cm-array", {"config.json": "[1, 2, 3]"})]),
        _v("cm-wrong-types", "cm-types", config_maps=[_config_map("cm-types", {"config.json": json.dumps(
            {**LLAMA_CONFIG, "num_attention_heads": "32", "num_key_value_heads": -8, "hidden_size": 1e308,
             "num_hidden_layers": [32]})})]),
        _v("cm-huge-numbers", "cm-numbers", config_maps=[_config_map("cm-numbers", {"config.json": (
            '{"architectures": ["LlamaForCausalLM"], "num_key_value_heads": 1' + "0" * 5000 + ', "x": NaN}')})]),
        _v("cm-binary-data", "cm-binary", config_maps=[_config_map(
            "cm-binary", binary={"config.json": "eyJhcmNoaXRlY3R1cmVzIjogWyJMbGFtYUZvckNhdXNhbExNIl19"})]),
        _v("cm-huge", "cm-huge", config_maps=[_config_map("cm-huge", {"config.json": json.dumps(
            {**LLAMA_CONFIG, "padding": _random_text(900_000, 7)})})]),
        _v("cm-non-bmp-keys", "cm-emoji", config_maps=[_config_map("cm-emoji", {"config.json": json.dumps(
            {**LLAMA_CONFIG, EMOJI: EMOJI, "architectures": [f"Llama{EMOJI}"]}, ensure_ascii=True)})]),
        # --- host network port collisions and IPv6 ------------------------------------------------------
        _v("hostnet-side-equals-port", "hostnet-same", {"port": 5600, "kvTransfer": {"sideChannelPort": 5600},
                                                       "network": {"hostNetwork": True,
                                                                   "rdma": {"resourceName": "rdma/ib"}}},
           verdict="refuse", field_="spec.kvTransfer.sideChannelPort"),
        _v("hostnet-reversed-adjacent", "hostnet-reversed", {"port": 5601, "kvTransfer": {"sideChannelPort": 5600},
                                                             "network": {"hostNetwork": True,
                                                                         "rdma": {"resourceName": "rdma/ib"}}}),
        _v("hostnet-top-port", "hostnet-top", {"port": 65535, "network": {"hostNetwork": True,
                                                                          "rdma": {"resourceName": "rdma/ib"}}},
           verdict="refuse", field_="spec.port"),
        _v("hostnet-router-port", "hostnet-router", {"port": 8000, "router": {"port": 8001},
                                                     "network": {"hostNetwork": True,
                                                                 "rdma": {"resourceName": "rdma/ib"}}}),
    ]


VARIANTS = variants()
