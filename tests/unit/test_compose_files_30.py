"""Compose files that take their services or values from other files (issue 9, set 30, helper F1).

Compose v2 resolves, relative to the Compose file: the project's ``.env`` (variable interpolation, Compose
specification ``12-interpolation.md``), ``include:`` (``14-include.md``), ``extends: {file: ...}`` and ``env_file``
(``05-services.md``). The checker read none of them: a ``--block-size ${BS}`` whose ``.env`` sets 32 was "not
checked", a pair split over an ``include``d file was "nothing to check" (exit 4), a service extending one of another
file was "not checked" even with that file beside it, and an ``env_file`` given beside it was an ``envFrom`` of
unknown content. Now each is read where the file is given, and one not given is "not checked" with its name.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from pdd_operator.compat.compose_inputs import interpolate, parse_env_file
from tests.unit.test_compose_inputs import _service

HETERO = "block-size-hetero-unsupported"  # vLLM 0.11.0: prefill and decode block sizes must be equal


def _run(tmp_path, capsys, files: dict[str, str], main_file: str = "compose.yml") -> tuple[int, dict]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    code = main(["check", str(tmp_path / main_file), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def _rules(out: dict, severity: str = "error") -> set[str]:
    return {f["rule"] for r in out["results"] for f in r["findings"] if f["severity"] == severity}


def _not_checked(out: dict) -> list[str]:
    return [f"{s['object']}: {s['reason']}" for s in out.get("notChecked", [])]


def _pair(p_flags: str = "--block-size 16", d_flags: str = "--block-size 16") -> str:
    return "services:\n" + _service("prefill", p_flags) + _service("decode", d_flags, gpu="1")


# --- .env ---------------------------------------------------------------------------------------------------------


def test_interpolate_with_the_env_file_values():
    unknown: set[str] = set()
    values = {"A": "1", "E": "", "D": "a$b"}
    assert interpolate("${A} $A ${A:-9} ${E:-9} ${E-9} ${U:-9} ${A:+x} ${E:+x} ${A:?e} $D", unknown, values) == (
        "1 1 1 9  9 x  1 a$$b")
    assert unknown == set()
    assert interpolate("${U} ${U:+x} ${U:?e}", unknown, values) == "$(U) $(U) $(U)" and unknown == {"U"}


def test_parse_env_file():
    assert parse_env_file("# c\nexport A=1\nB='x # y'\nC=\"q\"\nD=v # note\nE\nF=\n1X=2\n") == {
        "A": "1", "B": "x # y", "C": "q", "D": "v", "F": ""}


@pytest.mark.parametrize(("dotenv", "flags", "refused"), [
    ("BS=32\n", "--block-size ${BS}", True), ("BS=16\n", "--block-size ${BS}", False),
    ("BS=32\n", "--block-size ${BS:-16}", True), ("BS=\n", "--block-size ${BS:-32}", True),
    ("OTHER=1\n", "--block-size ${BS:-16}", False), ("export BS=32 # decode\n", "--block-size $BS", True),
])
def test_the_env_file_sets_the_interpolated_values(tmp_path, capsys, dotenv, flags, refused):
    code, out = _run(tmp_path, capsys, {"compose.yml": _pair(d_flags=flags), ".env": dotenv})
    assert (HETERO in _rules(out)) is refused, out
    assert not any("$BS" in n for n in _not_checked(out)), out


def test_without_the_env_file_the_value_is_not_checked(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, {"compose.yml": _pair(d_flags="--block-size ${BS}")})
    assert HETERO not in _rules(out) and any("$BS" in n for n in _not_checked(out)), out


# --- include ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("include", ["include:\n  - pd/pair.yml\n", "include:\n  - path: pd/pair.yml\n",
                                     "include:\n  - path: [pd/pair.yml]\n"])
def test_an_included_pair_is_read(tmp_path, capsys, include):
    code, out = _run(tmp_path, capsys, {"compose.yml": include,
                                        "pd/pair.yml": _pair(d_flags="--block-size 32")})
    assert code == 1 and HETERO in _rules(out), out


def test_services_split_between_the_file_and_an_include(tmp_path, capsys):
    main_text = "include:\n  - decode.yml\nservices:\n" + _service("prefill", "--block-size 16")
    code, out = _run(tmp_path, capsys, {"compose.yml": main_text,
                                        "decode.yml": "services:\n" + _service("decode", "--block-size 32", gpu="1")})
    assert code == 1 and HETERO in _rules(out), out


def test_an_include_of_an_include_is_followed_relative_to_its_file(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, {"compose.yml": "include:\n  - sub/top.yml\n",
                                        "sub/top.yml": "include:\n  - pair.yml\n",
                                        "sub/pair.yml": _pair(d_flags="--block-size 32")})
    assert code == 1 and HETERO in _rules(out), out


def test_a_missing_include_is_not_checked_with_its_name(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, {"compose.yml": "include:\n  - pd/pair.yml\n"})
    assert code not in (0, 4) and any("pd/pair.yml" in n for n in _not_checked(out)), out
    # A file whose own services are a pair still has them checked, and names the include it could not read.
    main_text = "include:\n  - more.yml\n" + _pair(d_flags="--block-size 32")
    code, out = _run(tmp_path, capsys, {"compose.yml": main_text})
    assert HETERO in _rules(out) and any("more.yml" in n for n in _not_checked(out)), out


def test_an_include_of_valid_services_is_a_control(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, {"compose.yml": "include:\n  - pair.yml\n", "pair.yml": _pair()})
    assert code == 0 and out["results"] and not _rules(out), out


# --- extends: {file: ...} -----------------------------------------------------------------------------------------


def _extending(base_file: str = "common.yml") -> str:
    return "services:\n" + _service("prefill", "--block-size 16") + (
        f"  decode:\n    extends: {{file: {base_file}, service: decode}}\n")


def test_extends_from_a_given_file_is_read(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, {"compose.yml": _extending(),
                                        "common.yml": "services:\n" + _service("decode", "--block-size 32", gpu="1")})
    assert code == 1 and HETERO in _rules(out), out


def test_extends_chains_across_files_relative_to_each(tmp_path, capsys):
    base = "services:\n  decode:\n    extends: {file: engine.yml, service: engine}\n"
    code, out = _run(tmp_path, capsys, {"compose.yml": _extending("base/common.yml"), "base/common.yml": base,
                                        "base/engine.yml": "services:\n" + _service("decode", "--block-size 32", gpu="1")
                                        .replace("  decode:\n", "  engine:\n", 1)})
    assert code == 1 and HETERO in _rules(out), out


def test_extends_from_a_missing_file_is_not_checked_with_its_name(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, {"compose.yml": _extending()})
    assert any(n.startswith(str(tmp_path)) and "common.yml" in n and "services.decode" in n
               for n in _not_checked(out)), out


def test_extends_of_a_valid_service_is_a_control(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, {"compose.yml": _extending(),
                                        "common.yml": "services:\n" + _service("decode", "--block-size 16", gpu="1")})
    assert code == 0 and not _rules(out), out


# --- env_file -----------------------------------------------------------------------------------------------------


def _env_file_pair(entry: str) -> str:
    text = _pair()
    for role in ("prefill", "decode"):
        text = text.replace(f"      - VLLM_NIXL_SIDE_CHANNEL_HOST={role}\n", "")
        text = text.replace(f"  {role}:\n    image:", f"  {role}:\n    env_file: {entry.format(role=role)}\n    image:")
    return text


@pytest.mark.parametrize("entry", ["{role}.env", "[{role}.env]", "[{{path: {role}.env}}]"])
def test_an_env_file_given_is_read(tmp_path, capsys, entry):
    files = {"compose.yml": _env_file_pair(entry), "prefill.env": "HF_HOME=/data\n", "decode.env": "HF_HOME=/data\n"}
    code, out = _run(tmp_path, capsys, files)
    # Neither file sets the side-channel host: vLLM's localhost, which the peer container cannot dial.
    assert "side-channel-host-not-routable" in _rules(out), out
    files.update({"prefill.env": "VLLM_NIXL_SIDE_CHANNEL_HOST=prefill\n", "decode.env": "VLLM_NIXL_SIDE_CHANNEL_HOST=decode\n"})
    code, out = _run(tmp_path, capsys, files)
    assert "side-channel-host-not-routable" not in _rules(out) and "env-from-not-in-files" not in _rules(out, "warning")


def test_an_env_file_not_given_may_set_anything(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, {"compose.yml": _env_file_pair("{role}.env")})
    assert "side-channel-host-not-routable" not in _rules(out), out
    assert "env-from-not-in-files" in _rules(out, "warning"), out


def test_an_optional_env_file_not_given_is_skipped(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, {"compose.yml": _env_file_pair("[{{path: {role}.env, required: false}}]")})
    assert "side-channel-host-not-routable" in _rules(out), out


def test_environment_wins_over_the_env_file(tmp_path, capsys):
    text = _pair().replace("    image:", "    env_file: common.env\n    image:")
    code, out = _run(tmp_path, capsys, {"compose.yml": text, "common.env": "VLLM_NIXL_SIDE_CHANNEL_HOST=localhost\n"})
    assert "side-channel-host-not-routable" not in _rules(out), out
