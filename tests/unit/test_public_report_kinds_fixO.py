"""P2pNcclConnector pairs whose release is not named (i9-fixO; set 134's vLLM docs and examples).

A host install that pins no release (a script with no ``pip install vllm==X``, or ``pip install vllm>=0.9.2``) is
judged on every release that ships the connector (0.9.2-0.23.x: :func:`~pdd_operator.compat.unknown_version.
connector_floor` / :func:`~pdd_operator.compat.unknown_version.connector_until`) by the ``p2p_nccl`` rules and the
engine-alone ones: an error only where every one of those releases refuses the pair, a P2pNccl rule refusing some
of them a warning naming them. An image whose tag names no release stays "not checked"; a known release is judged as
before.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.rules import CHECKS
from pdd_operator.compat.unknown_version import connector_until, probe_versions
from tests.unit.cli_check import check_text, rules, rules_by_severity
from tests.unit.test_boundaries import engine, pair
from tests.unit.test_p2p_nccl_pairs import NO_RANDOM, _deployments, _doc_script

REQUEST_ID = "p2p-nccl-request-id-randomized"
PARALLEL = "p2p-nccl-parallel-mismatch"
DTYPE = "p2p-nccl-kv-dtype-mismatch"
UNKNOWN = "vllm-version-unknown"


def _unpinned(pin: str, **kwargs) -> str:
    """The docs' 1P1D pair with ``pip install vllm==0.13.0`` replaced by ``pin`` (no line where empty)."""
    return _doc_script("0.13.0", **kwargs).replace("pip install vllm==0.13.0\n", f"{pin}\n" if pin else "")


def _messages(out: dict, rule: str) -> str:
    return " ".join(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule)


PINS = ["", "pip install 'vllm>=0.9.2'", "pip install -U vllm", "uv pip install vllm"]


@pytest.mark.parametrize("pin", PINS)
def test_unpinned_doc_pair_passes_with_the_request_id_warning(tmp_path, capsys, pin):
    """vLLM's own example, no release named: it runs on 0.9.2-0.13.x, and 0.14.0-0.23.x randomize the request id
    (no opt-out set): a warning naming those releases, not "not checked" and not an error."""
    code, out = check_text(tmp_path, capsys, _unpinned(pin))
    assert code == 0, out
    assert rules_by_severity(out).get("error") is None, out
    assert REQUEST_ID in rules(out, "warning"), out
    assert "0.14.0 <= v < 0.24.0" in _messages(out, REQUEST_ID), out
    assert "0.24.0" in _messages(out, UNKNOWN) and "P2pNcclConnector" in _messages(out, UNKNOWN), out


@pytest.mark.parametrize("pin", PINS[:2])
def test_unpinned_with_the_opt_out_warns_only_for_0_14_to_0_16(tmp_path, capsys, pin):
    """VLLM_DISABLE_REQUEST_ID_RANDOMIZATION=1 is read from 0.17.0: 0.14.0-0.16.x alone are named."""
    code, out = check_text(tmp_path, capsys, _unpinned(pin, env=NO_RANDOM))
    assert code == 0, out
    assert "0.14.0 <= v < 0.17.0" in _messages(out, REQUEST_ID), out


@pytest.mark.parametrize("pin", PINS[:2])
@pytest.mark.parametrize(("kwargs", "rule"), [
    ({"p_flags": "--tensor-parallel-size 2", "p_gpus": "0,2"}, PARALLEL),
    ({"d_flags": "--pipeline-parallel-size 2", "d_gpus": "1,2"}, PARALLEL),
    ({"p_flags": "--dtype bfloat16"}, DTYPE),
])
def test_unpinned_pair_every_release_refuses_is_an_error(tmp_path, capsys, pin, kwargs, rule):
    """A pair every release that ships the connector refuses (ranks without a peer, KV of another dtype): an error
    on 0.9.2-0.23.x, whatever the release."""
    code, out = check_text(tmp_path, capsys, _unpinned(pin, env=NO_RANDOM, **kwargs))
    assert code == 1 and rule in rules(out, "error"), out
    assert "every release from 0.9.2 before 0.24.0" in _messages(out, rule), out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:latest", "vllm/vllm-openai:nightly", "myorg/vllm-p2p:dev"])
def test_image_naming_no_release_stays_not_checked(tmp_path, capsys, image):
    text = _deployments("0.21.0", env={"VLLM_DISABLE_REQUEST_ID_RANDOMIZATION": "1"}).replace(
        "vllm/vllm-openai:v0.21.0", image)
    code, out = check_text(tmp_path, capsys, text, "pair.yaml")
    assert code == 3, out
    assert "image names none" in json.dumps(out), out


@pytest.mark.parametrize(("vllm", "env", "code", "errors"), [
    ("0.13.0", "", 0, set()),
    ("0.21.0", "", 1, {REQUEST_ID}),
    ("0.16.0", NO_RANDOM, 1, {REQUEST_ID}),
    ("0.21.0", NO_RANDOM, 0, set()),
])
def test_known_release_unchanged(tmp_path, capsys, vllm, env, code, errors):
    got, out = check_text(tmp_path, capsys, _doc_script(vllm, env=env))
    assert got == code and rules(out, "error") == errors, out
    assert UNKNOWN not in rules(out), out


def test_probe_grid_stops_before_the_release_that_dropped_the_connector():
    grid = probe_versions(CHECKS, (0, 9, 2), (0, 24, 0))
    assert grid[0] == (0, 9, 2) and max(grid) < (0, 24, 0) and (0, 23, 0) in grid
    assert max(probe_versions(CHECKS, (0, 9, 2))) > (0, 24, 0)


@pytest.mark.parametrize(("connector", "until"), [
    ("P2pNcclConnector", ((0, 24, 0), "P2pNcclConnector")), ("NixlConnector", None), ("MoRIIOConnector", None),
    ("SharedStorageConnector", None),
])
def test_connector_until_names_the_dropped_connector_only(connector, until):
    p, d = engine("m", connector=connector), engine("m", connector=connector)
    assert connector_until(pair(p, d, "")) == until
