"""Where the executor talks to the admin: results on stdout, progress on stderr, and the
confirmation question. Passed in, so tests capture output and answer questions."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from pvefix.render.inert import inert_text


class Console:
    """`answer` decides confirmations in tests; otherwise a terminal is asked, and without one
    the answer is no (nothing is written without a yes)."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None,
                 answer: Callable[[str], bool] | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.answer = answer
        self.undo: str | None = None  # set once changes are written that a Ctrl-C leaves

    def written(self, undo: str) -> None:
        """From now on the changes stay in place when interrupted: `undo` (the printed
        `pvefix rollback` line) is what the Ctrl-C message gives (commands/apply_cmd.py)."""
        self.undo = undo

    def say(self, text: str = "") -> None:
        print(inert_text(text), file=self.out, flush=True)  # host text in it acts on nothing

    def say_wrapped(self, text: str, hang: int | None = None) -> None:
        """`text` (prose, never a command to copy) filled to the output's width, each line
        under its own leading indent, never broken inside a word (pvefix/console/terminal.py);
        `hang`: how much further in the lines after the first go (default: under a label)."""
        from pvefix.console.terminal import terminal

        term = terminal(self.out)  # a terminal's own width, else COLUMNS, else 80
        self.say(term.fit(text, hang=hang))

    def say_step(self, command: str, indent: str) -> None:
        """A step to type, whole; a comment step filled, each line a comment."""
        from pvefix.console.terminal import terminal

        self.say(terminal(self.out).step(command, indent))

    def progress(self, text: str) -> None:
        """A step on stderr, `pvefix: ` first; on a terminal filled to its width (a path or a
        value, one word, stays whole), in a log one line."""
        from pvefix.console.terminal import say_err

        say_err(inert_text(f"pvefix: {text}"), hang=8, stream=self.err)

    def confirm(self, question: str) -> bool:
        if self.answer is not None:
            return self.answer(question)
        reply = self._ask(f"{question} [y/N] ")
        return reply is not None and reply.strip().lower() in ("y", "yes")

    def confirm_typed(self, question: str, word: str) -> bool | None:
        """A confirmation that only `word` typed in full gives (terraform's typed `yes`): for
        what stops more than the admin's own VM. None: no terminal to ask (and no answer)."""
        if self.answer is not None:
            return self.answer(question)
        reply = self._ask(f"{question}\nType {word} to confirm (anything else refuses): ")
        return None if reply is None else reply.strip() == word

    def _ask(self, prompt: str) -> str | None:
        """The terminal's one-line reply to `prompt`; None without a terminal."""
        if not sys.stdin.isatty():
            return None
        print(inert_text(prompt), end="", file=self.err, flush=True)
        try:
            return sys.stdin.readline()
        except (EOFError, OSError):
            return ""
