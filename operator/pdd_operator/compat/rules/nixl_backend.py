"""NIXL backend names: each name in ``kv_connector_extra_config.backends`` is a NIXL plugin's, as NIXL spells it."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.nixl_backends import BACKENDS_READ_SINCE, PLUGIN_NAMES, miscased
from pdd_operator.vllm.versions import fmt


@rule(
    id="nixl-backend-unknown", family="nixl-backend-fabric-mismatch", severity="error",
    fields=("spec.kvTransfer.backends",),
    source=("vllm nixl worker (nixl_connector.py 0.11.0 lines 472-481 and 816; nixl/worker.py 0.20.0 lines 105, 177, "
            "807; nixl/base_worker.py 0.34.0 lines 683, 797, 1944): the agent is created with "
            "nixl_agent_config(backends=<the list>) and the KV caches registered with register_memory(descs, "
            "backends=<the list>); NIXL src/api/python/_api.py (tags 0.2.0-v1.4.0): nixl_agent skips a backend "
            "whose plugin is not in getAvailPlugins() ('Skipping backend registration ... missing plugin') and "
            "register_memory raises KeyError on self.backends[name]; plugin names are upper case (src/plugins/*). "
            "vLLM 0.9.0-0.10.2 do not read the list (NixlWrapper(uuid, None): UCX)"),
    since=BACKENDS_READ_SINCE,
    example='kv_connector_extra_config: {"backends": ["ucx"]} on vLLM 0.20.2',
)
def check_backend_names(pair: PDPair) -> list[Violation]:
    """Every NIXL backend a role names is a NIXL plugin name, in NIXL's case.

    Per role, on its release (0.11.0+, where the list is read): a known plugin name in another case (``ucx``,
    ``Mooncake``, ``libfabric``) is an error, since NIXL compares names as written and the engine fails while it
    registers its KV cache; a name no NIXL plugin has is a warning (a plugin of that name may be built into the
    image, which the manifest does not show).
    """
    out: list[Violation] = []
    for r in pair.roles:
        if not r.nixl or (r.version is not None and r.version < BACKENDS_READ_SINCE):
            continue
        where = f"vLLM {fmt(r.version)}" if r.version else "this vLLM"
        for name in r.backends:
            right = miscased(name)
            if right is None and name in PLUGIN_NAMES:
                continue
            fix = fix_for(pair, f"Write the backend as NIXL names it: {right or 'UCX'} in spec.kvTransfer.backends.",
                          f"Write the backend as NIXL names it ({right or 'UCX, LIBFABRIC, GDS, ...'}) in the "
                          f"{r.role}'s kv_connector_extra_config.backends.")
            what = (f"{r.role}: kv_connector_extra_config.backends names {name!r}; {where}'s NIXL worker asks its "
                    f"agent for that backend and registers the KV cache with it, ")
            if right is not None:
                out.append((what + f"but NIXL's plugins are named in upper case ({right}) and compared as written: "
                            f"the agent skips {name!r} ('missing plugin') and register_memory raises KeyError "
                            f"{name!r}, so the {r.role} never starts.", fix))
            else:
                out.append((what + f"and no NIXL plugin is named {name!r} ({', '.join(sorted(PLUGIN_NAMES))}): unless "
                            "the image carries a plugin of that name, the agent skips it and register_memory raises "
                            f"KeyError, so the {r.role} never starts.", fix, "warning"))
    return out
