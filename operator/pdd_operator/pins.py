"""Image pins (``pins.json``): the default engine image and the versions baked into the images.

One file, read by the API's defaults, by ``images/build.sh`` and by the tests that check the pins
against the compatibility rules, so the default image and the rules cannot disagree.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pdd_operator import __version__


@lru_cache(maxsize=1)
def pins() -> dict[str, str]:
    """The pins as a dict (keys: vllm, nixlPackage, nixl, engineImage, operatorImage, operatorPython)."""
    return json.loads((Path(__file__).parent / "pins.json").read_text())


def engine_image() -> str:
    """Default engine image: ``<engineImage>:v<vllm>``; the tag carries the vLLM version the rules read."""
    p = pins()
    return f"{p['engineImage']}:v{p['vllm']}"


def operator_image() -> str:
    """The operator image of this release: ``<operatorImage>:v<package version>``."""
    return f"{pins()['operatorImage']}:v{__version__}"
