"""Diffs and patches of a deployment (a pull request's unified diff, a ``.diff`` / ``.patch`` file, a review thread's
```` ```diff ```` block in Markdown): the post-image of each hunk, read as the file it patches would be read.

A unified diff (GNU diffutils manual, "Unified Format"; ``git diff``) gives, per file, the ``--- a/path`` and ``+++
b/path`` header lines and hunks that start with ``@@ -l,s +l,s @@``; a hunk's lines start with ``' '`` (context), ``-``
(the pre-image only) or ``+`` (the post-image only). The post-image of a hunk is its context and ``+`` lines, from the
line the ``+l`` of its header names. A hunk is the whole post-image only where the file is new (``--- /dev/null``, or
``@@ -0,0 +1,N @@``); any other hunk is a part of a file this input does not hold, so its document (a YAML manifest, a
script) cannot be read whole (ai-dynamo/dynamo#8070's review thread: the decode worker's ``args`` line of
examples/backends/vllm/deploy/gaie/disagg.yaml, set 132).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: A hunk header (``@@ -144,7 +144,7 @@ spec:``): groups the pre-image's start and length, the post-image's start and
#: length (a length of 1 is left out, GNU diffutils "Detailed Unified").
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
#: A file header line: ``--- a/path`` (the pre-image) or ``+++ b/path`` (the post-image), a tab and a time stamp
#: after the name as diff -u writes it; ``/dev/null`` for a file created or deleted.
_FILE = re.compile(r"^(---|\+\+\+) (?:[ab]/)?([^\t\n]+?)(?:\t.*)?$")
#: ``git diff``'s line naming the file (``diff --git a/path b/path``).
_GIT = re.compile(r"^diff --git a/(\S+) b/(\S+)")
#: A Markdown fence that opens a diff or patch block (CommonMark 0.31.2 section 4.5; Linguist's ``diff`` / ``patch``).
_DIFF_FENCE = re.compile(r"^( *)(`{3,}|~{3,})[ \t]*(?:diff|patch|udiff)\b", re.I)
#: A line that is a path alone (``examples/backends/vllm/deploy/gaie/disagg.yaml``), as a review thread names the
#: file above its hunk.
_PATH_LINE = re.compile(r"^\s*`?((?:[\w.-]+/)*[\w.-]+\.[A-Za-z]\w*)`?\s*$")
#: The file name suffixes of diffs and patches (``git format-patch`` writes ``.patch``; ``diff -u > x.diff``).
DIFF_SUFFIXES = (".diff", ".patch")


@dataclass(frozen=True)
class Hunk:
    """One hunk's post-image.

    Attributes:
        file: the path of the file it patches (the ``+++`` header's, else the ``---`` one's, else a path named on the
            line above a Markdown diff block; ``""`` where none is named).
        header: its ``@@ ... @@`` header line.
        at: the line of the input its header is on (1-based).
        start: the post-image's line number of its first line.
        lines: the post-image's lines (context and ``+`` lines, their first character taken off).
        whole: the hunk is the whole post-image (a new file).
    """

    file: str
    header: str
    at: int
    start: int
    lines: tuple[str, ...]
    whole: bool

    @property
    def text(self) -> str:
        """The post-image as text whose line N is the patched file's line N (the lines above the hunk left empty)."""
        return "\n" * (self.start - 1) + "\n".join(self.lines) + "\n"


def diff_hunks(text: str, file: str = "", offset: int = 0) -> list[Hunk]:
    """The hunks of the unified diff ``text``, each with its post-image (:class:`Hunk`); ``[]`` where it holds no
    hunk header. ``file``: the path of the file patched until a file header names one; ``offset``: the line of the
    input ``text`` starts after (a Markdown block's fence). A hunk cut short (a review thread's excerpt) ends where the
    text does. Pure."""
    hunks: list[Hunk] = []
    new = False
    current: dict | None = None

    def close() -> None:
        if current is not None:
            hunks.append(Hunk(current["file"], current["header"], current["at"], current["start"],
                              tuple(current["lines"]), current["whole"]))

    lines = text.splitlines()
    for n, line in enumerate(lines, offset + 1):
        open_hunk = current is not None and current["left"] > 0  # a "--- x" line in it is a removed "-- x" line
        git = _GIT.match(line)
        header = _FILE.match(line) if not open_hunk else None
        if git is not None or header is not None:
            close()
            current = None
            if git is not None:
                file, new = git.group(2), False
            elif header.group(1) == "---":
                new = header.group(2) == "/dev/null"
                file = file if new else header.group(2)
            elif header.group(2) != "/dev/null":
                file = header.group(2)
            continue
        if (m := _HUNK.match(line)) is not None:
            close()
            old_start, old_len = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
            size = int(m.group(4) if m.group(4) is not None else 1)
            current = {"file": file, "header": m.group(0), "at": n, "start": max(int(m.group(3)), 1), "lines": [],
                       "whole": new or (old_start == 0 and old_len == 0), "left": size + old_len}
            continue
        if not open_hunk or line.startswith("\\"):  # past its last line; "\ No newline at end of file"
            continue
        if line[:1] == "-":
            current["left"] -= 1
            continue
        current["lines"].append(line[1:])
        current["left"] -= 1 if line[:1] == "+" else 2
    close()
    return hunks


def markdown_diff_hunks(text: str) -> list[Hunk]:
    """The hunks of the diff blocks (```` ```diff ````, ```` ```patch ````) of the Markdown ``text``, each block's
    file the one its own headers name, else a path alone on the line above its fence (a review thread's excerpt);
    ``at`` is the line of the Markdown file. An unclosed block runs to the end of the text. Pure."""
    lines = text.splitlines()
    hunks: list[Hunk] = []
    i = 0
    while i < len(lines):
        m = _DIFF_FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        above = next((line for line in reversed(lines[max(0, i - 2):i]) if line.strip()), "")
        named = _PATH_LINE.match(above)
        j = i + 1
        while j < len(lines) and not (lines[j].lstrip(" ").startswith(m.group(2)) and not lines[j].strip(" `~")):
            j += 1
        body = "\n".join(line[min(len(m.group(1)), len(line) - len(line.lstrip(" "))):] for line in lines[i + 1:j])
        hunks += diff_hunks(body, named.group(1) if named else "", offset=i + 1)
        i = j + 1
    return hunks
