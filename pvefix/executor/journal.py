"""The journal: one JSON object per line, appended and fsync'd before pvefix goes on.

Each step is recorded before it runs (with what it will write) and after (with what it wrote),
so an apply cut off by kill -9, a lost connection or a power cut leaves a record of which
targets may have moved. rollback reads it to tell pvefix's own changes from other people's.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pvefix.store.statedir import FILE_MODE, fsync_dir, read_private_text

JOURNAL_FILE = "journal.jsonl"
# A crash drill: hold the process after record N, or after each record of an event (a comma-
# separated list of either: "7", "step-end,undo-begin") so a test (or an admin rehearsing) can
# kill -9 it, or press Ctrl-C, at exactly that boundary. Never set in normal use.
ENV_HOLD = "PVEFIX_JOURNAL_HOLD_AFTER"

Record = dict[str, Any]
Hook = Callable[[Record], None]


class Journal:
    """An append-only journal file; `hook(record)` runs after each record is on disk."""

    def __init__(self, path: Path, hook: Hook | None = None) -> None:
        self.path = path
        self.hook = hook
        existing = read_journal(path) if path.exists() else []
        self.seq = existing[-1]["seq"] if existing else 0
        created = not path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
                     FILE_MODE)
        os.close(fd)
        if created:
            fsync_dir(path.parent)

    def record(self, event: str, **fields: Any) -> Record:
        """Append one record and fsync it; returns it."""
        self.seq += 1
        entry: Record = {
            "seq": self.seq,
            "at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "event": event,
            **fields}
        line = json.dumps(entry, sort_keys=True) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        _hold_if_asked(self.seq, event)
        if self.hook is not None:
            self.hook(entry)
        return entry


def _hold_if_asked(seq: int, event: str) -> None:
    wanted = {w.strip() for w in os.environ.get(ENV_HOLD, "").split(",")}
    if str(seq) in wanted or event in wanted:
        while True:  # wait to be killed; the drill's point is to die here
            time.sleep(3600)


def read_journal(path: Path) -> list[Record]:
    """Every complete record; a torn last line (power cut mid-write) is ignored."""
    records: list[Record] = []
    try:
        lines = read_private_text(path).splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict) and "seq" in item and "event" in item:
            records.append(item)
    return records
