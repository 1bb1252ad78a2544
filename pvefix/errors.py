"""pvefix's own error types, and the one place that maps them to exit codes."""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterator

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


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and every exception behind it, each once: causes, contexts, a `reason` (urllib3)
    and exceptions passed as arguments (requests wraps urllib3 wraps the socket's error)."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        current = todo.pop()
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo.extend([current.__cause__, current.__context__, getattr(current, "reason", None)])
        todo.extend(a for a in current.args if isinstance(a, BaseException))


def os_error_in(exc: BaseException) -> OSError | None:
    """The OSError (with an errno) at the root of a library's exception chain, if any."""
    for current in exception_chain(exc):
        if isinstance(current, OSError) and current.errno is not None:
            return current
    return None


_HINTS = {
    errno.ECONNREFUSED: "nothing listens there: is it the node's address, and the API port "
    "(8006; --port, or host:port)?",
    errno.EHOSTUNREACH: "no route to the host: check the address and the network",
    errno.ENETUNREACH: "no route to the network: check the address and the network",
    errno.ETIMEDOUT: "no answer: a firewall, or a wrong address (raise --timeout if slow)",
}


def unreachable_hint(cause: OSError | None, where: str) -> str:
    """`where`: errno name, the system's text and a hint, e.g. for ECONNREFUSED."""
    if cause is None or cause.errno is None:
        return f"{where}: no connection (check the host name, port and network)"
    if isinstance(cause, socket.gaierror):
        return f"{where}: the host name does not resolve ({cause.strerror}): check it"
    name = errno.errorcode.get(cause.errno, str(cause.errno))
    text = cause.strerror or os.strerror(cause.errno)
    hint = _HINTS.get(cause.errno)
    return f"{where}: {name} ({text})" + (f"; {hint}" if hint else "")
