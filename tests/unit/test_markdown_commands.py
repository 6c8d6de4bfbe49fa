"""The one Markdown reader (:func:`pdd_operator.compat.markdown_inputs.markdown_commands`), where set 132's and fix K's
readers met: fences at any indentation (list items, MkDocs content tabs), a pasted terminal session reduced to its
commands block by block, inline one-command steps, prose vllm commands, block quotes; line numbers kept."""

from __future__ import annotations

from pdd_operator.compat.markdown_inputs import markdown_commands


def _lines(text: str) -> list[str]:
    script = markdown_commands(text)
    assert script is not None
    assert len(script.splitlines()) == len(text.splitlines())  # line N of the script is line N of the file
    return script.splitlines()


def test_a_fence_inside_a_mkdocs_tab_or_list_item_is_read_without_its_indentation():
    text = ('=== "Prefill node"\n\n    ```bash\n    vllm serve Qwen/Qwen3-8B \\\n      --port 8100\n    ```\n\n'
            '1. Start decode:\n\n   ```sh\n   vllm serve Qwen/Qwen3-8B --port 8200\n   ```\n')
    lines = _lines(text)
    assert lines[3] == "vllm serve Qwen/Qwen3-8B \\" and lines[4] == "  --port 8100"
    assert lines[10] == "vllm serve Qwen/Qwen3-8B --port 8200"


def test_a_console_block_loses_its_output_but_a_plain_block_beside_it_keeps_every_command():
    text = ("```console\n$ pip install vllm==0.9.2\nSuccessfully installed vllm-0.9.2\n```\n"
            "```bash\nvllm serve m --port 8100\nvllm serve m --port 8200\n```\n")
    lines = _lines(text)
    assert lines[1] == "pip install vllm==0.9.2" and lines[2] == ""
    assert lines[5] == "vllm serve m --port 8100" and lines[6] == "vllm serve m --port 8200"


def test_steps_prose_commands_and_quotes_are_read_and_other_blocks_are_not():
    text = ("8. `compoundai serve disaggregated.client:Client`\n"
            "> ```\n> vllm serve m --port 8100\n> ```\n"
            "VLLM_USE_V1=1 vllm serve m --port 8200 \\\n  --max-model-len 4096\n"
            "```yaml\nkind: Pod\n```\n")
    lines = _lines(text)
    assert lines[0] == "compoundai serve disaggregated.client:Client"
    assert lines[2] == "vllm serve m --port 8100"
    assert lines[4].startswith("VLLM_USE_V1=1 vllm serve") and lines[5] == "  --max-model-len 4096"
    assert lines[7] == ""


def test_prose_and_yaml_alone_hold_no_commands():
    assert markdown_commands("# P/D with prefill and decode\n\nSome prose.\n\n```yaml\nkind: Pod\n```\n") is None
