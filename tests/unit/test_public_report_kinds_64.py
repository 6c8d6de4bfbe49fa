"""What the sixty-fourth public-report set (tests/unit/data/public_reports_64) taught, with negative controls.

The set itself scored 15/15 on its blind baseline. Adding it shifted the entries the "no false refusals" property test
(:mod:`tests.unit.test_unknown_values`) draws, and the new draw hit a Docker Compose entry of set 59 whose
``--kv-transfer-config`` the test had made unknown in Kubernetes' form: ``$(PDD_UNKNOWN)`` with a Secret ``env``
entry. Compose has no ``env`` key and does not expand ``$(...)``, so vLLM would have received the literal text (not
JSON) and the checker rightly refused it; the fault was the test's, not the checker's. The kind: a value made unknown
must be made unknown the way the file's own format does it. For a Compose service that is Compose interpolation,
``${PDD_UNKNOWN}`` from the shell running ``docker compose`` (Compose specification ``12-interpolation.md``), which
:mod:`pdd_operator.compat.compose_inputs` reads as a value not in the files (rules needing it say "not checked").
:func:`tests.unit.unknown_values.sites` now writes that form for Compose services (``command`` words, booleans, and
``environment`` map or ``NAME=value`` items) and keeps the Secret form for Kubernetes containers.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.unit.test_unknown_values import ENTRIES, _docs, _run
from tests.unit.unknown_values import VAR, sites


def _is_compose(docs: list) -> bool:
    return any(isinstance(d, dict) and isinstance(d.get("services"), dict) and "apiVersion" not in d for d in docs)


#: The valid Compose entries of every held-out set (index into :data:`ENTRIES`), found from the data, not listed.
COMPOSE = [i for i in range(len(ENTRIES)) if _is_compose(_docs(i)[0])]


def _compose_sites(i: int, want: str) -> list:
    return [s for s in sites(_docs(i)[0]) if want in s.what]


def rules(out: dict, severity: str) -> set[str]:
    return {f["rule"] for r in out.get("results", []) for f in r.get("findings", []) if f["severity"] == severity}


def test_the_corpus_holds_valid_compose_entries():
    assert len(COMPOSE) >= 3


@pytest.mark.parametrize("i", COMPOSE, ids=[ENTRIES[i][1]["id"] for i in COMPOSE])
def test_a_compose_services_values_are_made_unknown_by_compose_interpolation(i):
    docs = _docs(i)[0]
    found = sites(docs)
    assert found
    for site in found:
        text = yaml.safe_dump_all(site.apply(docs))
        assert f"$({VAR})" not in text, site.what  # the kubelet's form: Compose passes it on as literal text
        assert f"${{{VAR}}}" in text, site.what
        assert all("env" not in svc for d in site.apply(docs) if isinstance(d, dict)
                   for svc in (d.get("services") or {}).values()), site.what  # a Compose service has no env key


@pytest.mark.parametrize("i", COMPOSE, ids=[ENTRIES[i][1]["id"] for i in COMPOSE])
def test_an_unknown_kv_transfer_config_in_compose_is_not_refused(i, tmp_path, capsys):
    docs, model_config = _docs(i)
    code, _ = _run(docs, model_config, tmp_path, capsys)
    if code in (1, 2):
        pytest.skip("the entry is refused as published (a strict xfail of its own set)")
    found = _compose_sites(i, "--kv-transfer-config")
    assert found
    for site in found:
        code, out = _run(site.apply(docs), model_config, tmp_path, capsys)
        assert code in (0, 3), f"{site.what}: exit {code}, errors {sorted(rules(out, 'error'))}"
        assert not rules(out, "error")


@pytest.mark.parametrize("i", COMPOSE, ids=[ENTRIES[i][1]["id"] for i in COMPOSE])
def test_an_unknown_compose_environment_value_is_not_refused(i, tmp_path, capsys):
    docs, model_config = _docs(i)
    code, _ = _run(docs, model_config, tmp_path, capsys)
    if code in (1, 2):
        pytest.skip("the entry is refused as published")
    for site in _compose_sites(i, "environment "):
        code, out = _run(site.apply(docs), model_config, tmp_path, capsys)
        assert code in (0, 3), f"{site.what}: exit {code}, errors {sorted(rules(out, 'error'))}"


KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _compose(environment) -> list:
    """A two-service Compose P/D pair on one host (host network, disjoint ports), both roles' environment as given."""
    def service(port: int, side: int, gpu: str) -> dict:
        env = environment(side)
        return {"image": "vllm/vllm-openai:v0.20.0", "network_mode": "host", "ipc": "host",
                "entrypoint": ["vllm", "serve"],
                "command": ["Qwen/Qwen3-8B", "--port", str(port), "--block-size", "16", "--kv-transfer-config", KV],
                "environment": env,
                "deploy": {"resources": {"reservations": {"devices": [
                    {"driver": "nvidia", "device_ids": [gpu], "capabilities": ["gpu"]}]}}}}
    return [{"name": "pd", "services": {"prefill": service(8100, 5600, "0"), "decode": service(8200, 5700, "1")}}]


@pytest.mark.parametrize("form", ["map", "list"])
def test_compose_environment_sites_take_both_forms(form, tmp_path, capsys):
    def environment(side: int):
        return ({"VLLM_NIXL_SIDE_CHANNEL_PORT": str(side)} if form == "map"
                else [f"VLLM_NIXL_SIDE_CHANNEL_PORT={side}"])
    docs = _compose(environment)
    code, out = _run(docs, None, tmp_path, capsys)
    assert code == 0, sorted(rules(out, "error"))
    env_sites = [s for s in sites(docs) if s.what.startswith("environment VLLM_NIXL_SIDE_CHANNEL_PORT")]
    assert len(env_sites) == 2
    for site in env_sites:
        changed = site.apply(docs)
        values = [svc["environment"] for svc in changed[0]["services"].values()]
        assert any(f"${{{VAR}}}" in (v["VLLM_NIXL_SIDE_CHANNEL_PORT"] if form == "map" else v[0]) for v in values)
        code, out = _run(changed, None, tmp_path, capsys)
        assert code in (0, 3), sorted(rules(out, "error"))


def test_kubernetes_containers_keep_the_secret_form():
    """Negative control: a Kubernetes container's unknown value is still the kubelet's ``$(VAR)`` from a Secret."""
    docs = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
             "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.20.0",
                                      "command": ["vllm", "serve"], "args": ["m", "--block-size", "16"],
                                      "env": [{"name": "X", "value": "1"}]}]}}]
    found = sites(docs)
    flag = next(s for s in found if s.what.startswith("--block-size"))
    c = flag.apply(docs)[0]["spec"]["containers"][0]
    assert c["args"][-1] == f"$({VAR})" and any(e.get("name") == VAR and "valueFrom" in e for e in c["env"])
    env = next(s for s in found if s.what.startswith("env X"))
    assert "valueFrom" in env.apply(docs)[0]["spec"]["containers"][0]["env"][0]
