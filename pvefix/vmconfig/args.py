"""The `args:` line: extra QEMU arguments, and the P2P cliques pvefix sets in it.

qemu-server splits `args` into words the way a shell does (PVE::Tools::split_args, i.e.
Text::ParseWords::shellwords) and appends them to the QEMU command line. pvefix edits it only
to set `-set device.hostpciN.x-nv-gpudirect-clique=C` pairs, and it edits the raw text
losslessly: every other word, quote and space stays exactly as written; a clique pvefix sets is
changed in place or appended at the end; one it removes takes only its own words. An `args`
left with nothing in it is deleted, never written empty.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from pvefix.errors import ValidationError

CLIQUE_PROPERTY = "x-nv-gpudirect-clique"
MAX_CLIQUE = 15  # QEMU's vfio-pci accepts clique ids 0..15
_CLIQUE_WORD = re.compile(r"^device\.(hostpci\d+)\.x-nv-gpudirect-clique=(\d+)$")


@dataclass(frozen=True)
class Word:
    text: str  # the word after shell unquoting
    start: int  # span of its raw text in the args value
    end: int


@dataclass(frozen=True)
class Clique:
    """One `-set device.ID.x-nv-gpudirect-clique=N` pair found in args."""

    device: str  # hostpciN
    clique: int
    start: int  # span from the `-set` word to the end of its value
    end: int


def split_words(args: str) -> list[Word]:
    """Shell-like words with their raw spans; raises ValidationError on an open quote."""
    words: list[Word] = []
    i, n = 0, len(args)
    while i < n:
        if args[i].isspace():
            i += 1
            continue
        start, buf = i, list[str]()
        while i < n and not args[i].isspace():
            ch = args[i]
            if ch in "'\"":
                i = _quoted(args, i, buf)
            elif ch == "\\" and i + 1 < n:
                buf.append(args[i + 1])
                i += 2
            else:
                buf.append(ch)
                i += 1
        words.append(Word("".join(buf), start, i))
    return words


def _quoted(args: str, i: int, buf: list[str]) -> int:
    """Read a quoted part starting at `i` into `buf`, as Perl's Text::ParseWords does (which
    qemu-server's split_args uses): a backslash never ends the part; inside "..." it escapes any
    character, inside '...' the text is kept as written ($PERL_SINGLE_QUOTE is off). The index
    after the closing quote."""
    quote, j, raw = args[i], i + 1, list[str]()
    while j < len(args):
        ch = args[j]
        if ch == quote:
            text = "".join(raw)
            buf.append(_unescape(text) if quote == '"' else text)
            return j + 1
        if ch == "\\" and j + 1 < len(args):
            raw.append(args[j : j + 2])
            j += 2
            continue
        raw.append(ch)
        j += 1
    raise ValidationError(f"args: unbalanced quote at character {i + 1}")


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text, flags=re.DOTALL)


def cliques(args: str | None) -> list[Clique]:
    """Every clique pair in args, in order (a device named twice keeps both: QEMU applies the
    last `-set`, so `clique_of` reads the last)."""
    if not args:
        return []
    words = split_words(args)
    found: list[Clique] = []
    for a, b in itertools.pairwise(words):
        m = _CLIQUE_WORD.match(b.text)
        if a.text == "-set" and m:
            found.append(Clique(m.group(1), int(m.group(2)), a.start, b.end))
    return found


def clique_map(args: str | None) -> dict[str, int]:
    """hostpciN -> the clique QEMU will apply for it (the last `-set` wins)."""
    return {c.device: c.clique for c in cliques(args)}


def clique_word(device: str, clique: int) -> str:
    if not 0 <= clique <= MAX_CLIQUE:
        raise ValidationError(f"{CLIQUE_PROPERTY} must be 0..{MAX_CLIQUE}, not {clique}")
    return f"-set device.{device}.{CLIQUE_PROPERTY}={clique}"


def merge_cliques(args: str | None, wanted: dict[str, int]) -> str | None:
    """args with each wanted device in its clique: an existing pair for the device is rewritten
    in place (only its value), a missing one appended; everything else is kept byte for byte.
    Idempotent: merging the same map twice gives the same text."""
    text = args or ""
    have = cliques(text)
    last = {c.device: c for c in have}
    edits: list[tuple[int, int, str]] = []
    for device, clique in wanted.items():
        c = last.get(device)
        if c is not None and c.clique != clique:
            edits.append((c.start, c.end, clique_word(device, clique)))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    extra = [clique_word(d, k) for d, k in wanted.items() if d not in last]
    if extra:
        text = (text.rstrip() + " " if text.strip() else "") + " ".join(extra)
    return text if text.strip() else args


def remove_cliques(args: str | None, devices: set[str]) -> str | None:
    """args without the clique pairs of `devices`; None when nothing else is left (Proxmox
    would otherwise keep an empty `args:` line)."""
    if not args:
        return args
    text = args
    for c in sorted(cliques(args), key=lambda c: c.start, reverse=True):
        if c.device not in devices:
            continue
        start = c.start
        while start > 0 and text[start - 1] in " \t":
            start -= 1
        end = c.end if start > 0 else _skip_space(text, c.end)
        text = text[:start] + text[end:]
    return text if text.strip() else None


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i

