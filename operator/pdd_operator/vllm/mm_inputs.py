"""Which multimodal inputs a vLLM server refuses from its command line: ``--language-model-only`` and modality
limits of 0 in ``--limit-mm-per-prompt``.

``MultiModalConfig.language_model_only`` "disables all multimodal inputs by setting all modality limits to 0"
(vllm/config/multimodal.py 0.34.0 lines 303-305; the field is in the 0.20.0, 0.26.0 and 0.30.0 sdists as well), and
``limit_per_prompt`` caps each modality (an int, or ``{"count": n, ...}`` from 0.11.1). A request carrying more items
of a modality than its limit is refused by the server's input processing (400), so an image request fails on a
server whose image limit is 0. Neither setting changes the language model's KV cache nor enters the NIXL
compatibility hash (nixl/metadata.py 0.34.0 lines 149-215).
"""

from __future__ import annotations

import json

from pdd_operator.vllm.expansion import unknown_names

#: The marker for "every modality" (``--language-model-only``).
ALL = "*"


def disabled_modalities(language_model_only: object, limits: object) -> tuple[str, ...] | None:
    """The modalities a server refuses: ``(ALL,)`` with ``--language-model-only``, else the modalities whose
    ``--limit-mm-per-prompt`` limit is 0, sorted; ``()`` for none; ``None`` where the flags cannot be read (a
    templated or malformed value)."""
    if language_model_only is True:
        return (ALL,)
    if language_model_only not in (None, False):
        return None
    if limits is None:
        return ()
    if not isinstance(limits, str) or unknown_names(limits):
        return None
    try:
        parsed = json.loads(limits)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    zero = []
    for modality, limit in parsed.items():
        count = limit.get("count") if isinstance(limit, dict) else limit
        if count == 0:
            zero.append(str(modality))
    return tuple(sorted(zero))
