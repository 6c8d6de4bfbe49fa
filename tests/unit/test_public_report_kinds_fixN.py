"""Kinds of set 132's blind misses (fix N).

- A diff or patch of a P/D deployment (a ``.diff`` / ``.patch`` file, a Markdown ```` ```diff ```` block: a pull
  request's review thread, ai-dynamo/dynamo#8070's decode worker hunk): the post-image of each hunk (context and ``+``
  lines, ``-`` lines dropped) is read as the patched file would be. A new file's post-image is whole and is read (a
  manifest's engines, a script's commands: valid or refused as the file itself is); a hunk of an existing file is a
  part of it, so where it shows P/D the deployment is "not checked", naming the diff's file and hunk, never "nothing to
  check". A diff that only touches documentation or code stays nothing to check.
- A container of a vLLM image started with a shell (or cut before its command) in a guide or script that shows P/D,
  the engines started by hand inside it later (vllm-project/vllm-ascend#857's guide): "not checked", naming the
  container and the words seen. Without P/D words, or with a non-vLLM image, it stays nothing to check.
"""

from __future__ import annotations

import yaml

from pdd_operator.compat.diff_inputs import diff_hunks, markdown_diff_hunks
from tests.unit.cli_check import check_text, rules
from tests.unit.test_guards_034 import _dynamo, _lws, _pair

NIXL_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
NIXL_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
MODEL = "Qwen/Qwen3-0.6B"


def _new_file(path: str, text: str) -> str:
    """A git diff creating ``path`` with ``text``."""
    lines = text.splitlines()
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1234567\n--- /dev/null\n"
            f"+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))


def _hunk(path: str, start: int, context: list[str], removed: list[str], added: list[str]) -> str:
    """A git diff hunk of an existing ``path``: the ``context`` lines, then ``removed`` replaced by ``added``."""
    old, new = len(context) + len(removed), len(context) + len(added)
    return (f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -{start},{old} +{start},{new} @@ spec:\n" + "".join(f" {c}\n" for c in context)
            + "".join(f"-{r}\n" for r in removed) + "".join(f"+{a}\n" for a in added))


def _objects(out: dict) -> str:
    return repr(out)


# --- the post-image ----------------------------------------------------------------------------------------------


def test_post_image_drops_removed_lines_and_keeps_line_numbers():
    text = _hunk("deploy/pd.yaml", 40, ["        args:"], ["        - --block-size 16", "        -- removed"],
                 ["        - --block-size 32"])
    (h,) = diff_hunks(text)
    assert (h.file, h.start, h.whole) == ("deploy/pd.yaml", 40, False)
    assert h.lines == ("        args:", "        - --block-size 32")
    assert h.text.splitlines()[39:] == ["        args:", "        - --block-size 32"]


def test_new_file_is_whole_and_markdown_block_takes_the_path_above():
    (h,) = diff_hunks(_new_file("run.sh", "vllm serve m\n"))
    assert h.whole and h.start == 1 and h.lines == ("vllm serve m",)
    md = "Review comment\n\ncharts/pd/values.yaml\n```diff\n@@ -3,2 +3,2 @@\n a: 1\n-b: 2\n+b: 3\n```\nthanks\n"
    (m,) = markdown_diff_hunks(md)
    assert (m.file, m.at, m.start, m.lines, m.whole) == ("charts/pd/values.yaml", 5, 3, ("a: 1", "b: 3"), False)


# --- partial hunks of P/D deployments: not checked, naming the diff's file and hunk ------------------------------


def _args_hunk(path: str, kv: str, start: int = 144) -> str:
    return _hunk(path, start, ["      containers:", "      - name: vllm", "        args:"],
                 ["        - --block-size 16"], ["        - --block-size 16", f"        - --kv-transfer-config={kv}"])


def test_partial_hunk_of_a_deployment_is_not_checked(tmp_path, capsys):
    code, out = check_text(tmp_path, capsys, _args_hunk("deploy/prefill.yaml", NIXL_P), "pr.diff")
    assert code == 3, out
    assert "deploy/prefill.yaml" in _objects(out) and "@@ -144,4 +144,5 @@" in _objects(out)
    assert "lines 144-148" in _objects(out)


def test_partial_hunk_of_an_lws_patch_is_not_checked(tmp_path, capsys):
    text = _hunk("lws/decode.yaml", 12, ["    workerTemplate:", "      spec:", "        containers:"], [],
                 ["        - name: vllm", "          image: vllm/vllm-openai:v0.11.0",
                  f"          args: [\"{MODEL}\", \"--kv-transfer-config\", '{NIXL_D}']"])
    code, out = check_text(tmp_path, capsys, text, "0001-decode.patch")
    assert code == 3, out
    assert "lws/decode.yaml" in _objects(out)


def test_dynamo_graph_hunk_in_a_markdown_review_thread_is_not_checked(tmp_path, capsys):
    old = '          - "python3 -m dynamo.vllm --model $MODEL_PATH --block-size 16"'
    new = '          - "python3 -m dynamo.vllm --model $MODEL_PATH --is-decode-worker --block-size 16"'
    md = ("reviewer · review thread\nexamples/deploy/disagg.yaml\n```diff\n@@ -80,3 +80,3 @@ spec:\n"
          "           args:\n-" + old[1:] + "\n+" + new[1:] + "\n```\n")
    md = md.replace("-" + old[1:], "-" + old).replace("+" + new[1:], "+" + new)
    code, out = check_text(tmp_path, capsys, md, "thread.md")
    assert code == 3, out
    assert "examples/deploy/disagg.yaml" in _objects(out) and "line 4" in _objects(out)


def test_partial_hunk_of_a_script_is_not_checked(tmp_path, capsys):
    text = _hunk("run_pd.sh", 20, ["# decode"], ["vllm serve m --port 8200"],
                 [f"vllm serve m --port 8200 --kv-transfer-config '{NIXL_D}'"])
    code, out = check_text(tmp_path, capsys, text, "change.diff")
    assert code == 3, out
    assert "run_pd.sh" in _objects(out)


# --- whole post-images (new files): read as the file itself ------------------------------------------------------


def _deployments(p_extra=()):
    return yaml.safe_dump_all(_pair(MODEL, "0.11.0", ["--kv-transfer-config", NIXL_P, *p_extra],
                                    ["--kv-transfer-config", NIXL_D]), sort_keys=False)


def test_new_deployment_pair_is_read_valid(tmp_path, capsys):
    code, out = check_text(tmp_path, capsys, _new_file("deploy/pd.yaml", _deployments()), "pr.diff")
    assert code == 0, out
    assert out["results"]


def test_new_deployment_pair_is_read_broken(tmp_path, capsys):
    code, out = check_text(tmp_path, capsys, _new_file("deploy/pd.yaml", _deployments(["--kv-cache-dtype", "fp8"])),
                           "pr.patch")
    assert code == 1, out
    assert "kv-cache-dtype-mismatch" in rules(out, "error")


def test_new_lws_and_dynamo_graph_are_read(tmp_path, capsys):
    lws = yaml.safe_dump_all(_lws(MODEL, "0.11.0", ["--kv-transfer-config", NIXL_P, "--kv-cache-dtype", "fp8"],
                                  ["--kv-transfer-config", NIXL_D], 1, 1), sort_keys=False)
    code, out = check_text(tmp_path, capsys, _new_file("lws.yaml", lws), "a.diff")
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out
    graph = yaml.safe_dump(_dynamo(MODEL, ["--kv-cache-dtype", "fp8"], [], 1, 1), sort_keys=False)
    code, out = check_text(tmp_path, capsys, _new_file("graph.yaml", graph), "b.diff")
    assert code in (0, 1, 3) and out.get("results"), out  # read as the graph itself is, not nothing to check
    direct = check_text(tmp_path, capsys, graph, "graph.yaml")
    assert code == direct[0]


def test_new_script_is_read_valid_and_broken(tmp_path, capsys):
    script = ("#!/bin/bash\npip install vllm==0.11.0\n"
              f"CUDA_VISIBLE_DEVICES=0 vllm serve {MODEL} --port 8100EXTRA --kv-transfer-config '{NIXL_P}' &\n"
              f"CUDA_VISIBLE_DEVICES=1 vllm serve {MODEL} --port 8200 --kv-transfer-config '{NIXL_D}' &\n")
    ok = check_text(tmp_path, capsys, _new_file("pd.sh", script.replace("EXTRA", "")), "ok.diff")
    direct = check_text(tmp_path, capsys, script.replace("EXTRA", ""), "pd.sh")
    assert ok[0] == direct[0] and ok[0] != 4, ok
    code, out = check_text(tmp_path, capsys, _new_file("pd.sh", script.replace("EXTRA", " --kv-cache-dtype fp8")), "x.diff")
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out


# --- diffs that show no P/D: nothing to check --------------------------------------------------------------------


def test_docs_only_diff_is_nothing_to_check(tmp_path, capsys):
    text = _hunk("docs/disagg.md", 10, ["## Disaggregated prefill", ""], ["The prefil and decode run apart."],
                 ["The prefill and decode engines run apart (see the NixlConnector guide)."])
    code, out = check_text(tmp_path, capsys, text, "docs.diff")
    assert code == 4, out


def test_removed_kv_config_is_not_read(tmp_path, capsys):
    text = _hunk("deploy/agg.yaml", 30, ["        args:"], [f"        - --kv-transfer-config={NIXL_P}"],
                 ["        - --enable-prefix-caching"])
    code, out = check_text(tmp_path, capsys, text, "agg.diff")
    assert code == 4, out


# --- a container that starts no engine, in a guide that shows P/D ------------------------------------------------


def _guide(title: str, image: str, command: str) -> str:
    return (f"# {title}\n\nStart the container, then the engines inside it.\n\n```bash\n"
            f"export IMAGE={image}\ndocker run --rm -it \\\n--name pd_node \\\n--device /dev/davinci0 \\\n"
            f"-v /usr/local/dcmi:/usr/local/dcmi \\\n$IMAGE {command}\n```\n")


def test_guide_docker_run_shell_is_not_checked(tmp_path, capsys):
    for title, image, command in (("How to use disaggregated_prefill", "quay.io/ascend/vllm-ascend:v0.9.1", "bash"),
                                  ("1P1D on two GPUs", "vllm/vllm-openai:v0.11.0", "bash"),
                                  ("PD separation guide", "vllm/vllm-openai:v0.11.0", "sleep infinity")):
        if command.startswith("sleep"):  # --entrypoint replaces the image's vllm serve
            text = _guide(title, image, "").replace("$IMAGE ", "--entrypoint sleep $IMAGE infinity")
        else:
            text = _guide(title, image, command)
        code, out = check_text(tmp_path, capsys, text, "guide.md")
        assert code == 3, (title, out)
        assert "pd_node" in _objects(out)


def test_guide_cut_before_image_is_not_checked(tmp_path, capsys):
    text = _guide("How to use disaggregated prefill", "quay.io/ascend/vllm-ascend:main", "bash")
    text = text.replace("$IMAGE bash\n", "-v /etc/ascend_inst\n")
    code, out = check_text(tmp_path, capsys, text, "guide.md")
    assert code == 3, out


def test_script_docker_run_shell_with_pd_comment_is_not_checked(tmp_path, capsys):
    text = ("#!/bin/bash\n# 1P1D: the prefill and decode engines are started inside this container\n"
            "docker run -d --name pd --gpus all vllm/vllm-openai:v0.11.0 bash -lc 'sleep infinity'\n")
    code, out = check_text(tmp_path, capsys, text, "start.sh")
    assert code == 3, out


def test_docker_run_without_pd_or_without_vllm_stays_nothing_to_check(tmp_path, capsys):
    code, out = check_text(tmp_path, capsys, _guide("Run vLLM on Ascend", "quay.io/ascend/vllm-ascend:main", "bash"),
                           "guide.md")
    assert code == 4, out
    code, out = check_text(tmp_path, capsys, _guide("Disaggregated prefill: the metadata store", "redis:7", ""),
                           "guide.md")
    assert code == 4, out


def test_hunk_of_vllm_source_code_is_nothing_to_check(tmp_path, capsys):
    text = _hunk("vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py", 200,
                 ["    def __init__(self, vllm_config):"], ["        role = vllm_config.kv_transfer_config.kv_role"],
                 ["        role = vllm_config.kv_transfer_config.kv_role  # kv_producer or kv_consumer"])
    code, out = check_text(tmp_path, capsys, text, "nixl.patch")
    assert code == 4, out
