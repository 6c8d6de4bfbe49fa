"""The ``ENV`` that known engine images set themselves, for the variables a container's script reads.

A shell default (``${GPU_D:-2}``) is the value the engine sees where nothing sets the variable: not the manifest's
``env``, not an ``envFrom``/``valueFrom`` source, not the platform, not the image's own ``ENV``. The last is not in
the manifest; for the images whose Dockerfile is public it is read here, so that a default is judged only where the
image does not set the name (:meth:`pdd_operator.vllm.expansion.ContainerEnv.unset`).

Sources:

* ``vllm/vllm-openai`` (and ``vllm/vllm-openai-rocm`` is not covered): vLLM's ``docker/Dockerfile``, stages
  ``vllm-base`` and ``vllm-openai-base``, read in the v0.18.0, v0.20.0, v0.22.0 and v0.24.0 sdists: ``ENV``
  ``DEBIAN_FRONTEND``, ``UV_HTTP_TIMEOUT``, ``UV_INDEX_STRATEGY``, ``UV_LINK_MODE``, ``UV_PYTHON_INSTALL_DIR``,
  ``UV_CACHE_DIR`` (0.22+), ``VLLM_ENABLE_CUDA_COMPATIBILITY=0``, ``LD_LIBRARY_PATH``, ``TORCH_CUDA_ARCH_LIST``,
  ``VLLM_USAGE_SOURCE=production-docker-image``, ``VLLM_BUILD_COMMIT``/``VLLM_BUILD_PIPELINE``/``VLLM_BUILD_URL``/
  ``VLLM_IMAGE_TAG`` (0.22+). Its final base is ``nvidia/cuda:<v>-base-ubuntu<v>`` (``ARG FINAL_BASE_IMAGE``).
* ``nvidia/cuda`` base images (NVIDIA's cuda container-images, ``dist/<v>/<os>/base/Dockerfile``): ``PATH``,
  ``LD_LIBRARY_PATH``, ``CUDA_VERSION``, ``NVIDIA_REQUIRE_CUDA``, ``NV_CUDA_CUDART_VERSION``, and
  ``NVIDIA_VISIBLE_DEVICES=all`` / ``NVIDIA_DRIVER_CAPABILITIES=compute,utility``. On Kubernetes the NVIDIA device
  plugin's ``Allocate`` answer (or its CDI spec) sets ``NVIDIA_VISIBLE_DEVICES`` to the devices it gave the
  container, so the image's ``all`` is not what the runtime sees there: it is listed with no value (unknown).

A name listed with a value is that value; one listed with ``None`` is set to a value not known here (it varies with
the tag, or the platform replaces it). A name not listed is not set by the image.
"""

from __future__ import annotations

#: ``nvidia/cuda`` base images' ``ENV`` (see the module docstring); ``None``: set, value not known here.
_CUDA_BASE: dict[str, str | None] = {
    "PATH": None, "LD_LIBRARY_PATH": None, "CUDA_VERSION": None, "NVIDIA_REQUIRE_CUDA": None,
    "NV_CUDA_CUDART_VERSION": None, "NVIDIA_VISIBLE_DEVICES": None, "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
}

#: ``vllm/vllm-openai``'s own ``ENV`` over its CUDA base (vLLM docker/Dockerfile 0.18.0-0.24.0).
_VLLM_OPENAI: dict[str, str | None] = {
    **_CUDA_BASE,
    "DEBIAN_FRONTEND": "noninteractive", "UV_HTTP_TIMEOUT": "500", "UV_INDEX_STRATEGY": "unsafe-best-match",
    "UV_LINK_MODE": "copy", "UV_PYTHON_INSTALL_DIR": None, "UV_CACHE_DIR": None,
    "VLLM_ENABLE_CUDA_COMPATIBILITY": "0", "TORCH_CUDA_ARCH_LIST": None,
    "VLLM_USAGE_SOURCE": "production-docker-image", "VLLM_BUILD_COMMIT": None, "VLLM_BUILD_PIPELINE": None,
    "VLLM_BUILD_URL": None, "VLLM_IMAGE_TAG": None,
}

#: Image repositories (registry host dropped) -> their ``ENV`` as known.
IMAGE_ENV: dict[str, dict[str, str | None]] = {
    "vllm/vllm-openai": _VLLM_OPENAI,
    "nvidia/cuda": _CUDA_BASE,
}


def repository(image: str) -> str:
    """``image``'s repository without registry host, tag or digest: ``docker.io/vllm/vllm-openai:v0.24.0`` ->
    ``vllm/vllm-openai``."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name[: len(name) - len(last[-1]) + last[-1].index(":")]
    parts = name.split("/")
    if len(parts) > 2 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    elif len(parts) == 2 and ("." in parts[0] or ":" in parts[0]):
        parts = parts[1:]
    return "/".join(parts)


def image_env(image: str) -> dict[str, str | None]:
    """The ``ENV`` of ``image`` as known (:data:`IMAGE_ENV`), ``{}`` for an image not listed (its ``ENV`` is not read:
    a shell default is then taken as the value where the manifest does not set the name)."""
    return dict(IMAGE_ENV.get(repository(image), {}))
