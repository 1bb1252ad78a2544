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


# pydantic's error types -> pvefix's words ({input} only where the caller allows echoing it).
_WORDS = {
    "int_parsing": "expected a whole number", "int_type": "expected a whole number",
    "int_from_float": "expected a whole number", "float_parsing": "expected a number",
    "float_type": "expected a number", "bool_parsing": "expected yes or no (true/false, 1/0)",
    "bool_type": "expected yes or no (true/false, 1/0)", "string_type": "expected text",
    "missing": "missing", "extra_forbidden": "not a setting pvefix knows",
    "greater_than": "must be more than {gt}", "greater_than_equal": "must be {ge} or more",
    "less_than": "must be less than {lt}", "less_than_equal": "must be {le} or less",
    "literal_error": "expected one of {expected}", "enum": "expected one of {expected}",
    "string_too_short": "must be at least {min_length} character(s)",
    "string_too_long": "must be at most {max_length} characters",
    "path_not_exists": "no such file or directory",
}


def plain_words(error: object, *, echo: bool = False) -> str:
    """One validation error (an item of pydantic's `ValidationError.errors()`) in pvefix's
    words rather than pydantic's ("Input should be ..."); with `echo`, the value given too (never
    for settings, which may hold a secret)."""
    err = error if isinstance(error, dict) else {}
    ctx = err.get("ctx") or {}
    kind = str(err.get("type", ""))
    msg = str(err.get("msg", "invalid"))
    if kind in _WORDS:
        try:
            text = _WORDS[kind].format(**{k: str(v) for k, v in ctx.items()})
        except (KeyError, IndexError):
            text = msg
    elif kind in ("value_error", "assertion_error"):
        text = msg.split(", ", 1)[-1] if msg.startswith(("Value error, ", "Assertion")) else msg
    else:
        text = msg.replace("Input should be", "expected").replace("Input", "the value")
    if echo and "input" in err and isinstance(err["input"], str | int | float):
        given = str(err["input"])
        shown = given.isprintable() and len(given) < 80 and repr(given) not in text
        text += f" (given: {given!r})" if shown else ""
    return text
