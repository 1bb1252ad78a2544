"""A Linux kernel command line, parsed the way the kernel parses it, edited without churn.

The kernel splits its command line in lib/cmdline.c `next_arg`: tokens are separated by
whitespace outside double quotes; a `"` anywhere toggles quoting; a token that starts with `"`
(`"param=value"`) or a value that starts with `"` (`param="value with spaces"`) has those quotes
stripped. The first `=` (not at the very start) splits the name from the value. A bare `--`
ends the kernel's parameters: everything after it goes to init, and pvefix never edits it.

`Cmdline` keeps each token's raw text and the whitespace around it, so an unchanged command line
renders byte-identical and an edit changes only the tokens it touches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from itertools import chain
from operator import itemgetter
from typing import NamedTuple

from pvefix.errors import ParseError, ValidationError

# The kernel's isspace() on ASCII. (Its ctype table also calls byte 0xA0 a space; pvefix
# handles text, where that byte is half of a UTF-8 character, so it is left out on purpose.)
WHITESPACE = " \t\n\v\f\r"

# One token and the whitespace after it, as next_arg reads it: outside quotes a run of
# non-space, non-quote characters; a `"` opens a quoted run that spans whitespace up to the
# next `"` (or to the end: an unterminated quote swallows the rest). Matched by the regex
# engine in one pass, so a 100k-token line parses in linear, fast time.
_TOKEN_WS = re.compile(r'((?:[^ \t\n\v\f\r"]+|"[^"]*"?)+)([ \t\n\v\f\r]*)')
# The same, for a line without any `"`: name (a leading `=` belongs to it), `=value`, spaces.
_UNQUOTED = re.compile(
    r"(?=[^ \t\n\v\f\r])(=?[^ \t\n\v\f\r=]*)(=[^ \t\n\v\f\r]*)?([ \t\n\v\f\r]*)"
)
_LEADING_WS = re.compile(r"[ \t\n\v\f\r]*")


def normalize_name(name: str) -> str:
    """The kernel treats `-` and `_` in parameter names as the same character.

    kernel/params.c `parameq`/`parameqn` compare names with dashes turned into underscores, for
    module parameters (`vfio-pci.ids` is `vfio_pci.ids`) and for `__setup`/`early_param` names
    alike, so pvefix compares names through this function.
    """
    return name.replace("-", "_")


class Token(NamedTuple):
    """One kernel parameter: its raw text as written, and the name and value the kernel sees.

    `value` is None for a bare flag (`quiet`) and "" for an empty value (`name=`). An immutable
    named tuple, not a pydantic model or a dataclass: a 100k-token line must parse in cheap,
    linear time, and a tuple is the cheapest immutable value Python builds.
    """

    raw: str
    name: str
    value: str | None

    @property
    def quoted(self) -> bool:
        """True when the raw text uses double quotes anywhere."""
        return '"' in self.raw

    @classmethod
    def from_raw(cls, raw: str) -> Token:
        """Split one raw token into name and value exactly as the kernel's next_arg does."""
        if '"' not in raw:  # the common case: no quote to strip
            eq = raw.find("=", 1)
            return cls(raw, raw, None) if eq < 0 else cls(raw, raw[:eq], raw[eq + 1 :])
        name, value = _split_raw(raw)
        return cls(raw=raw, name=name, value=value)

    @classmethod
    def build(cls, name: str, value: str | None = None) -> Token:
        """A new token for `name[=value]`, quoting the value only when it holds whitespace.

        Raises ValidationError for what the kernel cannot express: a name with whitespace, `=`
        or `"`, the `--` separator, or a value with a double quote in it.
        """
        if not name or any(c in WHITESPACE + '="' for c in name):
            raise ValidationError(f"invalid kernel parameter name {name!r}")
        if name == "--" and value is None:
            raise ValidationError("'--' is the init separator, not a parameter")
        if value is None:
            return cls(raw=name, name=name, value=None)
        if '"' in value:
            raise ValidationError(f"a kernel parameter value cannot hold '\"': {value!r}")
        if any(c in WHITESPACE for c in value):
            return cls(raw=f'{name}="{value}"', name=name, value=value)
        return cls(raw=f"{name}={value}", name=name, value=value)

    def with_value(self, value: str) -> Token:
        """This parameter with a new value, keeping the quoting form of the original token."""
        if '"' in value:
            raise ValidationError(f"a kernel parameter value cannot hold '\"': {value!r}")
        if self.raw.startswith('"') and self.raw.endswith('"'):
            raw = f'"{self.name}={value}"'
        elif self.raw.startswith(f'{self.name}="') or any(c in WHITESPACE for c in value):
            raw = f'{self.name}="{value}"'
        else:
            raw = f"{self.name}={value}"
        return Token(raw=raw, name=self.name, value=value)

    def matches(self, name: str, value: str | None = None) -> bool:
        """Same name (dash/underscore-insensitive) and, when `value` is given, same value."""
        if normalize_name(self.name) != normalize_name(name):
            return False
        return value is None or self.value == value


def _split_raw(raw: str) -> tuple[str, str | None]:
    """Name and value of one token, following lib/cmdline.c next_arg step by step."""
    quoted = raw.startswith('"')
    s = raw[1:] if quoted else raw
    # next_arg records the first '=' at an index above 0: a leading '=' is part of the name.
    eq = s.find("=", 1)
    if eq < 0:
        name = s[:-1] if quoted and s.endswith('"') else s
        return name, None
    name, value = s[:eq], s[eq + 1 :]
    if value.startswith('"'):
        value = value[1:]
        if value and s.endswith('"'):
            value = value[:-1]
    elif quoted and s.endswith('"'):
        value = value[:-1]
    return name, value


def _scan(text: str, pos: int) -> tuple[int, bool]:
    """End of the token starting at `pos` and whether a quote was left open."""
    in_quote = False
    i = pos
    while i < len(text):
        c = text[i]
        if c in WHITESPACE and not in_quote:
            break
        if c == '"':
            in_quote = not in_quote
        i += 1
    return i, in_quote


class Cmdline:
    """A kernel command line: parameter tokens in order, then an optional `--` init tail.

    Edits (`ensure`, `remove`, the pci helpers) change only the tokens they touch and join a
    new token with one space; the text from `--` on is kept verbatim and never edited.
    """

    def __init__(
        self,
        leading: str,
        tokens: list[Token],
        afters: list[str],
        tail: str,
        *,
        unterminated_quote: bool = False,
        source: str | None = None,
        line: int | None = None,
    ) -> None:
        self._leading = leading
        # Parallel lists: token k and the whitespace that follows it.
        self._tokens = tokens
        self._afters = afters
        self._tail = tail
        self._names: list[str] | None = None  # normalized names, built on first use
        self.unterminated_quote = unterminated_quote
        self.source = source
        self.line = line

    @classmethod
    def parse(cls, text: str, *, source: str | None = None, line: int | None = None) -> Cmdline:
        """Parse any text; never fails (the kernel accepts any text too).

        An unterminated quote swallows the rest of the line, as it does in the kernel; the
        result records it (`unterminated_quote`) and refuses edits. `source` and `line` say
        where the text came from, for error messages.
        """
        pos = _LEADING_WS.match(text).end()  # type: ignore[union-attr]  # always matches
        leading = text[:pos]
        if '"' not in text:
            return cls._parse_unquoted(text, pos, source=source, line=line)
        tokens: list[Token] = []
        afters: list[str] = []
        tail = ""
        open_quote = False
        from_raw = Token.from_raw
        for match in _TOKEN_WS.finditer(text, pos):
            raw = match.group(1)
            token = from_raw(raw)
            if token.value is None and token.name == "--":
                tail = text[match.start() :]
                open_quote = raw.count('"') % 2 == 1  # `"--` at the very end
                break
            tokens.append(token)
            afters.append(match.group(2))
        else:
            # Only the last token can hold an open quote: it swallows the rest of the line.
            open_quote = bool(tokens) and tokens[-1].raw.count('"') % 2 == 1
        return cls(
            leading, tokens, afters, tail, unterminated_quote=open_quote, source=source,
            line=line)

    @classmethod
    def _parse_unquoted(cls, text: str, pos: int, *, source: str | None,
                        line: int | None) -> Cmdline:
        # Without a quote a token is a run of non-space characters whose name ends at the first
        # `=` after its first character; the regex engine splits all of them in one call.
        body = text[pos:]
        trimmed = body.rstrip(WHITESPACE)
        if (
            trimmed.isprintable() and "  " not in trimmed and " --" not in trimmed
            and not trimmed.startswith(("--", "="))
            and " =" not in trimmed
        ):
            # The usual line: printable text (so no whitespace but ' '), one space between
            # tokens, no token starting with `=` or `--`. str.split and partition do the work.
            make = tuple.__new__
            tokens = [
                make(Token, (r, n, v if s else None))
                for r in (trimmed.split(" ") if trimmed else ())
                for n, s, v in (r.partition("="),)]
            afters = [" "] * len(tokens)
            if afters:
                afters[-1] = body[len(trimmed) :]
            return cls(text[:pos], tokens, afters, "", source=source, line=line)
        found = _UNQUOTED.findall(text, pos)
        make = tuple.__new__
        tokens = [make(Token, (n + v, n, v[1:] if v else None)) for n, v, _ in found]
        afters = [after for _, _, after in found]
        tail = ""
        for k, token in enumerate(tokens):
            if token.raw == "--":  # the init separator: the rest is kept verbatim
                at = pos + sum(len(t.raw) + len(a) for t, a in zip(tokens[:k], afters[:k],
                                                                   strict=True))
                tail = text[at:]
                del tokens[k:], afters[k:]
                break
        return cls(text[:pos], tokens, afters, tail, source=source, line=line)

    def copy(self) -> Cmdline:
        """An independent copy (edits to one do not show in the other)."""
        copy = Cmdline(
            self._leading,
            self._tokens.copy(),
            self._afters.copy(),
            self._tail,
            unterminated_quote=self.unterminated_quote, source=self.source, line=self.line)
        copy._names = self._names  # never changed in place: an edit builds a new one
        return copy

    # -- reading --------------------------------------------------------------------------

    @property
    def tokens(self) -> tuple[Token, ...]:
        """The kernel parameters, in order (nothing from `--` on)."""
        return tuple(self._tokens)

    def __iter__(self) -> Iterator[Token]:
        return iter(self.tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    @property
    def init_args(self) -> tuple[str, ...]:
        """What init receives after `--` (quotes stripped as the kernel does)."""
        if not self._tail:
            return ()
        end, _ = _scan(self._tail, 0)  # the separator may be written quoted: "--"
        rest = Cmdline.parse(self._tail[end:])
        args = [t.name if t.value is None else f"{t.name}={t.value}" for t in rest.tokens]
        return tuple(args)

    @property
    def init_tail(self) -> str:
        """The raw text from `--` to the end ("" when there is no separator)."""
        return self._tail

    def names(self) -> list[str]:
        """Every parameter's name as the kernel compares it (`normalize_name`), in order.

        Built once per version of the line (an edit drops it), so the checks that look names
        up (`has`, `named`, the linter) cost one pass together, not one each."""
        if self._names is None:
            self._names = [t[1].replace("-", "_") for t in self._tokens]
        return self._names

    def named(self, name: str) -> list[Token]:
        """Every token named `name` (dash/underscore-insensitive), in order."""
        wanted = normalize_name(name)
        return [t for t, n in zip(self._tokens, self.names(), strict=True) if n == wanted]

    def get(self, name: str) -> list[str | None]:
        """Values of every token named `name`, in order (None for a bare flag)."""
        return [t.value for t in self.named(name)]

    def has(self, name: str, value: str | None = None) -> bool:
        """True if a token has this name and, when `value` is given, this value."""
        return any(value is None or t.value == value for t in self.named(name))

    def render(self) -> str:
        """The command line text; byte-identical to the parsed text when nothing changed."""
        pairs = zip(map(itemgetter(0), self._tokens), self._afters, strict=True)
        return "".join((self._leading, *chain.from_iterable(pairs), self._tail))

    def __str__(self) -> str:
        return self.render()

    # -- editing --------------------------------------------------------------------------

    def _check_editable(self) -> None:
        if self.unterminated_quote:
            raise ParseError(
                "the command line has an unterminated '\"'; the kernel would swallow any "
                "parameter added after it, so pvefix will not edit it",
                source=self.source, line=self.line)

    def ensure(self, name: str, value: str | None = None) -> bool:
        """Make sure `name[=value]` is present; append it at the end if not.

        Present means `has(name, value)`: with value None any token of that name counts.
        Appends before a `--` separator, never after it. Returns True if the line changed.
        """
        if self.has(name, value):
            return False
        self.append(Token.build(name, value))
        return True

    def append(self, token: Token) -> None:
        """Add a token after the last parameter (before `--`), separated by one space."""
        self._check_editable()
        self._names = None
        if self._tokens:
            self._tokens.append(token)
            self._afters.append(self._afters[-1])
            self._afters[-2] = " "
        else:
            self._tokens.append(token)
            self._afters.append(" " if self._tail else "")

    def dedupe(self) -> bool:
        """Remove tokens whose exact text already appeared earlier; True if any went.

        Only for parameters that are never given another value on the line: in `a=1 a=2 a=1`
        the last `a=1` decides what the kernel keeps, so none of them is dropped."""
        self._check_editable()
        # A line without a repeated raw token (the usual case) needs no second look.
        raws = [t[0] for t in self._tokens]
        if len(set(raws)) == len(raws):
            return False
        values: dict[str, set[str | None]] = {}
        for name, token in zip(self.names(), self._tokens, strict=True):
            values.setdefault(name, set()).add(token[2])
        seen: set[str] = set()
        single = {name for name, vals in values.items() if len(vals) == 1}

        def repeat(token: Token) -> bool:
            raw = token[0]
            again = raw in seen and token[1].replace("-", "_") in single
            seen.add(raw)
            return again

        return self._drop(repeat)

    def remove(self, name: str, value: str | None = None) -> bool:
        """Remove every token matching `name` (and `value` when given). True if any went."""
        self._check_editable()
        return self._drop(lambda t: t.matches(name, value))

    def replace(self, index: int, token: Token) -> None:
        """Put `token` in place of the parameter at `index`; the whitespace stays."""
        self._check_editable()
        self._tokens[index] = token
        self._names = None

    def without(self, names: tuple[str, ...]) -> Cmdline:
        """A copy without the tokens named in `names` (a view, allowed on any line)."""
        result = self.copy()
        result._drop(lambda t: any(t.matches(n) for n in names))
        return result

    def _drop(self, doomed: Callable[[Token], bool]) -> bool:
        # One pass, linear in the number of tokens. A removed token takes the separator before
        # it along, so "a b c" minus b is "a c" and removing a token that was just appended
        # restores the original text exactly (a removed first token takes the one after it).
        tokens: list[Token] = []
        afters: list[str] = []
        changed = False
        for token, after in zip(self._tokens, self._afters, strict=True):
            if not doomed(token):
                tokens.append(token)
                afters.append(after)
                continue
            changed = True
            if afters:
                afters[-1] = after
        self._tokens, self._afters = tokens, afters
        self._names = None
        return changed
