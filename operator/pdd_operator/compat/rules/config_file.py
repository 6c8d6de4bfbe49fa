"""Settings an engine reads from a ``vllm serve --config`` file whose meaning the vLLM release decides.

A YAML mapping in the file reaches vLLM's parser as ``str(dict)`` (Python's repr, single quotes) up to 0.14.1
(vllm/utils/argparse_utils.py 0.14.1 ``load_config_file`` l.489) and as ``json.dumps`` from 0.16.0 (0.16.0 l.505,
0.34.0 l.668); 0.15.x was not read. Every flag that takes a mapping reads JSON (``parse_dataclass``:
``TypeAdapter(...).validate_json``, vllm/engine/arg_utils.py 0.14.1 l.279-286; ``json.loads`` for the dict-typed
ones), so up to 0.14.1 the engine stops while its arguments are parsed (vllm-project/vllm#33196). Where the release
is known the file is inlined as that release writes it and the parse rules judge it (:mod:`pdd_operator.compat.
config_files`); where it is not (unknown, or 0.15.x) it is read as JSON and this rule warns.
"""

from __future__ import annotations

from pdd_operator.compat.config_files import DICT_REPR_UNTIL
from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.versions import fmt


@rule(
    id="config-file-mapping-release-dependent", family="engine-args", severity="warning",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"), in_manifest=("args", "command"),
    source=("vllm/utils/argparse_utils.py load_config_file: str(dict) for a mapping up to 0.14.1 (l.489), "
            "json.dumps from 0.16.0 (0.16.0 l.505, 0.34.0 l.668); JSON flags read with TypeAdapter.validate_json "
            "(vllm/engine/arg_utils.py 0.14.1 l.279-286); vllm-project/vllm#33196; 0.15.x not read"),
    without_connector=True, one_engine=True, any_release=True,
    example="vllm serve --config /etc/vllm/config.yaml with kv-transfer-config: {kv_connector: NixlConnector, ...} on "
            "an image whose vLLM release is not known",
)
def check_config_file_mapping(pair: PDPair) -> list[Violation]:
    """An engine whose ``--config`` file gives a flag as a YAML mapping, on a release that does not tell how vLLM
    passes it (unknown or 0.15.x), gets a warning: up to 0.14.1 the flag's parser refuses Python's repr and the engine
    never starts, from 0.16.0 it reads the JSON."""
    out: list[Violation] = []
    for r in pair.roles:
        if not r.config_file_mappings:
            continue
        flags = ", ".join(r.config_file_mappings)
        release = (f"vLLM {fmt(r.version)} was not read here" if r.version is not None
                   else "the vLLM version is not known here")
        out.append((
            f"{r.role}: its vllm serve --config file gives {flags} as a YAML mapping. vLLM up to "
            f"{fmt(DICT_REPR_UNTIL)} passes a mapping to the parser as Python's str() (single quotes), which the "
            "flag's JSON parser refuses (the engine never starts); from 0.16.0 it passes JSON, which is what was "
            f"checked here. {release[0].upper()}{release[1:]}, so whether the engine starts depends on the release.",
            f"In the {r.role}'s config file, write {flags} as a JSON string (key: '{{\"kv_connector\": ...}}'), "
            "which every release passes on unchanged, or run vLLM 0.16.0 or later.",
            "warning",
        ))
    return out
