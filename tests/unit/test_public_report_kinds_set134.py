"""The kinds of held-out set 134 (issue 9, an unbiased sample, fourth draw): documentation pages scraped to Markdown.

- A Markdown document's indented code blocks (CommonMark 0.31 4.4: four spaces, no fence, no info string) that hold
  shell commands are read as its commands too (:func:`pdd_operator.compat.markdown_inputs.markdown_commands`), as its
  fenced ones are: docs.vllm.ai pages converted to Markdown hold their scripts so. List items' nested lines, lazy
  paragraph continuations and Python blocks are not shell and stay unread.
- A document's sections that each start a deployment of their own (a same-host pair, then a multi-machine setup;
  "Run 1P3D", then "Run 3P1D") are read as alternatives (:func:`pdd_operator.compat.script_inputs.
  section_alternatives`): their engines never pair, share a host or ports across sections.
"""

from __future__ import annotations

import json

from pdd_operator.compat.markdown_inputs import markdown_commands, markdown_sections
from tests.unit.cli_check import check_text

from .cli_check import rules


def _kv(role: str) -> str:
    return json.dumps({"kv_connector": "NixlConnector", "kv_role": role}, separators=(",", ":"))


def _engine(port: int, role: str, model: str = "meta-llama/Llama-3.1-8B-Instruct", extra: str = "",
            env: str = "", indent: str = "    ") -> str:
    lines = [f"{env}vllm serve {model} \\", f"  --port {port} \\", "  --enforce-eager \\"]
    if extra:
        lines.append(f"  {extra} \\")
    lines.append(f"  --kv-transfer-config '{_kv(role)}'")
    return "".join(f"{indent}{x}\n" for x in lines)


def _page(pin: str = "vllm==0.20.2", prefill_extra: str = "", decode_extra: str = "",
          model: str = "meta-llama/Llama-3.1-8B-Instruct") -> str:
    """A scraped documentation page: a pin and a same-host pair, all in indented code blocks."""
    return ("# Source: https://docs.example.org/pd/\n\n# Disaggregated serving\n\nInstall:\n\n"
            f"    pip install {pin}\n\n## Prefiller\n\n"
            + _engine(8100, "kv_producer", model, prefill_extra, "CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 ")
            + "\n## Decoder\n\n"
            + _engine(8200, "kv_consumer", model, decode_extra, "CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 ")
            + "\nThen send requests to a proxy.\n")


def _check(tmp_path, capsys, text: str, name: str = "page.md") -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, name)


def test_indented_blocks_of_a_page_are_its_commands():
    """Line N of the commands is line N of the page; prose stays empty."""
    text = _page()
    script = markdown_commands(text)
    assert script is not None
    lines = text.splitlines()
    for n, line in enumerate(script.splitlines()):
        if line:
            assert lines[n] == "    " + line
    assert "pip install vllm==0.20.2" in script and "Then send" not in script


def test_a_valid_indented_pair_is_judged(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _page())
    assert code == 0 and out["results"] and not rules(out, "error")


def test_a_broken_indented_pair_is_refused(tmp_path, capsys):
    """Another model and release, one role's --kv-cache-dtype a value no release accepts."""
    code, out = _check(tmp_path, capsys, _page("vllm==0.14.0", decode_extra="--kv-cache-dtype fp9",
                                              model="Qwen/Qwen3-8B"))
    assert code == 1 and "kv-cache-dtype-unknown" in rules(out, "error")


def test_a_python_block_is_not_read(tmp_path, capsys):
    """An indented block of Python (a proxy's source whose docstring shows how to run it) holds no command."""
    text = ("# Proxy\n\n    import argparse\n\n    def main():\n        '''python3 proxy.py --prefill "
            "localhost:8100 --decode localhost:8200'''\n        parser = argparse.ArgumentParser()\n")
    assert markdown_commands(text) is None
    code, _ = _check(tmp_path, capsys, text)
    assert code == 4


def test_list_items_and_lazy_lines_are_not_code():
    """A list item's nested lines and a paragraph's indented continuation are no indented code block."""
    text = ("-   `VLLM_NIXL_SIDE_CHANNEL_PORT`: the handshake port\n\n    -   Default: 5600\n\n"
            "Export the port with\n    export VLLM_NIXL_SIDE_CHANNEL_PORT=5600\n")
    assert markdown_commands(text) is None
    assert markdown_commands(text.replace("with\n", "with:\n\n")) is not None  # after a blank line: a block


def test_fenced_blocks_still_read_beside_indented_ones():
    text = "# A\n\n```bash\nexport X=1\n```\n\n    vllm serve Qwen/Qwen3-0.6B --port 8100\n"
    script = markdown_commands(text)
    assert script is not None and "export X=1" in script and "vllm serve Qwen/Qwen3-0.6B --port 8100" in script


def test_markdown_sections():
    text = "# Guide\n\n## Basic\n\n### Producer\nx\n## Multi\n```\n# not a heading\n```\n### Decoder\n"
    got = markdown_sections(text)
    assert got[0] == ("Guide",) and got[4] == ("Guide", "Basic", "Producer") and got[6] == ("Guide", "Multi")
    assert got[8] == ("Guide", "Multi") and got[10] == ("Guide", "Multi", "Decoder")


def _two_setups(fenced: bool) -> str:
    """A guide with a same-host pair, then a four-machine 2P2D setup on the hosts' own port 8000 and side channel
    5600 (each on its own machine): in fenced blocks or indented ones."""
    def block(body: str) -> str:
        return ("```bash\n" + body.replace("\n    ", "\n").lstrip() + "```\n") if fenced else body

    out = "# NixlConnector usage\n\n## Basic usage (same host)\n\n### Prefiller\n\n"
    out += block(_engine(8100, "kv_both", env="CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 "))
    out += "\n### Decoder\n\n"
    out += block(_engine(8200, "kv_both", env="CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 "))
    out += "\n### Proxy\n\n" + block("    python toy_proxy_server.py --prefiller-ports 8100 --decoder-ports 8200\n")
    out += "\n## Multi-instance setup\n\n### Prefillers on machines A and B\n\n"
    for n, role in ((1, "kv_producer"), (2, "kv_producer")):
        out += block(_engine(8000, role, extra="--tensor-parallel-size 8",
                             env=f"VLLM_NIXL_SIDE_CHANNEL_HOST=${{IP{n}}} VLLM_NIXL_SIDE_CHANNEL_PORT=5600 ")) + "\n"
    out += "### Decoders on machines C and D\n\n"
    for n, role in ((3, "kv_consumer"), (4, "kv_consumer")):
        out += block(_engine(8000, role, extra="--tensor-parallel-size 8",
                             env=f"VLLM_NIXL_SIDE_CHANNEL_HOST=${{IP{n}}} VLLM_NIXL_SIDE_CHANNEL_PORT=5600 ")) + "\n"
    return out


def test_sections_that_each_deploy_are_alternatives(tmp_path, capsys):
    """The same-host pair never pairs with the multi-machine decoders (whose side channel 5600 it would share)."""
    for fenced in (False, True):
        code, out = _check(tmp_path, capsys, "    pip install vllm==0.20.2\n\n" + _two_setups(fenced))
        assert code == 0, (fenced, rules(out, "error"))
        assert not rules(out, "error")
        assert all("a section of the document" in r["object"] for r in out["results"])


def test_one_deployment_split_over_subsections_stays_one(tmp_path, capsys):
    """Prefiller and decoder under sub-headings of one section are one pair, not two lone engines."""
    code, out = _check(tmp_path, capsys, _page())
    assert code == 0 and len(out["results"]) == 1 and not out["notChecked"]


def test_unreadable_kv_transfer_config_stops_an_engine_whose_role_cannot_be_told(tmp_path, capsys):
    """A --kv-transfer-config that is no JSON (a scraper's '}' or '', a shell's lost quoting) hides the role it was
    meant to give; vLLM's parser refuses the value on every release, so each such engine is an error, in a script
    and in a Pod, on a pinned release and on an unknown one."""
    for pin, value in (("pip install vllm==0.10.1.1\n", "'}'"), ("", "''"),
                       ("pip install vllm==0.20.2\n", "'{kv_role:kv_producer}'")):
        script = (pin + f"vllm serve Qwen/Qwen3-8B --port 8100 --kv-transfer-config {value} &\n"
                  f"vllm serve Qwen/Qwen3-8B --port 8200 --kv-transfer-config {value} &\nwait\n")
        code, out = _check(tmp_path, capsys, script, "run.sh")
        assert code == 1 and rules(out, "error") == {"kv-connector-missing"}, (pin, value, out)
        assert all("role cannot be told" in f["message"] for r in out["results"] for f in r["findings"])
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {name: qwen}\nspec:\n  containers:\n  - name: vllm\n"
           "    image: vllm/vllm-openai:v0.20.2\n    args: [serve, Qwen/Qwen3-8B, --kv-transfer-config, '}']\n")
    code, out = _check(tmp_path, capsys, pod, "pod.yaml")
    assert code == 1 and "kv-connector-missing" in rules(out, "error")


def test_a_readable_engine_whose_role_cannot_be_told_stays_not_checked(tmp_path, capsys):
    script = ("vllm serve Qwen/Qwen3-8B --port 8100 --kv-transfer-config '{\"kv_connector\":\"NixlConnector\"}' &\n"
              "vllm serve Qwen/Qwen3-8B --port 8200 --kv-transfer-config '{\"kv_connector\":\"NixlConnector\"}' &\n")
    code, out = _check(tmp_path, capsys, script, "run.sh")
    assert code != 1 and not rules(out, "error")


def test_a_template_filling_its_json_from_arguments_is_not_refused(tmp_path, capsys):
    """vllm-ascend's run_dp_template.sh fills its --kv-transfer-config from its arguments ($3): read with none given,
    the value is no JSON, but the script's other flags come from the same arguments, so nothing is promised."""
    script = ("#!/bin/bash\nvllm serve Qwen/Qwen3-8B --port $2 --tensor-parallel-size $(echo $1) \\\n"
              "  --kv-transfer-config '{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"kv_consumer\","
              "\"kv_connector_extra_config\":{\"decode\":{\"tp_size\":'\"$3\"'}}}'\n")
    code, out = _check(tmp_path, capsys, script, "run_dp_template.sh")
    assert code != 1 and not rules(out, "error")
