"""Kinds found by held-out set 132 (an unbiased sample: issue bodies, comments and PR descriptions pasted as found).

- A Markdown file given as an input (an issue's or PR's text, a README, a guide) is read for its commands: the lines of
  its fenced code blocks with no info string or a shell one, block quote markers removed (a reply quoting an earlier
  comment), and vLLM server commands written as prose outside any block (with the lines a backslash or an open single
  quote continues them onto). Before, Markdown only tied image tags to Dockerfiles, so every pasted P/D pair was
  "nothing to check" (exit 4): Mooncake issue #201's V0 MooncakeStoreConnector pair, vllm-ascend #2210's quoted
  LLMDataDistCMgrConnector pair. A Markdown file found in a folder still only ties tags (a repository's README is
  documentation, not its deployment), and YAML, Python or diff blocks are not commands.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from pdd_operator.compat.markdown_inputs import markdown_commands

PIN = "pip install vllm=={version}"
PREFILL = ("CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve Qwen/Qwen3-0.6B --port 8100{extra} "
           "--kv-transfer-config '{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_producer\"}}'")
DECODE = ("CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve Qwen/Qwen3-0.6B --port 8200 "
          "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_consumer\"}'")


def _check(capsys, path):
    code = main(["check", str(path), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def _errors(report):
    return {f["rule"] for r in report.get("results", []) for f in r.get("findings", []) if f["severity"] == "error"}


def _fenced(fence: str, lang: str, body: str) -> str:
    return f"{fence}{lang}\n{body}\n{fence}\n"


def _issue(version: str, extra: str, *, fence: str = "```", lang: str = "", quote: str = "") -> str:
    """An issue body: prose, the pin and each engine in its own block, every line behind ``quote``."""
    text = ("I run 1P1D on one host with these commands.\n\n" + _fenced(fence, lang, PIN.format(version=version))
            + "\nPrefill Server:\n" + _fenced(fence, lang, PREFILL.format(extra=extra))
            + "\nDecode Server:\n" + _fenced(fence, lang, DECODE) + "\nThe decode hangs on the first request.\n")
    return "".join(quote + line + "\n" for line in text.splitlines())


@pytest.mark.parametrize(("fence", "lang", "quote"), [
    ("```", "", ""),            # a bare fence, as most issues paste commands (kvcache-ai/Mooncake#201)
    ("```", "bash", ""),
    ("```", "shell", ""),
    ("~~~", "sh", ""),           # tildes (CommonMark 4.5)
    ("````", "", ""),            # a longer run
    ("```", "", "> "),          # a reply quoting the commands (vllm-project/vllm-ascend#2210)
    ("```", "", "> > "),        # quoted twice
])
@pytest.mark.parametrize(("version", "extra", "rule"), [
    ("0.11.0", " --kv-cache-dtype fp8", "kv-cache-dtype-mismatch"),
    ("0.10.1.1", " --block-size 32", "block-size-hetero-unsupported"),
    ("0.11.0", "", None),
])
def test_a_pd_pair_pasted_in_markdown_blocks_is_checked(tmp_path, capsys, fence, lang, quote, version, extra, rule):
    path = tmp_path / "issue.md"
    path.write_text(_issue(version, extra, fence=fence, lang=lang, quote=quote))
    code, report = _check(capsys, path)
    if rule is None:
        assert code == 0 and not _errors(report) and not report["notChecked"], report
    else:
        assert code == 1 and rule in _errors(report), report
    assert f"vLLM {version}" in json.dumps(report) or report["results"][0]["vllmVersion"].startswith(version[:4])


def test_a_console_block_is_read_without_its_prompts(tmp_path, capsys):
    body = "\n".join(["$ " + PIN.format(version="0.11.0"), "$ " + PREFILL.format(extra=" --kv-cache-dtype fp8"),
                      "INFO 12-01 engine started", "$ " + DECODE])
    path = tmp_path / "README.markdown"
    path.write_text("## Run\n\n" + _fenced("```", "console", body))
    code, report = _check(capsys, path)
    assert code == 1 and "kv-cache-dtype-mismatch" in _errors(report), report


def test_vllm_commands_written_as_prose_are_read_with_their_continuations(tmp_path, capsys):
    """vllm-project/vllm-ascend#2210 writes the two vllm serve lines as paragraphs, continued by backslashes onto a
    --kv-transfer-config JSON that spans lines inside single quotes."""
    def engine(role: str, gpu: int, port: int, extra: str) -> str:
        return (f"CUDA_VISIBLE_DEVICES={gpu} VLLM_NIXL_SIDE_CHANNEL_PORT={5600 + gpu} vllm serve Qwen/Qwen3-0.6B \\\n"
                f"  --port {port}{extra} \\\n  --kv-transfer-config \\\n  '{{\"kv_connector\": \"NixlConnector\",\n"
                f"  \"kv_role\": \"{role}\"\n  }}'\n")
    text = ("prefill\n\n" + engine("kv_producer", 0, 8100, " --block-size 32") + "decode\n\n"
            + engine("kv_consumer", 1, 8200, "") + "\nproxy\n\npython toy_proxy_server.py --port 8192\n")
    path = tmp_path / "comment.md"
    path.write_text(_fenced("```", "", PIN.format(version="0.10.1.1")) + "\n" + text)
    code, report = _check(capsys, path)
    assert code == 1 and "block-size-hetero-unsupported" in _errors(report), report


def test_the_v0_mooncake_store_pair_of_an_issue_comment_is_judged_on_its_release(tmp_path, capsys):
    """kvcache-ai/Mooncake#201: VLLM_USE_V1=0 MooncakeStoreConnector, registered through 0.10.0 and gone in 0.10.1.1."""
    line = ("MOONCAKE_CONFIG_PATH=./mooncake.json VLLM_USE_V1=0 python3 -m vllm.entrypoints.openai.api_server "
            "--model Qwen/Qwen3-0.6B --port 8100 --max-model-len 1000 --kv-transfer-config "
            "'{{\"kv_connector\":\"MooncakeStoreConnector\",\"kv_role\":\"{role}\"}}' --tensor-parallel-size 2")
    for version, want in (("0.10.0", 0), ("0.10.1.1", 1)):
        path = tmp_path / f"mooncake-{version}.md"
        path.write_text(_fenced("```", "", PIN.format(version=version)) + "\nPrefill Server:\n"
                        + _fenced("```", "", line.format(role="kv_producer")) + "\nDecode Server:\n"
                        + _fenced("```", "", line.format(role="kv_consumer")))
        code, report = _check(capsys, path)
        assert code == want, report
        assert want == 0 or "kv-connector-unregistered" in _errors(report), report


@pytest.mark.parametrize("lang", ["yaml", "json", "python", "diff", "dockerfile"])
def test_blocks_that_are_no_commands_are_not_read(tmp_path, capsys, lang):
    body = "\n".join([PIN.format(version="0.11.0"), PREFILL.format(extra=" --kv-cache-dtype fp8"), DECODE])
    path = tmp_path / "notes.md"
    path.write_text("# Notes\n\n" + _fenced("```", lang, body))
    code, report = _check(capsys, path)
    assert code == 4 and not report["results"], report


def test_a_readme_found_in_a_folder_only_ties_tags(tmp_path, capsys):
    """A folder's README is its documentation: its commands are not taken for the folder's deployment."""
    (tmp_path / "README.md").write_text(_issue("0.11.0", " --kv-cache-dtype fp8"))
    code, report = _check(capsys, tmp_path)
    assert code == 2 and report["inputErrors"] and not report["results"], report


def test_markdown_commands_keep_line_numbers_and_read_an_unclosed_block_to_the_end():
    text = "# t\n\n> ```\n> vllm serve a \\\n>   --port 1\n\nprose vllm serve is not a command here\n```\nvllm serve b"
    got = markdown_commands(text)
    assert got is not None
    lines = got.splitlines()
    assert len(lines) == len(text.splitlines())
    assert lines[3] == "vllm serve a \\" and lines[4] == "  --port 1" and lines[6] == "" and lines[8] == "vllm serve b"
    assert markdown_commands("# only prose\n\n```yaml\nkind: Pod\n```\n") is None
