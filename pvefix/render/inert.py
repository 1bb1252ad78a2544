"""What pvefix writes to a terminal, a CI log or a report file, made inert: no text read from a
host (a VM description, `args`, a command's stderr) can act as a CI workflow command.

CI runners read commands out of the job's log. GitHub's runner (actions/runner,
ActionCommand.cs) takes a line whose text, after leading whitespace, starts with `::`
(`::stop-commands::TOKEN` makes it ignore every later command, pvefix's own `::error` lines
included), and the older `##[command]` anywhere in a line; it splits lines at LF and at CR.
GitLab folds the log at `section_start:TIME:NAME` / `section_end:` markers followed by CR and
the ANSI sequence ESC[0K. So, in every line pvefix writes:

- control characters (CR, ESC, the other C0 and C1 codes, U+2028/U+2029) are shown escaped
  (`\\r`, `\\x1b`); tabs and line ends stay, and with `color` pvefix's own colour codes;
- so are the characters that reorder or hide text without being seen (Unicode's bidirectional
  embeddings, overrides and isolates U+202A-U+202E and U+2066-U+2069, the marks U+200E/U+200F
  and U+061C, the zero-width U+200B-U+200D and U+FEFF): a terminal or a rendered ticket would
  show a line, a guest command to copy included, other than the bytes it holds (`\\u202e`);
- a line that would start with `::` gets a backslash first (`\\::stop-commands::x`);
- `##[` is written `##\\[`, `section_start:` and `section_end:` as `section_start\\:` ...

The JSON and JUnit XML outputs keep their values exactly: there the same characters are written
as escapes of the format itself (`\\u005b`, `&#91;`). pvefix's own annotations (check/render.py
github_annotations) are written after this, unchanged.
"""

from __future__ import annotations

import re

from pvefix.unseen import UNSAFE

_SGR = r"\x1b\[[0-9;]*m"  # pvefix's own colours (render/plan_text.py)
_CONTROL = re.compile(f"[{UNSAFE}]")
_CONTROL_BUT_SGR = re.compile(f"(?!{_SGR})[{UNSAFE}]")
_COMMAND_AT_START = re.compile(r"^([^\S\n]*)::", re.MULTILINE)
_MARKERS = re.compile(r"##\[|section_(?:start|end):")
_NAMED = {"\r": "\\r", "\x1b": "\\x1b"}


def _shown(match: re.Match[str]) -> str:
    char = match.group(0)
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert_text(text: str, *, color: bool = False) -> str:
    """Plain text (the terminal views, Markdown, error messages) as described above."""
    text = (_CONTROL_BUT_SGR if color else _CONTROL).sub(_shown, text)
    text = _MARKERS.sub(lambda m: m.group(0)[:-1] + "\\" + m.group(0)[-1], text)
    return _COMMAND_AT_START.sub(r"\1\\::", text)


def inert_json(text: str) -> str:
    """A JSON document (control characters and line ends are escaped by the encoder already;
    no line starts with `::`): the markers' last character as a JSON escape (`##\\u005b`)."""
    if "##[" not in text and "section_" not in text:  # substring tests first: a 10,000-VM
        return text  # report is ~14 MB, and the pattern's scan of it takes ~0.15 s
    return _MARKERS.sub(lambda m: m.group(0)[:-1] + f"\\u{ord(m.group(0)[-1]):04x}", text)


def inert_xml(text: str) -> str:
    """An XML document: CR, `::` at a line start, `##[` and the GitLab markers as character
    references (the parsed values stay the same)."""
    text = text.replace("\r", "&#13;")
    text = _MARKERS.sub(lambda m: m.group(0)[:-1] + f"&#{ord(m.group(0)[-1])};", text)
    return _COMMAND_AT_START.sub(r"\1&#58;:", text)
