"""/etc/default/grub with its /etc/default/grub.d/*.cfg drop-ins, as update-grub reads them.

grub-mkconfig (util/grub-mkconfig.in) sources /etc/default/grub, then every
/etc/default/grub.d/*.cfg in glob order; a later assignment of a variable replaces the earlier
value, and a drop-in commonly extends one:
`GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt"`.
10_linux (util/grub.d/10_linux.in) then writes the normal entry's kernel line as
`linux /boot/vmlinuz-... root=DEVICE ro GRUB_CMDLINE_LINUX GRUB_CMDLINE_LINUX_DEFAULT`, and GRUB
adds `BOOT_IMAGE=...` in front at boot: that is what /proc/cmdline shows.

pvefix evaluates the two variables through the files, expanding only references to themselves;
any other expansion (`$(...)`, another variable) makes the value unknown, and pvefix says so
instead of guessing. An edit goes where it takes effect: the file holding the last assignment
of GRUB_CMDLINE_LINUX_DEFAULT that does not build on the earlier value (later drop-ins that
append still append after it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pvefix.cmdline.files import (
    GRUB_LINUX,
    GRUB_LINUX_DEFAULT,
    GrubAssignment,
    GrubDefaultFile,
)
from pvefix.cmdline.tokens import Cmdline, normalize_name
from pvefix.paths import GRUB_D, GRUB_DEFAULT

_SELF_REF = re.compile(r"\$(?:\{(GRUB_CMDLINE_LINUX(?:_DEFAULT)?)\}"
                       r"|(GRUB_CMDLINE_LINUX(?:_DEFAULT)?)(?![A-Za-z0-9_]))")


def is_dropin(path: str) -> bool:
    """A file update-grub sources: /etc/default/grub.d/NAME.cfg (not in a subfolder, and not
    a name starting with `.`, which the shell's `*.cfg` does not match)."""
    if not path.startswith(GRUB_D + "/") or not path.endswith(".cfg"):
        return False
    name = path[len(GRUB_D) + 1 :]
    return "/" not in name and not name.startswith(".")


def dropin_order(paths: list[str]) -> list[str]:
    """The drop-ins in the order dash's glob returns them: byte order of the names."""
    return sorted((p for p in paths if is_dropin(p)),
                  key=lambda p: p.encode("utf-8", "surrogateescape"))


# Shell that can change variables in ways pvefix does not follow (first word of a line).
_BEYOND = re.compile(
    r"^[ \t]*(?:(if|case|for|while|until|function|eval|source|unset|read|\.)(?=[ \t;]|$)"
    r"|([A-Za-z_][A-Za-z0-9_]*)[ \t]*\([ \t]*\))"
)


# A line that may be beyond what pvefix evaluates: one the checks in `_beyond` could stop at.
# Lines that start an assignment of the two variables are read by the scan, not here.
_CANDIDATE = re.compile(
    r"^(?![ \t]*(?:export[ \t]+)?GRUB_CMDLINE_LINUX(?:_DEFAULT)?=)"
    r"(?:[^\n]*GRUB_CMDLINE_LINUX|[ \t]*(?:if|case|for|while|until|function|eval|source|unset"
    r"|read|\.|[A-Za-z_][A-Za-z0-9_]*[ \t]*\())",
    re.MULTILINE,
)


def _beyond(path: str, text: str, parsed: GrubDefaultFile) -> str | None:
    """Why this file is beyond what pvefix evaluates (control flow, sourced code, the variables
    used other than in `NAME=value`), or None. Linear in the file's length."""
    # The regex engine finds the candidate lines (never an assignment's own first line); each
    # is then judged as a whole line. Lines inside a value that spans lines are not code.
    spans = parsed.multi_line_spans()
    inside = {n for first, last in spans for n in range(first, last + 1)}
    counted, number = 0, 1
    for candidate in _CANDIDATE.finditer(text):
        begin = candidate.start()
        number += text.count("\n", counted, begin)
        counted = begin
        end = text.find("\n", begin)
        line = text[begin : len(text) if end < 0 else end]
        if number in inside or line.lstrip().startswith("#"):
            continue
        match = _BEYOND.match(line)
        if match is not None:
            what = match.group(1) or f"{match.group(2)}()"
            return (f"{path}:{number}: `{what}`: pvefix does not evaluate shell control flow, "
                    "functions or sourced code")
        if "GRUB_CMDLINE_LINUX" in line:
            return (f"{path}:{number}: GRUB_CMDLINE_LINUX used other than in `NAME=value`, "
                    "which pvefix does not evaluate")
    return None


@dataclass(frozen=True)
class Source:
    """Where an effective value came from: file and 1-based line of the assignment."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


class GrubConfig:
    """The main file and its drop-ins, in the order update-grub sources them."""

    def __init__(self, files: dict[str, str],
                 parsed: Mapping[str, GrubDefaultFile] | None = None) -> None:
        """`parsed`: files already read (say, an editor after its edit), reused where their
        text is exactly the text given, so evaluating an edited file does not read it again."""
        main = files.get(GRUB_DEFAULT)
        self.paths = ([GRUB_DEFAULT] if main is not None else []) + dropin_order(
            list(files))
        self.texts = {p: files[p] for p in self.paths}
        known = parsed or {}
        self.files = {
            p: known[p] if p in known and known[p].render() == files[p]
            else GrubDefaultFile.parse(files[p], p)
            for p in self.paths
        }
        self.unknown: list[str] = []  # why a value could not be evaluated
        self.values: dict[str, str] = {}
        self.sources: dict[str, list[Source]] = {GRUB_LINUX: [], GRUB_LINUX_DEFAULT: []}
        self._evaluate()

    @property
    def dropins(self) -> list[str]:
        return [p for p in self.paths if p != GRUB_DEFAULT]

    def _evaluate(self) -> None:
        values = {GRUB_LINUX: "", GRUB_LINUX_DEFAULT: ""}
        chains: dict[str, list[tuple[str, int]]] = {GRUB_LINUX: [], GRUB_LINUX_DEFAULT: []}
        for path in self.paths:
            beyond = _beyond(path, self.texts[path], self.files[path])
            if beyond is not None:
                self.unknown.append(beyond)
            early, rest = self.files[path].evaluation_order()
            # `early`: replaced later by a plain value, so only what pvefix cannot read counts.
            self.unknown += [why for a in early if (why := _not_evaluated(path, a))]
            for a in rest:
                if not a.word.expansions and not a.word.literal_specials:
                    # The common case, kept cheap: a plain value replaces the variable.
                    values[a.variable] = a.word.value
                    chains[a.variable] = [(path, a.line)]
                    continue
                if why := _not_evaluated(path, a):
                    self.unknown.append(why)
                values[a.variable] = _expand(a.word.value, a.word.expansions, values)
                if not any(_SELF_REF.fullmatch(e) for e in a.word.expansions):
                    chains[a.variable] = []
                chains[a.variable].append((path, a.line))
        self.values = values
        self.sources = {v: [Source(p, n) for p, n in chain] for v, chain in chains.items()}

    @property
    def cmdline(self) -> Cmdline:
        """What the normal entry gets after `root=... ro`: LINUX, then LINUX_DEFAULT."""
        source = ", ".join(self.paths) or GRUB_DEFAULT
        text = " ".join(v for v in (self.values[GRUB_LINUX], self.values[GRUB_LINUX_DEFAULT]) if v)
        one = self._only_assignment(text)
        if one is not None:  # its value is the whole line, and already parsed (or kept)
            line = one.cmdline.copy()
            line.source, line.line = source, None
            return line
        return Cmdline.parse(text, source=source)

    def _only_assignment(self, text: str) -> GrubAssignment | None:
        """The one assignment whose value, as written, is the whole effective line, if any."""
        chains = [c for v, c in self.sources.items() if self.values[v]]
        if len(chains) != 1 or len(chains[0]) != 1:
            return None
        where = chains[0][0]
        a = self.files[where.path].assignment_at(where.line)
        return a if a is not None and a.word.value == text else None

    def base_assignment(self) -> tuple[str, GrubAssignment | None]:
        """The file to edit for GRUB_CMDLINE_LINUX_DEFAULT, and its base assignment there."""
        chain = self.sources[GRUB_LINUX_DEFAULT]
        if not chain:
            return GRUB_DEFAULT, None
        first = chain[0]
        return first.path, self.files[first.path].assignment_at(first.line)

    def where(self, name: str, value: str | None = None) -> list[Source]:
        """The assignments whose own text holds `name[=value]`."""
        found: list[Source] = []
        for path in self.paths:
            for a in self.files[path].holding(name):
                if a.cmdline.has(name, value):
                    found.append(Source(path, a.line))
        return found


def _expand(value: str, expansions: list[str], values: dict[str, str]) -> str:
    """`value` with each of its expansions (in order) replaced by the variable's value, exactly
    as the shell does inside an assignment (no field splitting, whitespace kept)."""
    out: list[str] = []
    pos = 0
    for expansion in expansions:
        ref = _SELF_REF.fullmatch(expansion)
        at = value.find(expansion, pos)
        if ref is None or at < 0:
            continue  # reported as unknown; kept verbatim
        out.append(value[pos:at])
        out.append(values[ref.group(1) or ref.group(2)])
        pos = at + len(expansion)
    out.append(value[pos:])
    return "".join(out)


def _not_evaluated(path: str, a: GrubAssignment) -> str | None:
    """Why pvefix cannot give the value of assignment `a` (None: it can): an expansion other
    than the variable itself, or a literal `$` (`\\$X`, `'$X'`) beside expansions, which the
    value no longer tells apart from an expansion."""
    others = [e for e in a.word.expansions if not _SELF_REF.fullmatch(e)]
    if others:
        return (f"{path}:{a.line}: {a.variable} uses {', '.join(others)}, which pvefix does"
                " not evaluate")
    if a.word.literal_specials or (a.word.expansions and "'" in a.word.raw):
        return (f"{path}:{a.line}: {a.variable} mixes a literal `$` with expansions, which"
                " pvefix does not evaluate")
    return None


def duplicates(line: Cmdline) -> list[str]:
    """Tokens given more than once (same raw text), in first-seen order."""
    seen: dict[str, int] = {}
    for t in line:
        seen[t.raw] = seen.get(t.raw, 0) + 1
    return [raw for raw, n in seen.items() if n > 1]


def same_as_running(configured: Cmdline, running: Cmdline) -> bool:
    """Does the running line (BOOT_IMAGE= already removed) hold exactly the configured one, after
    what 10_linux writes itself in front: `root=DEVICE ro`? (With GRUB_CMDLINE_LINUX carrying a
    `root=` of its own, as Proxmox's ZFS installs do, no prefix is added.)"""
    # Compared as the kernel reads them (name with `-`/`_` alike, value), not as raw text:
    # GRUB re-quotes an argument with a space (grub-core/lib/cmdline.c), so a configured
    # `foo="a b"` runs as `"foo=a b"`, the same parameter.
    want = [(normalize_name(t.name), t.value) for t in configured]
    got = [(normalize_name(t.name), t.value) for t in running]
    if got == want:
        return True
    if got[:1] and running.tokens[0].matches("root"):
        rest = got[2:] if got[1:2] == [("ro", None)] else got[1:]
        return rest == want
    return False
