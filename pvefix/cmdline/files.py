"""The three places a Proxmox host's kernel command line lives, read and edited faithfully.

- /etc/kernel/cmdline: what proxmox-boot-tool writes into systemd-boot entries (first line only;
  it refuses a line without `root=`).
- /etc/default/grub: GRUB_CMDLINE_LINUX then GRUB_CMDLINE_LINUX_DEFAULT, for update-grub.
- /proc/cmdline: what the running kernel booted with (read only).

Each class parses text (`parse(text, source=path)`), exposes the command line as a `Cmdline`
snapshot (`.cmdline`; edit through the class's methods, which guard the file), and renders the
file byte-identical when nothing changed. An edit rewrites only the line it touches.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from itertools import compress, count, repeat
from operator import itemgetter

from pvefix.cmdline.lint import CpuVendor, Finding, Severity, lint
from pvefix.cmdline.pci import (
    ensure_pci_option,
    pci_options,
    pci_realloc_state,
    replace_realloc_off,
)
from pvefix.cmdline.shell import UnterminatedError, Word, parse_word, quote
from pvefix.cmdline.tokens import Cmdline, normalize_name
from pvefix.errors import ParseError, RefusedError
from pvefix.paths import GRUB_DEFAULT, KERNEL_CMDLINE, PROC_CMDLINE

# Boot loaders put these in front of /proc/cmdline (GRUB: BOOT_IMAGE=, systemd-boot: initrd=);
# they are not part of the configured command line.
BOOTLOADER_PARAMS = ("BOOT_IMAGE", "initrd")

Edit = Callable[[Cmdline], bool]


def _has_root(cmdline: Cmdline) -> bool:
    return any(t.value for t in cmdline.named("root"))


# proxmox-kernel-helper src/proxmox-boot/zz-proxmox-boot update_esps (commit 86c7015): on every
# refresh, for systemd-boot and GRUB ESPs alike, when /etc/kernel/cmdline exists its first line
# must contain the text `root=` (a grep), else the hook warns this on stderr and exits 1, and
# `proxmox-boot-tool refresh` (set -e) with it.
KERNEL_CMDLINE_NO_ROOT = "No root= parameter in /etc/kernel/cmdline found!"


def esp_refresh_aborts(kernel_cmdline: str | None) -> bool:
    """True when `proxmox-boot-tool refresh` stops on this /etc/kernel/cmdline text (None:
    the file does not exist, and the hook falls back to /proc/cmdline)."""
    if kernel_cmdline is None:
        return False
    return "root=" not in kernel_cmdline.split("\n", 1)[0]


class KernelCmdlineFile:
    """/etc/kernel/cmdline: the first line is the command line; the rest is kept untouched.

    proxmox-boot-tool reads only the first line and stops with "No root= parameter in
    /etc/kernel/cmdline found!" when it lacks `root=`, so every edit here keeps `root=`.
    """

    def __init__(self, cmdline: Cmdline, rest: str, source: str) -> None:
        self._cmdline = cmdline
        self._rest = rest
        self.source = source

    @classmethod
    def parse(cls, text: str, source: str = KERNEL_CMDLINE) -> KernelCmdlineFile:
        """Parse the file's text; never fails (a missing root= is a finding, not an error)."""
        line, newline, rest = text.partition("\n")
        return cls(Cmdline.parse(line, source=source, line=1), newline + rest, source)

    @property
    def cmdline(self) -> Cmdline:
        """A snapshot of the command line (line 1); edit through this class's methods."""
        return self._cmdline.copy()

    @property
    def has_root(self) -> bool:
        """True when line 1 has a `root=` with a value."""
        return _has_root(self._cmdline)

    def findings(self, *, kernel_version: str | None = None,
                 cpu_vendor: CpuVendor | None = None) -> list[Finding]:
        """Lint findings for line 1, plus the file's own problems."""
        found = [
            f.model_copy(update={"source": self.source, "line": 1})
            for f in lint(self._cmdline, kernel_version=kernel_version, cpu_vendor=cpu_vendor)]
        if not self.has_root:
            found.append(
                Finding(
                    code="kernel-cmdline-no-root", severity="error",
                    message="no root= parameter: proxmox-boot-tool refresh stops with 'No root= "
                    "parameter in /etc/kernel/cmdline found!'",
                    source=self.source, line=1))
        if self._rest.strip():
            found.append(
                Finding(
                    code="kernel-cmdline-extra-lines", severity="info",
                    message="only line 1 is the command line; proxmox-boot-tool ignores the rest",
                    source=self.source, line=2))
        return found

    def ensure(self, name: str, value: str | None = None) -> bool:
        """`Cmdline.ensure` on line 1, keeping root=. True if the file changed."""
        return self._edit(lambda c: c.ensure(name, value))

    def dedupe(self) -> bool:
        """Drop repeated tokens (the first one stays)."""
        return self._edit(lambda c: c.dedupe())

    def remove(self, name: str, value: str | None = None) -> bool:
        """`Cmdline.remove` on line 1; refused if it would remove root=."""
        return self._edit(lambda c: c.remove(name, value))

    def ensure_pci_option(self, option: str) -> bool:
        """`ensure_pci_option` on line 1. True if the file changed."""
        return self._edit(lambda c: ensure_pci_option(c, option))

    def _edit(self, edit: Edit) -> bool:
        new = self._cmdline.copy()
        if not edit(new):
            return False
        if not self.has_root:
            raise RefusedError(
                "has no root= parameter; proxmox-boot-tool refresh would fail on it, so pvefix "
                "will not edit it: add root= by hand first",
                source=self.source, line=1)
        if not _has_root(new):
            raise RefusedError(
                "this edit would remove root=, and the host could not boot from the entries "
                "proxmox-boot-tool writes",
                source=self.source, line=1)
        self._cmdline = new
        return True

    def render(self) -> str:
        """The whole file; byte-identical to the parsed text when nothing changed."""
        return self._cmdline.render() + self._rest


GRUB_LINUX = "GRUB_CMDLINE_LINUX"
GRUB_LINUX_DEFAULT = "GRUB_CMDLINE_LINUX_DEFAULT"

# An assignment at the start of a line. When the whole rest of the line is in a plain shape
# (a double-quoted value without escapes or expansions, a bare word, or nothing, then blanks
# and maybe a comment), the optional group reads it too: groups 2-5 are the quoted raw text,
# its inside, the bare word and what follows. Other lines take the shell-word parser.
_ASSIGN_LINE = re.compile(
    r"^[ \t]*(?:export[ \t]+)?(GRUB_CMDLINE_LINUX(?:_DEFAULT)?)="
    r'(?:(?:("([^"\\$`\n]*)")|([^ \t\n;&|<>()\'"\\$`]*))((?:[ \t]+#[^\n]*|[ \t]*))$)?',
    re.MULTILINE,
)


# Above this many mentions of the variables, a file is first read line by line in the plain
# shape (`_scan_plain`), which costs a call per line but no match kept per assignment.
_MANY = 1000


def _plain_kind(line: str) -> str | None:
    """For one line: None if it starts no assignment, "" if it starts one that is not in the
    plain shape, else the variable it assigns."""
    match = _ASSIGN_LINE.match(line)
    if match is None:
        return None
    return "" if match.group(5) is None else match.group(1)


# What may follow the value on its line: blanks, then a comment or `;` and more commands.
_SUFFIX = re.compile(r"[ \t]*(?:[#;].*)?")


@dataclass(eq=False)
class GrubAssignment:
    """One `GRUB_CMDLINE_LINUX[_DEFAULT]=` assignment as written in the file.

    Read-only by convention (nothing assigns to it after the scan); not a frozen dataclass only
    because a frozen one costs four times as much to build, and a file may hold 100k of them.
    """

    variable: str
    line: int  # 1-based line of the assignment
    end_line: int  # last line of its value (the same unless the value spans lines)
    prefix: str  # the line up to and including '='
    word: Word
    suffix: str  # what follows the value on its last line
    source: str

    @cached_property
    def cmdline(self) -> Cmdline:
        """The value as a kernel command line, parsed on first use: a file of 100k
        assignments needs only the winners' lines (the rest are read as shell words)."""
        return Cmdline.parse(self.word.value, source=self.source, line=self.line)

    def edit_refusal(self) -> str | None:
        """Why pvefix will not rewrite this value, or None if it can."""
        if self.end_line != self.line:
            return "its value spans several lines"
        if self.word.style == "mixed":
            return "its value mixes quoting styles"
        if self.word.literal_specials:
            return "its value holds an escaped '$' or '`'"
        if self.word.style != "empty" and quote(self.word.value, self.word.style) != self.word.raw:
            return "its value uses escapes pvefix would not write back the same way"
        return None


# One assignment found by the scan: variable, line, and either its GrubAssignment or, for a line
# in the plain shape, the match it is built from when needed (None: match the line again).
_Row = tuple[str, int, re.Match[str] | GrubAssignment | None]


class GrubDefaultFile:
    """/etc/default/grub: edits GRUB_CMDLINE_LINUX_DEFAULT, reports LINUX + LINUX_DEFAULT.

    The file is shell: the last uncommented assignment of a variable wins. Values are read
    without expanding `$VAR` (kept verbatim, reported as findings). An edit rewrites only the
    assignment's line, in its quoting style (an unquoted value that gains a space becomes
    double-quoted); every other line stays byte-identical.
    """

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self._text = text
        self._split: list[str] | None = None  # the text's lines, when a plain row needs one
        self._rows = self._scan(text)
        self._index_winners()
        self._cmdline: Cmdline | None = None

    def _index_winners(self) -> None:
        self._winners = {row[0]: k for k, row in enumerate(self._rows)}

    @classmethod
    def parse(cls, text: str, source: str = GRUB_DEFAULT) -> GrubDefaultFile:
        """Parse the file; ParseError (with the line) for an assignment pvefix cannot read."""
        return cls(text, source)

    def _scan(self, text: str, pos: int = 0, line_no: int = 1) -> list[_Row]:
        # The regex engine finds the assignments; Python code runs only for them, and line
        # numbers are counted between matches, so any file reads in one linear pass. `pos`
        # (the start of line `line_no`) scans the rest of a file from a line on. A line in
        # the plain shape keeps its match: its GrubAssignment is built only when asked for
        # (a file of 100k assignments needs a handful).
        if text.count("GRUB_CMDLINE_LINUX", pos) > _MANY:
            plain = self._scan_plain(text, pos, line_no)
            if plain is not None:
                return plain
        found: list[_Row] = []
        append = found.append
        counted = pos  # line_no is the line number at `counted`
        resume = pos  # the text before this was consumed by an earlier value
        for match in _ASSIGN_LINE.finditer(text, pos):
            begin = match.start()
            if begin < resume:
                continue  # inside the value of the assignment before
            line_no += text.count("\n", counted, begin)
            counted = begin
            prefix_end = match.end(1) + 1
            suffix = match.group(5)
            if suffix is not None:  # the plain shape, read by the regex engine alone
                append((match.group(1), line_no, match))
                resume = match.end() + 1
                continue
            try:
                word, end = parse_word(text, prefix_end)
            except UnterminatedError as exc:
                raise ParseError(
                    f"{match.group(1)}: unterminated {exc.what}", source=self.source,
                    line=line_no,
                ) from None
            last = line_no + text.count("\n", begin, end)
            eol = text.find("\n", end)
            eol = len(text) if eol < 0 else eol
            suffix = text[end:eol]
            if _SUFFIX.fullmatch(suffix) is None or (
                suffix.lstrip().startswith(";") and "GRUB_CMDLINE_LINUX" in suffix
            ):
                raise ParseError(
                    f"{match.group(1)}: pvefix does not understand {suffix.strip()!r} after "
                    "the value",
                    source=self.source, line=last)
            variable = match.group(1)
            append((variable, line_no, GrubAssignment(
                variable, line_no, last, text[begin:prefix_end], word, suffix, self.source)))
            resume = eol + 1
        return found

    @staticmethod
    def _scan_plain(text: str, pos: int, line_no: int) -> list[_Row] | None:
        """The rows when every assignment is in the plain shape (one line each, so no value
        can hide a line from the scan), or None. A row keeps only its variable and line (a
        plain line is matched again when its assignment is asked for), so a file of 100k
        assignments leaves no 100k match objects for the garbage collector to walk."""
        kinds = list(map(_plain_kind, text[pos:].split("\n")))
        if "" in kinds:
            return None
        numbers = compress(count(line_no), kinds)
        return list(zip(filter(None, kinds), numbers, repeat(None)))

    def _at(self, k: int) -> GrubAssignment:
        """Row k's assignment, built from its match the first time it is asked for."""
        variable, line, held = self._rows[k]
        if isinstance(held, GrubAssignment):
            return held
        if held is None:
            held = self._match_line(line)
        quoted, inner, bare = held.group(2, 3, 4)
        word = (
            Word(quoted, inner, "double") if quoted is not None
            else Word(bare, bare, "bare" if bare else "empty"))
        built = GrubAssignment(
            variable, line, line, held.string[held.start() : held.end(1) + 1], word,
            held.group(5), self.source)
        self._rows[k] = (variable, line, built)
        return built

    def _match_line(self, line: int, lines: list[str] | None = None) -> re.Match[str]:
        """The plain-shape match of a line the scan found as a plain assignment (in `lines`,
        the text's lines by default)."""
        if lines is None:
            if self._split is None:
                self._split = self._text.split("\n")
            lines = self._split
        match = _ASSIGN_LINE.match(lines[line - 1])
        assert match is not None and match.group(5) is not None  # found so by the scan
        return match

    def _value(self, row: _Row, lines: list[str] | None = None) -> str:
        """The value of a row's assignment as the shell reads it (no expansion done)."""
        held = row[2]
        if isinstance(held, GrubAssignment):
            return held.word.value
        if held is None:
            held = self._match_line(row[1], lines)
        inner, bare = held.group(3, 4)
        return inner if inner is not None else bare

    def multi_line_spans(self) -> list[tuple[int, int]]:
        """(first, last) line of each assignment whose value spans several lines."""
        return [
            (held.line, held.end_line) for _, _, held in self._rows
            if isinstance(held, GrubAssignment) and held.end_line != held.line
        ]

    def evaluation_order(self) -> tuple[list[GrubAssignment], list[GrubAssignment]]:
        """What evaluating the file needs, in file order: the assignments before the last
        plain one of each variable that expand or quote `$` (they only need reporting), and
        every assignment from there on (they make the values). A plain assignment (no
        expansion, no literal `$`) replaces its variable, so what came before it for that
        variable cannot change the result."""
        last_plain: dict[str, int] = {}
        for k, (variable, _, held) in enumerate(self._rows):
            if not isinstance(held, GrubAssignment) or not (
                held.word.expansions or held.word.literal_specials
            ):
                last_plain[variable] = k
        start = min(
            (last_plain.get(variable, 0) for variable in {row[0] for row in self._rows}),
            default=0)
        early = [
            held for _, _, held in self._rows[:start]
            if isinstance(held, GrubAssignment)
            and (held.word.expansions or held.word.literal_specials)]
        return early, [self._at(k) for k in range(start, len(self._rows))]

    def holding(self, name: str) -> list[GrubAssignment]:
        """The assignments whose value's text could hold a parameter `name` (a cheap text
        test on each; the caller parses the few that pass)."""
        wanted = normalize_name(name)
        if wanted not in normalize_name(self._text):
            return []
        value = self._value
        return [
            self._at(k) for k, row in enumerate(self._rows)
            if wanted in normalize_name(value(row))]

    @property
    def assignments(self) -> tuple[GrubAssignment, ...]:
        """Every assignment of the two variables, in file order."""
        return tuple(self._at(k) for k in range(len(self._rows)))

    def assignment_at(self, line: int) -> GrubAssignment | None:
        """The assignment that starts on `line`, or None."""
        k = bisect_left(self._rows, line, key=itemgetter(1))
        return self._at(k) if k < len(self._rows) and self._rows[k][1] == line else None

    def assignment(self, variable: str) -> GrubAssignment | None:
        """The assignment of `variable` that wins (the last one), or None."""
        k = self._winners.get(variable)
        return None if k is None else self._at(k)

    @property
    def linux_default(self) -> Cmdline | None:
        """GRUB_CMDLINE_LINUX_DEFAULT as a command line (a snapshot), or None if unset."""
        a = self.assignment(GRUB_LINUX_DEFAULT)
        return a.cmdline.copy() if a else None

    @property
    def linux(self) -> Cmdline | None:
        """GRUB_CMDLINE_LINUX as a command line (a snapshot), or None if unset."""
        a = self.assignment(GRUB_LINUX)
        return a.cmdline.copy() if a else None

    @property
    def cmdline(self) -> Cmdline:
        """What normal boot entries get: GRUB_CMDLINE_LINUX, then GRUB_CMDLINE_LINUX_DEFAULT."""
        if self._cmdline is None:  # parsed once per version of the file
            self._cmdline = self._effective({})
        return self._cmdline.copy()

    def _effective(self, edits: dict[int, Cmdline]) -> Cmdline:
        lines = []
        for variable in (GRUB_LINUX, GRUB_LINUX_DEFAULT):
            a = self.assignment(variable)
            if a is not None:
                lines.append(edits.get(a.line, a.cmdline))
        parts = [c.render() for c in lines]
        if len([p for p in parts if p]) == 1:
            # One non-empty value: the effective line is that text, already parsed.
            one = lines[[bool(p) for p in parts].index(True)].copy()
            one.source, one.line = self.source, None
            return one
        return Cmdline.parse(" ".join(p for p in parts if p), source=self.source)

    def findings(self, *, kernel_version: str | None = None,
                 cpu_vendor: CpuVendor | None = None) -> list[Finding]:
        """Lint findings for the effective command line, plus the file's own problems."""
        lines = self._token_lines()
        found = [
            f.model_copy(update={"source": self.source, "line": lines.get(f.token or "")})
            for f in lint(self.cmdline, kernel_version=kernel_version, cpu_vendor=cpu_vendor)]
        overridden: dict[str, list[int]] = {}
        winners = self._winners
        for k, (variable, line, _) in enumerate(self._rows):
            if winners[variable] != k:
                overridden.setdefault(variable, []).append(line)
        for k in sorted(winners.values()):
            a = self._at(k)
            if a.word.expansions:
                found.append(self._finding(
                    "grub-variable-expansion", "warning", a,
                    f"{a.variable} uses {', '.join(a.word.expansions)}: pvefix keeps it "
                    "verbatim and does not expand it, so the real command line may differ"))
            if a.variable == GRUB_LINUX_DEFAULT and a.edit_refusal():
                found.append(self._finding(
                    "grub-value-not-editable", "info", a,
                    f"pvefix will not rewrite {a.variable}: {a.edit_refusal()}"))
        # One finding per variable, at its first overridden line (a file may hold 100k).
        for variable, numbers in overridden.items():
            shown = ", ".join(str(n) for n in numbers[:5])
            if len(numbers) > 5:
                shown += f" and {len(numbers) - 5:,} more"
            found.append(Finding(
                code="grub-overridden-assignment", severity="info", source=self.source,
                line=numbers[0],
                message=f"{variable} is assigned again on line {self._rows[winners[variable]][1]},"
                f" which wins (overridden: line{'s' if len(numbers) > 1 else ''} {shown})"))
        return found

    def _finding(self, code: str, severity: Severity, a: GrubAssignment, message: str) -> Finding:
        return Finding(
            code=code, severity=severity, message=message, source=self.source, line=a.line
        )

    def _token_lines(self) -> dict[str, int]:
        # raw token -> line of the winning assignment holding it (LINUX_DEFAULT first), built
        # once, so a 100k-token value lints in linear time.
        lines: dict[str, int] = {}
        for variable in (GRUB_LINUX, GRUB_LINUX_DEFAULT):  # a later update wins
            a = self.assignment(variable)
            if a is not None:
                lines.update(dict.fromkeys([t[0] for t in a.cmdline.tokens], a.line))
        return lines

    # -- editing --------------------------------------------------------------------------

    def ensure(self, name: str, value: str | None = None) -> bool:
        """Add `name[=value]` to GRUB_CMDLINE_LINUX_DEFAULT unless the effective line has it."""
        if self.cmdline.has(name, value):
            return False
        self._check_no_open_quote()
        return self._edit_default({}, lambda c: c.ensure(name, value))

    def _check_no_open_quote(self) -> None:
        # An open '"' in GRUB_CMDLINE_LINUX swallows all of GRUB_CMDLINE_LINUX_DEFAULT, so a
        # parameter added there would never reach the kernel as a parameter.
        for variable in (GRUB_LINUX, GRUB_LINUX_DEFAULT):
            a = self.assignment(variable)
            if a is not None and a.cmdline.unterminated_quote:
                raise ParseError(
                    f"{variable} has an unterminated '\"'; the kernel would swallow any "
                    "parameter added after it, so pvefix will not edit it",
                    source=self.source, line=a.line)

    def dedupe(self) -> bool:
        """Drop repeated tokens inside each variable's value (the first one stays)."""
        edits = self._edit_each(lambda c: c.dedupe())
        self._commit(edits)
        return bool(edits)

    def remove(self, name: str, value: str | None = None) -> bool:
        """Remove it from both variables (else the kernel would still get it)."""
        edits = self._edit_each(lambda c: c.remove(name, value))
        self._commit(edits)
        return bool(edits)

    def ensure_pci_option(self, option: str) -> bool:
        """`ensure_pci_option` across both variables; new options go to LINUX_DEFAULT."""
        edits = self._edit_each(replace_realloc_off) if option == "realloc" else {}
        effective = self._effective(edits)
        done = (
            pci_realloc_state(effective) == "on"
            if option == "realloc"
            else option in pci_options(effective))
        if done:
            self._commit(edits)
            return bool(edits)
        self._check_no_open_quote()
        return self._edit_default(edits, lambda c: ensure_pci_option(c, option))

    def _edit_each(self, edit: Edit) -> dict[int, Cmdline]:
        edits: dict[int, Cmdline] = {}
        for variable in (GRUB_LINUX, GRUB_LINUX_DEFAULT):
            a = self.assignment(variable)
            if a is not None:
                new = a.cmdline.copy()
                if edit(new):
                    edits[a.line] = new
        return edits

    def _edit_default(self, edits: dict[int, Cmdline], edit: Edit) -> bool:
        a = self.assignment(GRUB_LINUX_DEFAULT)
        if a is None:
            new = Cmdline.parse("")
            changed = edit(new)
            self._commit(edits, append=new if changed else None)
            return changed or bool(edits)
        new = edits.get(a.line, a.cmdline).copy()
        if edit(new):
            edits[a.line] = new
        self._commit(edits)
        return bool(edits)

    def _commit(self, edits: dict[int, Cmdline], append: Cmdline | None = None) -> None:
        # Build every new line first, so a refusal leaves the file as it was.
        if not edits and append is None:
            return
        lines = self._text.split("\n")
        # Only the file from the last assignment before the first changed line on is read
        # again (see below), so only those assignments' values are compared.
        first = min([*edits, *([len(lines)] if append is not None else [])])
        k = bisect_left(self._rows, first, key=itemgetter(1))
        keep, start = (self._rows[: k - 1], self._rows[k - 1][1]) if k else ([], 1)
        expected = {row[1]: self._value(row) for row in self._rows[max(k - 1, 0) :]}
        for line, edited in sorted(edits.items()):
            a = self.assignment_at(line)
            assert a is not None  # edits are keyed by the lines of existing assignments
            lines[line - 1] = self._rewrite(a, edited.render())
            expected[line] = edited.render()
        if append is not None:
            new_line = f"{GRUB_LINUX_DEFAULT}={quote(append.render(), 'double')}"
            if lines[-1] == "":
                lines.insert(len(lines) - 1, new_line)
                expected[len(lines) - 1] = append.render()
            else:
                lines.extend([new_line, ""])
                expected[len(lines) - 1] = append.render()
        text = "\n".join(lines)
        # Never write what would not read back as intended (a trailing backslash, say, would
        # join an appended line to the one before it). A value renders back byte-identical
        # from its command line, so the shell words' values are compared. Only the file from
        # the last assignment before the first changed line on is read again: the text before
        # that assignment is unchanged, and only an assignment's value can run on into the
        # lines after it, so what comes before it reads as it did.
        offset = len("\n".join(lines[: start - 1])) + (1 if start > 1 else 0)
        try:
            rescanned = self._scan(text, offset, start)
        except ParseError:
            rescanned = []
        if {row[1]: self._value(row, lines) for row in rescanned} != expected:
            raise RefusedError(
                "the edited file would not read back as intended; edit it by hand",
                source=self.source)
        self._rows = keep + rescanned
        self._index_winners()
        self._cmdline = None
        self._text = text
        self._split = lines

    def _rewrite(self, a: GrubAssignment, value: str) -> str:
        why = a.edit_refusal()
        if why is not None:
            raise RefusedError(f"will not rewrite {a.variable}: {why}; edit it by hand",
                               source=self.source, line=a.line)
        raw = quote(value, a.word.style) if a.word.style != "empty" else None
        if raw is None and a.word.style in ("bare", "empty"):
            raw = quote(value, "double")
        if raw is None:
            raise RefusedError(
                f"cannot write {value!r} in {a.variable}'s {a.word.style}-quoted value",
                source=self.source, line=a.line)
        check, end = parse_word(raw)
        if end != len(raw) or check.value != value:  # never write what would read back wrong
            raise RefusedError(f"cannot quote {value!r} safely for {a.variable}",
                               source=self.source, line=a.line)
        return a.prefix + raw + a.suffix

    def render(self) -> str:
        """The whole file; byte-identical to the parsed text when nothing changed."""
        return self._text


class ProcCmdline:
    """/proc/cmdline: the running kernel's command line. Read only.

    It starts with boot loader tokens that are not configuration: `BOOT_IMAGE=...` on GRUB,
    `initrd=...` on systemd-boot; `config_cmdline` leaves them out.
    """

    def __init__(self, text: str, source: str) -> None:
        self._text = text
        self._cmdline = Cmdline.parse(text, source=source)
        self.source = source

    @classmethod
    def parse(cls, text: str, source: str = PROC_CMDLINE) -> ProcCmdline:
        """Parse the file's text; never fails."""
        return cls(text, source)

    @property
    def cmdline(self) -> Cmdline:
        """Everything the kernel got, boot loader tokens included (a snapshot)."""
        return self._cmdline.copy()

    @property
    def bootloader_tokens(self) -> tuple[str, ...]:
        """Raw text of the boot loader's own tokens (BOOT_IMAGE=, initrd=)."""
        return tuple(
            t.raw for t in self._cmdline if any(t.matches(n) for n in BOOTLOADER_PARAMS))

    @property
    def config_cmdline(self) -> Cmdline:
        """The command line without the boot loader's tokens: what was configured."""
        return self._cmdline.without(BOOTLOADER_PARAMS)

    def findings(self, *, kernel_version: str | None = None,
                 cpu_vendor: CpuVendor | None = None) -> list[Finding]:
        """Lint findings for the configured part of the running command line."""
        return [
            f.model_copy(update={"source": self.source, "line": 1})
            for f in lint(self.config_cmdline, kernel_version=kernel_version,
                          cpu_vendor=cpu_vendor)]

    def _read_only(self) -> RefusedError:
        return RefusedError(
            "is read only: it shows what the running kernel booted with; edit "
            f"{KERNEL_CMDLINE} or {GRUB_DEFAULT} instead",
            source=self.source)

    def ensure(self, name: str, value: str | None = None) -> bool:
        """Always refused: /proc/cmdline cannot be written."""
        raise self._read_only()

    def remove(self, name: str, value: str | None = None) -> bool:
        """Always refused: /proc/cmdline cannot be written."""
        raise self._read_only()

    def ensure_pci_option(self, option: str) -> bool:
        """Always refused: /proc/cmdline cannot be written."""
        raise self._read_only()

    def render(self) -> str:
        """The text as read."""
        return self._text
