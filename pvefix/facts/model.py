"""What a fact declaration is: how it is read, parsed, kept in a host tree, and by whom."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

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
    pvefix-host.json), `default` when it cannot be read, needed by the commands `used_by`."""

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

    def argv(self, known: Mapping[str, str] | None = None) -> tuple[str, ...]:
        """The command line, `{name}` arguments filled from `known` (the facts it needs)."""
        if not isinstance(self.read, Command):
            raise TypeError(f"fact {self.name} is read through the API, not by a command")
        values = dict(known or {})
        missing = [n for n in self.needs if n not in values]
        if missing:
            raise KeyError(f"fact {self.name} needs {', '.join(missing)} first")
        return tuple(_fill(arg, self.needs, values) for arg in self.read.argv)

    def tree_path(self, known: Mapping[str, str] | None = None) -> str:
        """Where a host tree keeps it, `{name}` filled like `argv`."""
        return _fill(self.tree, self.needs, dict(known or {}))


def _fill(text: str, needs: tuple[str, ...], values: Mapping[str, str]) -> str:
    """`{name}` of each needed fact replaced by its value (other braces, like dpkg-query's
    `${Package}`, stay as they are)."""
    for name in needs:
        text = text.replace("{" + name + "}", values.get(name, "{" + name + "}"))
    return text
