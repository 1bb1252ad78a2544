"""The apply's transaction: steps started inside it are undone, in reverse, through their
own compare-and-swap undo when anything fails (a second Ctrl-C stops the undo and says what
is still changed); the result is an undo report the error carries."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pvefix.digest import sha1_text
from pvefix.errors import PvefixError, RefusedError
from pvefix.executor import checks
from pvefix.executor.console import Console
from pvefix.executor.journal import Journal
from pvefix.executor.snapshot import Snapshot
from pvefix.executor.steps import Step, StepContext, UndoConflict
from pvefix.hints import Context
from pvefix.paths import vm_config


class ApplyFailed(PvefixError):
    """A step failed; the steps done were undone (the message lists them)."""


@contextlib.contextmanager
def transaction(ctx: StepContext, journal: Journal, console: Console,
                snapshot: Snapshot, undo_command: str | None = None) -> Iterator[list[Step]]:
    """Yield the list of started steps; on ANY exception undo them in reverse and re-raise
    (RefusedError stays a refusal, Ctrl-C stays Ctrl-C) with the undo report. What cannot be
    undone is left to `undo_command` (a `pvefix rollback` line with the apply's options)."""
    started: list[Step] = []
    undo_command = undo_command or Context().command(
        ["rollback", str(snapshot.meta.vmid), "--snapshot", snapshot.id])
    try:
        yield started
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):  # said at once, before the first undo
            console.progress(interrupted_line(started))
        try:
            undone, failures = undo_steps(started, ctx, journal, console)
        except UndoInterrupted as again:
            # A second Ctrl-C: stop, but say exactly what is still changed and how to undo it.
            journal.record("apply-end", status="interrupted-undo", remaining=again.remaining)
            console.progress(interrupted_undo_report(again, undo_command))
            raise
        exact = _restore_exact(ctx, snapshot, journal)
        if exact:
            undone.append(exact)
        status = "failed" if failures else "undone"
        journal.record("apply-end", status=status, error=str(exc))
        report = _undo_report(exc, undone, failures, undo_command)
        if isinstance(exc, KeyboardInterrupt):  # raised bare below: said here, once
            console.progress(report)
        # Any other failure carries the report in its message, which the command prints once.
        if isinstance(exc, RefusedError) or any(f.endswith("[conflict]") for f in failures):
            raise RefusedError(f"{exc}\n{report}") from exc
        if isinstance(exc, PvefixError):
            raise ApplyFailed(f"{exc}\n{report}") from exc
        if isinstance(exc, Exception):
            raise ApplyFailed(f"{type(exc).__name__}: {exc}\n{report}") from exc
        raise


class UndoInterrupted(KeyboardInterrupt):
    """Ctrl-C while undoing: `remaining` are the summaries of the steps still in place."""

    def __init__(self, undone: list[str], remaining: list[str]) -> None:
        self.undone = undone
        self.remaining = remaining
        super().__init__("interrupted while undoing")


def interrupted_line(started: list[Step]) -> str:
    """What the first Ctrl-C gets at once: what happens now."""
    if not started:
        return "interrupted (Ctrl-C): nothing had been written; stopping"
    return (f"interrupted (Ctrl-C): undoing the {len(started)} step(s) done so far, newest "
            "first; Ctrl-C again stops the undo and says what is still changed")


def interrupted_undo_report(again: UndoInterrupted, undo_command: str) -> str:
    lines = ["interrupted again while undoing: the undo stopped."]
    lines.append("undone: " + ("; ".join(again.undone) if again.undone else "nothing yet"))
    lines.append("STILL CHANGED (not undone): " + "; ".join(again.remaining))
    lines.append(f"undo them with: {undo_command}")
    return "\n".join(lines)


def undo_steps(started: list[Step], ctx: StepContext, journal: Journal,
               console: Console) -> tuple[list[str], list[str]]:
    undone: list[str] = []
    failures: list[str] = []
    todo = list(reversed(started))
    for index, step in enumerate(todo):
        try:
            journal.record("undo-begin", step=step.id, kind=step.kind)
            what = step.undo(ctx)
        except KeyboardInterrupt:
            # This step may or may not be undone: it is listed as still changed (a Ctrl-C
            # while its undo-begin is journaled too: the report is never skipped).
            raise UndoInterrupted(undone, [s.summary() for s in todo[index:]]) from None
        except UndoConflict as exc:
            # Another writer's change: stop undoing (earlier steps may depend on it).
            failures.append(f"{step.id}: {exc} [conflict]")
            journal.record("undo-failed", step=step.id, error=str(exc), conflict=True)
            break
        except Exception as exc:  # keep undoing the rest; report what could not be
            failures.append(f"{step.id}: {exc}")
            journal.record("undo-failed", step=step.id, error=str(exc))
            continue
        journal.record("undo-end", step=step.id, undone=what)
        if what:
            undone.append(what)
            console.progress(f"undone: {what}")
    return undone, failures


def _restore_exact(ctx: StepContext, snapshot: Snapshot, journal: Journal) -> str | None:
    """After undoing through the API the values are back; put back the exact bytes too when
    the file differs only in form (never over someone else's edit)."""
    if not ctx.sessions.conn.reaches_node or snapshot.meta.vm.config_source != "file":
        return None
    try:
        path = vm_config(snapshot.meta.node, snapshot.meta.vmid)
        raw = ctx.node.read_file(path)
        text = snapshot.vm_config_text()
        if raw is None or raw == text or not checks.same_content(raw, text):
            return None
        journal.record("restore-begin", kind="vm-config", method="file", path=path,
                       digest=snapshot.meta.vm.digest)
        ctx.node.replace_file(path, text)
        journal.record("restore-end", kind="vm-config", digest=sha1_text(text))
        return f"VM {snapshot.meta.vmid} config bytes restored (digest {sha1_text(text)})"
    except PvefixError:
        return None


def _undo_report(exc: BaseException, undone: list[str], failures: list[str],
                 undo_command: str) -> str:
    lines = [f"apply stopped: {exc}" if not isinstance(exc, KeyboardInterrupt)
             else "apply interrupted"]
    lines.append("undone, in reverse order: " + ("; ".join(undone) if undone else
                                                  "nothing had been written"))
    if failures:
        lines.append("COULD NOT UNDO: " + "; ".join(failures))
        conflict = any(f.endswith("[conflict]") for f in failures)
        lines.append("restore by hand or with"
                     + (" (--force overwrites the other writer's change)" if conflict else "")
                     + f": {undo_command}" + (" --force" if conflict else ""))
    return "\n".join(lines)


