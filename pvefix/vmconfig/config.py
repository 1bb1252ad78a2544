"""A lossless model of a Proxmox VM config file (`/etc/pve/qemu-server/VMID.conf`).

Every line of the file is kept, with its number, exactly as written: comments, blank lines,
unknown keys, invalid lines, duplicate and unknown sections. Unchanged, `render()` gives back the
same bytes (and so the same digest); an edit changes only the lines it touches.

What Proxmox itself makes of the file (last key wins, a later duplicate section replaces the
earlier one, unknown sections are skipped, invalid values are dropped) is the *effective* view:
`Section.get`, `Section.as_dict` and `render_proxmox()` follow it, and `problems` says what
Proxmox would warn about (or, in strict mode, refuse).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import quote, unquote_to_bytes

from pvefix.digest import sha1_text
from pvefix.errors import ParseError, ValidationError
from pvefix.vmconfig.schema import INDEXED, key_type
from pvefix.vmconfig.values import normalize, validate

LineKind = Literal["blank", "comment", "entry", "invalid", "ignored"]
SectionKind = Literal["main", "pending", "special", "snapshot", "unknown"]

_BLANK = re.compile(r"^\s*$")
_PENDING = re.compile(r"^\[PENDING\]\s*$", re.IGNORECASE)
_SPECIAL = re.compile(r"^\[special:(cloudinit|fleecing)\]\s*$", re.IGNORECASE)
_SNAPSHOT = re.compile(r"^\[([a-z][a-z0-9_\-]+)\]\s*$", re.IGNORECASE)
_UNKNOWN = re.compile(r"^\[([^\]]*)\]\s*$")
_ENTRY = re.compile(r"^([a-z][a-z_\-]*\d*):\s*(.+?)\s*$")
_CLOUDINIT_VOL = re.compile(r"vm-\d+-cloudinit")

# Proxmox escapes everything outside these bytes in description comments (control characters,
# '%', ':' and non-ASCII).
_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if c not in (0x25, 0x3A))


def encode_text(text: str) -> str:
    return quote(text, safe=_SAFE)


def decode_text(text: str) -> str:
    # As Proxmox (PVE::Tools::decode_text): unescape the bytes, then decode them as UTF-8, a
    # byte that is not UTF-8 becoming U+FFFD (a raw one arrives here as a surrogate).
    return unquote_to_bytes(text.encode("utf-8", "surrogateescape")).decode("utf-8", "replace")


@dataclass(slots=True)
class Line:
    """One line of the file, as written. `number` is 1-based; 0 for lines pvefix added."""

    raw: str
    number: int
    kind: LineKind
    key: str | None = None
    value: str | None = None


@dataclass(frozen=True)
class Problem:
    """Something Proxmox's parser warns about (or refuses in strict mode)."""

    line: int
    message: str


# Keys seen in `key: value` lines, and whether _ENTRY's key part accepts them (a config has a
# few dozen distinct keys; a cluster-wide read classifies hundreds of thousands of lines).
_KEY_OK: dict[str, bool] = {}
_ENTRY_KEY = re.compile(r"[a-z][a-z_\-]*\d*")


def _classify(raw: str, number: int) -> Line:
    # The common line, `key: value` with one space and no space around the value, without the
    # regular expression: what _ENTRY would capture (tests/vmconfig hold the two to it).
    colon = raw.find(": ")
    if colon > 0:
        key = raw[:colon]
        ok = _KEY_OK.get(key)
        if ok is None:
            ok = _ENTRY_KEY.fullmatch(key) is not None
            if len(_KEY_OK) < 4096:
                _KEY_OK[key] = ok
        value = raw[colon + 2:]
        if ok and value and not value[0].isspace() and not value[-1].isspace():
            return Line(raw, number, "entry", key, value)
    m = _ENTRY.match(raw)  # also matches `description:` and `delete:`, same value rule
    if m:
        return Line(raw, number, "entry", m.group(1), m.group(2))
    if raw.startswith("#"):
        return Line(raw, number, "comment", value=raw[1:])
    if _BLANK.match(raw):
        return Line(raw, number, "blank")
    return Line(raw, number, "invalid")


@dataclass
class Section:
    """One section: the main one, [PENDING], [special:NAME], a snapshot, or an unknown one."""

    name: str
    kind: SectionKind
    header: Line | None = None
    lines: list[Line] = field(default_factory=list)
    active: bool = True  # False: an earlier duplicate (replaced) or an unknown section (skipped)

    # ---- reading --------------------------------------------------------------------------
    def _entries(self) -> list[Line]:
        return [ln for ln in self.lines if ln.kind == "entry" and ln.key != "description"]

    def get(self, key: str) -> str | None:
        """The effective value of `key` (Proxmox keeps the last one), or None."""
        if key == "description":
            return self.description
        found: str | None = None
        for ln in self._entries():
            if ln.key == key or (key == "ide2" and ln.key == "cdrom"):
                found = ln.value
        return found

    def keys(self) -> list[str]:
        seen: dict[str, None] = {}
        for ln in self._entries():
            assert ln.key is not None
            seen[ln.key] = None
        return list(seen)

    def as_dict(self) -> dict[str, str]:
        """Effective key -> value (last wins), description and `delete` excluded."""
        out: dict[str, str] = {}
        for ln in self.lines:  # _entries(), in one pass
            key = ln.key
            if ln.kind == "entry" and key not in ("description", "delete"):
                assert key is not None and ln.value is not None
                out["ide2" if key == "cdrom" else key] = ln.value
        return out

    @property
    def description(self) -> str | None:
        """The decoded description ('#' lines and `description:` lines), None if none."""
        text: str | None = None
        for ln in self.lines:
            if ln.kind == "comment":
                text = (text or "") + decode_text(ln.value or "") + "\n"
            elif ln.kind == "entry" and ln.key == "description":
                text = (text or "") + decode_text(ln.value or "")
        return None if text is None else text.rstrip()

    @property
    def deletes(self) -> list[str]:
        """Keys a [PENDING] section will delete (`delete: a,!b`: '!' forces)."""
        raw = None
        for ln in self._entries():
            if ln.key == "delete":
                raw = ln.value
        if not raw:
            return []
        return [k for k in re.split(r"[,;\s]+", raw) if k]

    def is_empty(self) -> bool:
        return not self._entries() and self.description is None

    # ---- editing (minimal diff) -----------------------------------------------------------
    def set(self, key: str, value: str) -> bool:
        """Set `key`, changing only its line (the last one if repeated); True if changed."""
        if key == "description":
            raise ValidationError("description: edit the '#' lines, not a description key")
        if "\n" in value or "\r" in value or value.strip() != value or value == "":
            raise ValidationError(f"{key}: value {value!r} cannot be stored on one config line")
        entries = [ln for ln in self._entries() if ln.key == key]
        if entries:
            line = entries[-1]
            if line.value == value:
                return False
            line.raw, line.value = f"{key}: {value}", value
            return True
        self.lines.insert(self._insert_at(key), Line(f"{key}: {value}", 0, "entry", key, value))
        return True

    def _insert_at(self, key: str) -> int:
        """Where a new key goes: after the last entry that sorts before it (Proxmox's order)."""
        entry_idx = [i for i, ln in enumerate(self.lines) if ln.kind == "entry"]
        before = [i for i in entry_idx if (self.lines[i].key or "") < key]
        if before:
            return before[-1] + 1
        if entry_idx:
            return entry_idx[0]
        pos = len(self.lines)
        while pos > 0 and self.lines[pos - 1].kind == "blank":
            pos -= 1
        return pos

    def delete(self, key: str) -> bool:
        """Remove every line of `key`; True if one was there."""
        before = len(self.lines)
        self.lines = [
            ln for ln in self.lines if not (ln.kind == "entry" and ln.key == key)
        ]
        return len(self.lines) != before

    def set_deletes(self, keys: list[str]) -> bool:
        if not keys:
            return self.delete("delete")
        return self.set("delete", ",".join(keys))

    def body_text(self) -> list[str]:
        return [ln.raw for ln in self.lines]


class VMConfig:
    """A VM config file, lossless. Build with `VMConfig.parse(text, source)`."""

    def __init__(self, sections: list[Section], trailing_newline: bool, source: str):
        self.sections = sections
        self.trailing_newline = trailing_newline
        self.source = source
        self._problems: list[Problem] | None = None

    @property
    def problems(self) -> list[Problem]:
        """What Proxmox's parser would warn about (checked on first use, on the lines held then)."""
        if self._problems is None:
            self._problems = []
            self._check()
        return self._problems

    # ---- parsing --------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str, source: str = "<config>", *, strict: bool = False) -> VMConfig:
        """Parse a config. Never drops a line. With `strict`, what Proxmox's strict parser
        refuses raises ParseError naming the file and line; otherwise it lands in `problems`."""
        if not isinstance(text, str):
            raise ParseError("config text must be a string", source=source)
        raws = text.split("\n")
        trailing = text.endswith("\n")
        if trailing:
            raws.pop()
        main = Section("", "main")
        sections = [main]
        lines = main.lines
        unknown = False  # in an unknown section: its lines are ignored
        for number, raw in enumerate(raws, start=1):
            header = cls._header(raw, number) if raw[:1] == "[" else None
            if header is not None:
                sections.append(header)
                lines, unknown = header.lines, header.kind == "unknown"
                continue
            line = _classify(raw, number)
            if unknown and line.kind != "blank":
                line.kind = "ignored"
            lines.append(line)
        cfg = cls(sections, trailing, source)
        cfg._mark_duplicates()
        if strict and cfg.problems:
            first = cfg.problems[0]
            raise ParseError(first.message, source=source, line=first.line)
        return cfg

    @staticmethod
    def _header(raw: str, number: int) -> Section | None:
        if not raw.startswith("["):
            return None
        line = Line(raw, number, "blank")
        if _PENDING.match(raw):
            return Section("pending", "pending", line)
        m = _SPECIAL.match(raw)
        if m:
            return Section(f"special:{m.group(1).lower()}", "special", line)
        m = _SNAPSHOT.match(raw)
        if m:
            return Section(m.group(1), "snapshot", line)
        m = _UNKNOWN.match(raw)
        if m:
            return Section(m.group(1), "unknown", line, active=False)
        return None

    def _mark_duplicates(self) -> None:
        last: dict[tuple[str, str], Section] = {}
        for sec in self.sections:
            if sec.kind == "unknown":
                continue
            ident = (sec.kind, sec.name)
            if ident in last:
                last[ident].active = False
            last[ident] = sec

    def _check(self) -> None:
        seen: set[tuple[str, str]] = set()
        for sec in self.sections:
            hl = sec.header.number if sec.header else 0
            if sec.kind == "unknown":
                self._problem(hl, f"unknown section [{sec.name}]: Proxmox skips it and its lines")
                continue
            ident = (sec.kind, sec.name)
            if ident in seen:
                what = {"pending": "[PENDING]", "special": f"[{sec.name}]"}.get(
                    sec.kind, f"snapshot [{sec.name}]"
                )
                self._problem(hl, f"duplicate section {what}: Proxmox keeps only the last one")
            seen.add(ident)
            for ln in sec.lines:
                self._check_line(sec, ln)

    def _check_line(self, sec: Section, ln: Line) -> None:
        if ln.kind == "invalid":
            self._problem(ln.number, f"not a 'key: value' line: {ln.raw!r}")
            return
        if ln.kind != "entry" or ln.key in (None, "description"):
            return
        assert ln.key is not None and ln.value is not None
        if ln.key == "delete":
            if sec.kind != "pending":
                self._problem(ln.number, "'delete' is only allowed in [PENDING]")
            return
        if sec.name == "special:cloudinit":
            return  # Proxmox does not validate this section
        if sec.name == "special:fleecing":
            if ln.key != "fleecing-images":
                self._problem(ln.number, f"unknown setting '{ln.key}' in [special:fleecing]")
            return
        try:
            validate(ln.key, ln.value, api=False)
        except ValidationError as exc:
            self._problem(ln.number, f"invalid value: {exc.message}")

    def _problem(self, line: int, message: str) -> None:
        assert self._problems is not None
        self._problems.append(Problem(line, message))

    # ---- access ---------------------------------------------------------------------------
    def _active(self, kind: SectionKind, name: str | None = None) -> Section | None:
        found = None
        for sec in self.sections:
            if sec.kind == kind and (name is None or sec.name == name) and sec.active:
                found = sec
        return found

    @property
    def main(self) -> Section:
        return self.sections[0]

    @property
    def pending(self) -> Section:
        """The active [PENDING] section, created (empty, not yet rendered) when absent."""
        sec = self._active("pending")
        if sec is None:
            sec = Section("pending", "pending", Line("[PENDING]", 0, "blank"))
            at = 1
            while at < len(self.sections) and self.sections[at].kind == "unknown":
                at += 1
            if at < len(self.sections):
                sec.lines.append(Line("", 0, "blank"))  # keep a blank line before what follows
            self.sections.insert(at, sec)
        return sec

    @property
    def has_pending(self) -> bool:
        sec = self._active("pending")
        return sec is not None and not sec.is_empty()

    @property
    def specials(self) -> dict[str, Section]:
        return {s.name: s for s in self.sections if s.kind == "special" and s.active}

    @property
    def snapshots(self) -> dict[str, Section]:
        return {s.name: s for s in self.sections if s.kind == "snapshot" and s.active}

    @property
    def description(self) -> str:
        return self.main.description or ""

    def line_of(self, key: str, section: Section | None = None) -> int | None:
        sec = section or self.main
        found = None
        for ln in sec.lines:
            if ln.kind == "entry" and ln.key == key:
                found = ln.number
        return found

    # ---- writing --------------------------------------------------------------------------
    def render(self) -> str:
        """The file text: byte-identical to the input when nothing was edited."""
        out: list[str] = []
        for idx, sec in enumerate(self.sections):
            if sec.header is not None:
                if sec.header.number == 0 and sec.is_empty():
                    continue  # a [PENDING] pvefix created but left empty
                if sec.header.number == 0 and out and out[-1].strip() != "":
                    out.append("")
                out.append(sec.header.raw)
            out.extend(sec.body_text())
            if idx == 0 and not out:
                continue
        text = "\n".join(out)
        if self.trailing_newline or (out and any(s.header and s.header.number == 0
                                                 for s in self.sections)):
            text += "\n"
        return text

    @property
    def digest(self) -> str:
        """Proxmox's digest: SHA-1 hex of the raw file."""
        return sha1_text(self.render())

    def render_proxmox(self) -> str:
        """The file as Proxmox's own writer would produce it from what it parsed."""
        main = self.main
        raw = _write_section(main, pending=False)
        pend = self._active("pending")
        if pend is not None and not pend.is_empty():
            raw += "\n[PENDING]\n" + _write_section(pend, pending=True)
        for name in sorted(self.specials):
            if name == "special:cloudinit" and not _has_cloudinit(main):
                continue
            raw += f"\n[{name}]\n" + _write_section(self.specials[name], pending=False)
        for name in sorted(self.snapshots):
            raw += f"\n[{name}]\n" + _write_section(self.snapshots[name], pending=False)
        return raw

    @classmethod
    def from_dicts(
        cls,
        main: dict[str, str],
        *,
        description: str | None = None,
        pending: dict[str, str] | None = None,
        pending_deletes: list[str] | None = None,
        snapshots: dict[str, dict[str, str]] | None = None,
        source: str = "<config>",
    ) -> VMConfig:
        """Build a config as Proxmox's writer would store these values."""
        text = _write_dict(main, description, pending=False)
        pend = dict(pending or {})
        if pending_deletes:
            pend["delete"] = ",".join(pending_deletes)
        if pend:
            text += "\n[PENDING]\n" + _write_dict(pend, None, pending=True)
        for name in sorted(snapshots or {}):
            text += f"\n[{name}]\n" + _write_dict((snapshots or {})[name], None, pending=False)
        return cls.parse(text, source)


def _write_dict(values: dict[str, str], description: str | None, *, pending: bool) -> str:
    raw = ""
    if description is not None:
        if description:
            raw += "".join("#" + encode_text(cl) + "\n" for cl in description.split("\n"))
        elif pending:
            raw += "#\n"
    for key in sorted(values):
        raw += f"{key}: {values[key]}\n"
    return raw


def _write_section(sec: Section, *, pending: bool) -> str:
    values: dict[str, str] = {}
    for key, value in sec.as_dict().items():
        if key_type(key) is None and sec.name != "special:fleecing":
            continue  # Proxmox drops settings it does not know
        try:
            if sec.name not in ("special:cloudinit", "special:fleecing"):
                validate(key, value, api=False)
        except ValidationError:
            continue  # dropped with a warning by Proxmox's non-strict parser
        values[key] = normalize(key, value)
    if pending and sec.deletes:
        values["delete"] = ",".join(sec.deletes)
    return _write_dict(values, sec.description, pending=pending)


def _has_cloudinit(sec: Section) -> bool:
    drive_prefixes = ("ide", "scsi", "sata", "virtio")
    for key, value in sec.as_dict().items():
        m = re.match(r"^([a-z]+)\d+$", key)
        if (
            m
            and m.group(1) in drive_prefixes
            and m.group(1) in INDEXED
            and _CLOUDINIT_VOL.search(value.split(",", 1)[0])
        ):
            return True
    return False
