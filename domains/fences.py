"""Markdown code fences in model output: the one parser shared by every domain that reads them.

    fenced_blocks("Run this:\\n```bash\\nls\\n```\\n")   # -> [("bash", "ls")]

A fence opens on a line of three backticks with an optional language tag and closes on a
line of three backticks alone; blocks pair up in order, so the closing fence of one block
is never read as the opening of the next. CRLF line ends are accepted. A block left open
at the end (a reply cut by the token limit) runs to the end of the text.

Not covered: tilde fences, fences longer than three backticks, nested fences.
"""

from __future__ import annotations

import re

_OPEN = re.compile(r"^\s*```[ \t]*([\w+.-]*)[ \t]*$")
_CLOSE = re.compile(r"^\s*```[ \t]*$")


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """The (language tag in lower case, body) of every fenced block, in order."""
    if not isinstance(text, str):
        return []
    blocks: list[tuple[str, str]] = []
    lang, body = None, []
    for line in text.replace("\r\n", "\n").split("\n"):
        if lang is None:
            m = _OPEN.match(line)
            if m:
                lang, body = m.group(1).lower(), []
        elif _CLOSE.match(line):
            blocks.append((lang, "\n".join(body)))
            lang = None
        else:
            body.append(line)
    if lang is not None:
        blocks.append((lang, "\n".join(body)))
    return blocks


def first_block(text: str, languages: set[str]) -> str | None:
    """Body of the first block whose tag is in `languages` ("" = untagged), or None."""
    for lang, body in fenced_blocks(text):
        if lang in languages:
            return body
    return None


def last_block(text: str, languages: set[str]) -> str | None:
    """Body of the last block whose tag is in `languages` ("" = untagged), or None."""
    for lang, body in reversed(fenced_blocks(text)):
        if lang in languages:
            return body
    return None


def leading_block(text: str) -> str | None:
    """Body of the block (any tag) that opens on the first non-blank line of text, or None."""
    if not isinstance(text, str):
        return None
    text = text.lstrip()
    if not _OPEN.match(text.split("\n", 1)[0].rstrip("\r")):
        return None
    return fenced_blocks(text)[0][1]
