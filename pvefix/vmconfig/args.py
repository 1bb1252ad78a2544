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


# Perl's \s on the bytes of a config (qemu-server reads it undecoded): not Python's isspace,
# which also takes U+001C..U+001F, U+0085, U+00A0 and the other Unicode spaces.
PERL_SPACE = " \t\n\r\f\v"
_QUOTES = "'\""


class ArgsIgnored(ValidationError):
    """An `args` value qemu-server drops as a whole (Text::ParseWords gives no word)."""


def split_words(args: str) -> list[Word]:
    """The words qemu-server passes to QEMU (PVE::Tools::split_args: Text::ParseWords's
    shellwords, parse_line with the delimiter \\s+), with their raw spans. Raises ArgsIgnored
    where shellwords gives nothing for a non-blank text (an open quote, a lone backslash at the
    end): qemu-server then drops the whole `args`."""
    words: list[Word] = []
    n, i = len(args), _skip(args, 0)
    buf: list[str] | None = None  # the word being built (None: between words)
    start = i
    while i < n:
        if buf is None:
            buf, start = [], i
        if args[i] in _QUOTES:
            close = _closing_quote(args, i)
            if close is None:
                raise ArgsIgnored(f"args: unbalanced quote at character {i + 1}")
            inner = args[i + 1:close]
            buf.append(_unescape(inner) if args[i] == '"' else inner)  # '...' kept as written
            i = close + 1
            continue
        j = i
        while j < n and args[j] not in PERL_SPACE and args[j] not in _QUOTES:
            if args[j] == "\\":
                if j + 1 == n:
                    raise ArgsIgnored("args: ends in a lone backslash")
                j += 1
            j += 1
        buf.append(_unescape(args[i:j]))
        i = j
        if i < n and args[i] in PERL_SPACE:  # the delimiter ends the word; a quote does not
            words.append(Word("".join(buf), start, i))
            buf, i = None, _skip(args, i)
    if buf is not None:
        words.append(Word("".join(buf), start, n))
    return words


def _skip(args: str, i: int) -> int:
    while i < len(args) and args[i] in PERL_SPACE:
        i += 1
    return i


def _closing_quote(args: str, i: int) -> int | None:
    """The quote closing the one at `i` (a backslash pairs with the next character, in both
    kinds of quotes, as parse_line's pattern reads them), or None."""
    j = i + 1
    while j < len(args):
        if args[j] == "\\":
            j += 2
            continue
        if args[j] == args[i]:
            return j
        j += 1
    return None


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text, flags=re.DOTALL)


def qemu_words(args: str | None) -> list[str]:
    """What qemu-server appends to QEMU's command line for this `args`: nothing for a false
    value in Perl ("" or "0") or an `args` it drops, else its words."""
    if not args or args == "0":
        return []
    try:
        return [w.text for w in split_words(args)]
    except ArgsIgnored:
        return []


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
    if not wanted:
        return args
    if args == "0":
        raise ArgsIgnored("args: qemu-server ignores an args of 0 (false in Perl)")
    have = cliques(text)  # raises ArgsIgnored for an args qemu-server drops: never made live
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
        words = split_words(text)  # the spaces after the last word (not one it escapes) go
        text = (text[:words[-1].end] + " " if words else "") + " ".join(extra)
    return text if text.strip(PERL_SPACE) else args


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
        while start > 0 and text[start - 1] in PERL_SPACE:
            start -= 1
        end = c.end if start > 0 else _skip_space(text, c.end)
        text = text[:start] + text[end:]
    return text if text.strip(PERL_SPACE) else None


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in PERL_SPACE:
        i += 1
    return i

