"""Waits an admin can watch: what is awaited and for how long.

    with waiting("VM 100", "shutdown task", say) as wait:
        run_task(api, node, ...)        # the live line counts the seconds meanwhile
        wait.update("api down, ssh down")

On a terminal (stderr a TTY, TERM not `dumb`) one live line is redrawn through rich, e.g.
`VM 100: waiting for shutdown task, 12 s`, with the latest state after it; it disappears when
the wait ends. Off a terminal (CI logs, pipes) nothing is redrawn: each state change is one
clean line through `say`, with the elapsed seconds, and while nothing changes a line
`VM 100: still waiting for the shutdown task, 30 s (api down, ssh down)` every
`STILL_WAITING_S` seconds (from a timer thread, so a wait inside one blocking call speaks too),
so a CI log never sits silent through a host reboot. NO_COLOR turns colour off.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

Say = Callable[[str], None]

#: Off a terminal, the longest a wait stays silent (seconds).
STILL_WAITING_S = 30.0


def live_terminal(stream: TextIO) -> bool:
    """True where a redrawn line is welcome: a TTY whose TERM is not `dumb`."""
    if os.environ.get("TERM", "") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Wait:
    """One wait in progress; `update(state)` reports a change of what is seen."""

    def __init__(self, subject: str, awaited: str, say: Say) -> None:
        self.subject = subject
        self.awaited = awaited
        self.say = say
        self.state = ""
        self.started = time.monotonic()
        self.live = False

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def line(self, still: bool = False) -> str:
        text = (f"{self.subject}: {'still ' if still else ''}waiting for {self.awaited}, "
                f"{self.elapsed:.0f} s")
        return f"{text} ({self.state})" if self.state else text

    def update(self, state: str) -> None:
        if state == self.state:
            return
        self.state = state
        if not self.live:
            self.say(f"{self.subject}: {state} ({self.elapsed:.1f} s)")

    def __rich__(self) -> Any:
        from rich.text import Text

        return Text(self.line(), style="cyan")


@contextlib.contextmanager
def waiting(subject: str, awaited: str, say: Say,
            stream: TextIO | None = None) -> Iterator[Wait]:
    """A Wait shown live on a terminal, as plain lines elsewhere (see the module doc)."""
    out = stream or sys.stderr
    wait = Wait(subject, awaited, say)
    if not live_terminal(out):
        with _still_waiting(wait, STILL_WAITING_S):
            yield wait
        return
    from rich.console import Console
    from rich.live import Live

    console = Console(file=out, no_color="NO_COLOR" in os.environ or None, highlight=False)
    wait.live = True
    with Live(wait, console=console, refresh_per_second=4, transient=True,
              redirect_stdout=False, redirect_stderr=False):
        yield wait


@contextlib.contextmanager
def _still_waiting(wait: Wait, every: float) -> Iterator[None]:
    """While the block runs, `wait.say` a still-waiting line every `every` seconds."""
    done = threading.Event()

    def speak() -> None:
        while not done.wait(every):
            wait.say(wait.line(still=True))

    timer = threading.Thread(target=speak, name="pvefix-still-waiting", daemon=True)
    timer.start()
    try:
        yield
    finally:
        done.set()
        timer.join(timeout=1.0)
