"""The LoRA adapters a vLLM server serves by name from its command line (``--lora-modules``).

vLLM's OpenAI frontend takes ``--lora-modules`` as one or more words (``nargs="+"``), each ``name=path`` or a JSON
object ``{"name": ..., "path": ..., "base_model_name": ...}`` (``LoRAParserAction``: vllm/entrypoints/openai/
cli_args.py 0.11.0-0.19.x, vllm/entrypoints/common/cli_args.py 0.34.0), and serves each adapter as a model name of its
own: a request whose ``model`` names neither a served model name nor a loaded adapter gets 404 "The model `...` does
not exist" (``_check_model``: vllm/entrypoints/openai/serving_engine.py 0.11.0 line 485, openai/engine/serving.py
0.20.0 line 428, serve/engine/serving.py 0.34.0 lines 49-84), unless ``VLLM_ALLOW_RUNTIME_LORA_UPDATING`` lets a
resolver load it on the fly.
"""

from __future__ import annotations

import json

from pdd_operator.vllm.expansion import unknown_names


def adapter_names(value: object) -> tuple[str, ...] | None:
    """The adapter names a ``--lora-modules`` value serves (:func:`~pdd_operator.vllm.flags.parse_flags` joins its
    words with spaces): ``()`` when the flag is absent, ``None`` where a name cannot be read (a templated value, a
    word that is neither ``name=path`` nor a JSON object with a ``name``)."""
    if value is None or value is False:
        return ()
    if not isinstance(value, str) or unknown_names(value):
        return None
    names: list[str] = []
    decoder, text, i = json.JSONDecoder(), value.strip(), 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        if text[i] == "{":
            try:
                obj, i = decoder.raw_decode(text, i)
            except ValueError:
                return None
            if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
                return None
            names.append(obj["name"])
            continue
        end = len(text) if (space := text.find(" ", i)) < 0 else space
        word, i = text[i:end], end
        if "=" not in word or not word.split("=", 1)[0]:
            return None
        names.append(word.split("=", 1)[0])
    return tuple(names)
