"""pvefix's own error types, and the one place that maps them to exit codes."""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CHANGES = 2  # plan: changes pending; check: drift found
EXIT_REFUSED = 3  # refused for safety: stale plan, digest mismatch, no confirmation
EXIT_INTERRUPTED = 130


class PvefixError(Exception):
    """Base of every error pvefix raises on purpose. Carries where it happened."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None):
        self.message = message
        self.source = source
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.source is not None:
            where = self.source
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        return f"{where}{self.message}"


class ParseError(PvefixError):
    """A file or value could not be understood (names the file, line or key)."""


class ValidationError(PvefixError):
    """A value is well-formed text but Proxmox would reject it."""


class RefusedError(PvefixError):
    """pvefix refuses to act for safety (stale plan, digest moved, no confirmation)."""

    exit_code = EXIT_REFUSED
