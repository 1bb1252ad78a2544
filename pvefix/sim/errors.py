"""The error the simulated API answers with, shaped like Proxmox's (status, message, errors)."""

from __future__ import annotations


class ApiError(Exception):
    """An API failure: HTTP status, the message Proxmox puts in the reason phrase, and per-field
    parameter errors (`{"errors": {...}}`) when Proxmox raises a parameter exception."""

    def __init__(
        self, status: int, message: str, errors: dict[str, str] | None = None
    ) -> None:
        self.status = status
        self.message = message.rstrip("\n")
        self.errors = errors
        super().__init__(self.message)


def param_error(errors: dict[str, str]) -> ApiError:
    """Proxmox's raise_param_exc: 400 `Parameter verification failed.` with per-field text."""
    return ApiError(400, "Parameter verification failed.", errors)


def die(message: str) -> ApiError:
    """Perl's `die "...\\n"` inside an API handler: HTTP 500 carrying the message."""
    return ApiError(500, message)
