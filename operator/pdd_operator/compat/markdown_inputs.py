"""Markdown documents as inputs: the commands of a README, a guide, an issue or pull request body, read as the shell
script they make, with line N of the script at line N of the file.

What users have of a prefill/decode deployment is often prose: a README that starts the engines step by step, a
guide whose commands sit in fences inside list items or MkDocs tabs, an issue that pastes a terminal session, a
documentation page converted to Markdown whose scripts are indented code blocks. :func:`markdown_commands` takes
their commands (CommonMark 0.31.2: fenced and indented code blocks, block quotes, inline code) and leaves the rest
empty, so the shell script reader (:mod:`pdd_operator.compat.script_inputs`) reads them and its findings point at
the file's own lines; :func:`markdown_sections` gives each line the headings it falls under, so sections that each
deploy are read as alternatives, not as one deployment. A diff block is no command
(:mod:`pdd_operator.compat.diff_inputs` reads those). Pure functions.
"""

from __future__ import annotations

import re

from pdd_operator.compat.text_inputs import text_format, transcript_commands

#: A Markdown code fence (CommonMark 0.31.2, section 4.5 "Fenced code blocks": a run of at least three backticks or
#: tildes, then an optional info string whose first word names the language); group 1 is its indentation, group 2 the
#: run, group 3 the language. Any indentation is taken, not only the three spaces of a top-level fence: a fence inside
#: a list item or a MkDocs content tab (``=== "Docker"``) is indented by its container (CommonMark section 5.2; set
#: 133's loxilb guides), and a four-space indented block that happens to hold a fence line is rare in a README.
_FENCE = re.compile(r"^( *)(`{3,}|~{3,})[ \t]*([^`\s]*)")
#: Block quote markers that start a line (CommonMark 0.31.2, section 5.1 "Block quotes": ``>`` and an optional
#: space, nested quotes repeating them), as a reply that quotes an earlier comment's commands writes them
#: (vllm-project/vllm-ascend#2210, set 132).
_QUOTE = re.compile(r"^ {0,3}(?:> ?)+")
#: The info strings of the fenced blocks that hold shell commands: none (a bare fence, as most issues paste
#: commands), ``text`` (as many READMEs mark a command to copy), and the shell and terminal languages of GitHub's
#: Linguist (``bash``, ``sh``, ``shell``, ``zsh``, ``console``, ``shell-session``); a YAML, JSON, Python or diff block
#: is no command.
_SHELL_FENCES = frozenset({"", "text", "bash", "sh", "shell", "zsh", "console", "shell-session", "shellsession",
                           "sh-session"})
#: A vLLM server command that starts a line of Markdown prose outside any code block (``vllm serve``, ``python3 -m
#: vllm.entrypoints.openai.api_server``, after inline ``NAME=value`` assignments), as a comment that pastes its
#: commands as plain paragraphs writes them (vllm-project/vllm-ascend#2210, set 132).
_PROSE_COMMAND = re.compile(r"^\s*(?:[A-Za-z_]\w*=\S*\s+)*(?:\S*/)?(?:python3?\s+-m\s+)?vllm(?:-rs)?"
                            r"(?:\s+serve\b|\.entrypoints\.)")
#: A line that is one inline code span alone, or a list item's (``8. `compoundai serve disaggregated.client:Client```):
#: the steps READMEs number one command each (triton_distributed's README-NOVA-INIT.md, set 130). Group 1 is the code.
_INLINE_STEP = re.compile(r"^\s*(?:(?:\d+[.)]|[-*+])\s+)?`([^`]+)`\s*$")
#: The file name suffixes of Markdown (the CommonMark spec's and GitHub's ``.md`` and ``.markdown``).
MARKDOWN_SUFFIXES = (".md", ".markdown")


#: A line of a Markdown indented code block (CommonMark 0.31 4.4: four or more spaces, or a tab, before it); group 1
#: is the line less that indentation.
_INDENTED = re.compile(r"^(?: {4}|\t)(.*)$")
#: An ATX heading line (CommonMark 4.2), after which an indented code block may start without a blank line.
_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")
#: A package install line (``pip install vllm==0.12.0``, ``uv pip install ...``): a command a shell runs, whose pin
#: names the release the page's engines run.
_PIP_INSTALL = re.compile(r"^\s*(?:uv\s+)?pip3?\s+install\s", re.M)
#: An ATX heading's level (group 1, its ``#`` run) and title (group 2).
_ATX_TITLE = re.compile(r"^ {0,3}(#{1,6})(?:\s+(.*?))?\s*$")


def _indented_shell_blocks(lines: list[str]) -> dict[int, str]:
    """The lines of the indented code blocks of the Markdown document ``lines`` (CommonMark 0.31 4.4; outside fenced
    blocks; a block starts after a blank line, a heading or the document's start, since an indented line cannot
    interrupt a paragraph, and runs on through blank lines while indented lines follow) whose text is shell commands
    (:func:`text_format` "shell script", or a ``pip install`` line: :data:`_PIP_INSTALL`): index -> the line less
    its indentation. Documentation pages
    converted to Markdown (docs.vllm.ai pages scraped to text, set 134) hold their scripts so, with no fence and no
    info string. List items' nested lines and Python or YAML blocks are not shell and stay out. Pure."""
    blocks: list[list[int]] = []
    fence: str | None = None
    current: list[int] = []
    previous = ""
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= len(fence) and not m.group(3):
                fence = None
        elif current and (_INDENTED.match(line) or not line.strip()):
            current.append(i)
        elif _INDENTED.match(line) and line.strip() and (not previous.strip() or _ATX_HEADING.match(previous)):
            current = [i]
            blocks.append(current)
        else:
            current = []
            if m:
                fence = m.group(2)
        previous = line
    out: dict[int, str] = {}
    for block in blocks:
        while block and not lines[block[-1]].strip():
            block.pop()
        body = {i: (m.group(1) if (m := _INDENTED.match(lines[i])) else "") for i in block}
        text = "\n".join(body.values()) + "\n"
        if text_format(text) == "shell script" or _PIP_INSTALL.search(text):
            out.update(body)
    return out


def markdown_sections(text: str) -> list[tuple[str, ...]]:
    """For each line of the Markdown document ``text`` (index 0 for line 1), the titles of the ATX headings
    (CommonMark 0.31 4.2) it falls under, outermost first: a heading of level L ends every section of level L or
    deeper. Lines of fenced code blocks open no section. Pure."""
    out: list[tuple[str, ...]] = []
    path: list[tuple[int, str]] = []
    fence: str | None = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= len(fence) and not m.group(3):
                fence = None
        elif m:
            fence = m.group(2)
        elif (h := _ATX_TITLE.match(line)) is not None:
            level = len(h.group(1))
            path = [p for p in path if p[0] < level] + [(level, (h.group(2) or "").strip())]
        out.append(tuple(title for _, title in path))
    return out


def markdown_commands(text: str) -> str | None:
    """The shell commands of the Markdown ``text`` (a README, an issue or pull request body, a guide) as one shell
    script whose line N is the file's line N: the lines of its fenced code blocks with no info string or a shell one
    (:data:`_SHELL_FENCES`, the fence's indentation taken off each line, and a block that is a pasted terminal session
    reduced to its commands by :func:`transcript_commands`), the inline code spans that make up a line or a list item
    alone (:data:`_INLINE_STEP`), and the vLLM server commands written as prose outside any block
    (:data:`_PROSE_COMMAND`, with the lines a backslash or an open single quote continues them onto), the lines of
    its indented code blocks that hold shell commands (:func:`_indented_shell_blocks`); block quote
    markers are removed first (:data:`_QUOTE`), and every other line (prose, fences, YAML or Python blocks) is left
    empty. ``None`` where no such line holds a command. An unclosed block runs to the end of the text, or of the block
    quote it opened in (CommonMark 0.31.2, sections 4.5 and 5.1), as a copy cut inside a command is. Pure."""
    out: list[str] = []
    block: list[str] = []  # the lines of the open shell block
    fence: str | None = None
    indent = 0
    shell = prose = quoted = in_quote = False

    def close() -> None:
        if block:
            session = transcript_commands("\n".join(block) + "\n")
            out.extend(session.splitlines() if session is not None else block)
            block.clear()

    indented = _indented_shell_blocks(text.splitlines())
    for i, raw in enumerate(text.splitlines()):
        if fence is None and i in indented:  # an indented code block's shell line (a docs page converted to Markdown)
            out.append(indented[i])
            continue
        line = _QUOTE.sub("", raw, count=1)
        if fence is not None and in_quote and line == raw:  # the block quote ended, and the code block in it
            fence = None
            close()
        m = _FENCE.match(line)
        if fence is None and m is not None:
            indent, fence, shell, in_quote = len(m.group(1)), m.group(2), m.group(3).lower() in _SHELL_FENCES, line != raw
            out.append("")
        elif fence is not None and m is not None and m.group(2)[0] == fence[0] and len(m.group(2)) >= len(fence) \
                and not m.group(3):
            fence = None
            close()
            out.append("")
        elif fence is not None and shell:
            block.append(line[min(indent, len(line) - len(line.lstrip(" "))):])
        elif fence is not None:
            out.append("")
        elif prose or _PROSE_COMMAND.match(line):
            out.append(line)
            quoted ^= line.count("'") % 2 == 1  # a --kv-transfer-config '{...}' JSON written over several lines
            prose = quoted or line.rstrip().endswith("\\")
        elif (step := _INLINE_STEP.match(line)) is not None:
            out.append(step.group(1))
        else:
            out.append("")
    close()
    return "\n".join(out) + "\n" if any(line.strip() for line in out) else None
