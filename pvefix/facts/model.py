"""What a fact declaration is: how it is read, parsed, kept in a host tree, and by whom."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

T = TypeVar("T")
User = Literal["plan", "check", "collect"]


class Output(Protocol):
    """One command's answer as every session gives it (target.result.CommandResult is one)."""

    @property
    def exit_code(self) -> int | None: ...

    @property
    def stdout(self) -> str: ...

    @property
    def stderr(self) -> str: ...

    @property
    def ok(self) -> bool: ...


@dataclass(frozen=True)
class Answer:
    """An answer made from a host tree (a bundle, a scenario): a file's text as `cat` gives it."""

    exit_code: int | None
    stdout: str
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @classmethod
    def of_file(cls, text: str | None) -> Answer:
        """`cat` of a file whose text is `text` (None: no such file)."""
        if text is None:
            return cls(1, "", "cat: No such file or directory\n")
        return cls(0, text)


@dataclass(frozen=True)
class Command:
    """A command run on the node, as an argument list. `{name}` in an argument is the value
    of the fact `name` (read in an earlier round: `Fact.needs`)."""

    argv: tuple[str, ...]


@dataclass(frozen=True)
class Api:
    """A GET of the Proxmox API; `{node}` / `{vmid}` in the path are filled per read."""

    path: str
    params: tuple[tuple[str, str], ...] = ()

    def at(self, node: str = "", vmid: int | None = None) -> tuple[str, dict[str, str] | None]:
        """The path with `{node}` and `{vmid}` filled, and the query parameters (None: none)."""
        path = self.path.replace("{node}", node)
        if vmid is not None:
            path = path.replace("{vmid}", str(vmid))
        if "{" in path:
            raise KeyError(f"GET {self.path}: a node or VMID is missing")
        return path, dict(self.params) or None


@dataclass(frozen=True)
class Fact(Generic[T]):
    """One node fact: read by `read`, parsed by `parse` (None: not asked, or no answer),
    kept in a host tree at `tree` (a path under the tree's root, or `meta:KEY` of
    pvefix-host.json), `default` when it cannot be read, needed by the commands `used_by`.

    A tree kept as a file answers the command with the file's text (`cat`); a path with a
    glob with the matching files, one a line (`find`); a `meta:` key through `shown`, how the
    command prints the value kept there (None kept: the command fails). The simulator answers
    every declared command so (`pvefix.facts.project.tree_answer`)."""

    name: str
    read: Command | Api
    parse: Callable[[Output | None], T]
    tree: str
    default: T
    used_by: frozenset[User]
    needs: tuple[str, ...] = ()
    # The NodeFacts field the parsed value fills as it is, in every reader (the projection
    # `pvefix.facts.project.node_fields` makes); None: a reader builds it by hand.
    field: str | None = None
    # How the command prints the value a tree keeps at its `meta:` key (None: a file fact).
    shown: Callable[[Any], Output] | None = None

    def argv(self, known: Mapping[str, str] | None = None) -> tuple[str, ...]:
        """The command line, `{name}` arguments filled from `known` (the facts it needs)."""
        if not isinstance(self.read, Command):
            raise TypeError(f"fact {self.name} is read through the API, not by a command")
        values = dict(known or {})
        missing = [n for n in self.needs if n not in values]
        if missing:
            raise KeyError(f"fact {self.name} needs {', '.join(missing)} first")
        return tuple(_fill(arg, self.needs, values) for arg in self.read.argv)

    def match(self, argv: Sequence[str]) -> dict[str, str] | None:
        """The inverse of `argv`: the needed facts' values when `argv` is this fact's command
        (with any values in their places), None when it is another command."""
        if not isinstance(self.read, Command) or len(argv) != len(self.read.argv):
            return None
        values: dict[str, str] = {}
        for template, word in zip(self.read.argv, argv, strict=True):
            found = re.fullmatch(_pattern(template, self.needs), word, re.DOTALL)
            if found is None:
                return None
            for name, value in found.groupdict().items():
                if values.setdefault(name, value) != value:
                    return None
        return values

    def tree_path(self, known: Mapping[str, str] | None = None) -> str:
        """Where a host tree keeps it, `{name}` filled like `argv`."""
        return _fill(self.tree, self.needs, dict(known or {}))


def _pattern(template: str, needs: tuple[str, ...]) -> str:
    """A regular expression of one argument: `{name}` of a needed fact matches any value
    (the same value where it is named twice), the rest itself."""
    out: list[str] = []
    seen: set[str] = set()
    pos = 0
    for slot in re.finditer(r"\{(\w+)\}", template):
        name = slot.group(1)
        if name not in needs:
            continue
        out.append(re.escape(template[pos:slot.start()]))
        out.append(f"(?P={name})" if name in seen else f"(?P<{name}>.+?)")
        seen.add(name)
        pos = slot.end()
    out.append(re.escape(template[pos:]))
    return "".join(out)


def _fill(text: str, needs: tuple[str, ...], values: Mapping[str, str]) -> str:
    """`{name}` of each needed fact replaced by its value (other braces, like dpkg-query's
    `${Package}`, stay as they are)."""
    for name in needs:
        text = text.replace("{" + name + "}", values.get(name, "{" + name + "}"))
    return text
