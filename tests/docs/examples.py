"""Command examples of README.md and docs/*.md, as an admin would copy them.

An example is a line starting with `pvefix` (or `$ pvefix`, `.venv/bin/pvefix`) in a ```sh,
```bash or ```console block or in an indented block; `\\` continuations are joined. Its trailing
comment may carry a marker:

- `# real host`: needs a real Proxmox VE host, GPUs or files only a host has: parsed by the
  CLI (every option and argument checked), not run;
- a line ending in `&` starts something in the background (a simulator): parsed, not run;
- `exit N` (e.g. `# compared; exit 1: ...`): the exit status the page promises (default: 0 or
  2, nothing to do or changes);
- `placeholder`: the example names a path or profile the reader must supply (`--profile prod`,
  `--bundle ./host-tree`): every `--connection`, `--bundle` or `--profile` value that no
  earlier example of the page makes (`--ready-file`, `-o`/`--out`, `collect import SRC DEST`;
  `.demo/` is what `make demo` makes; a `# real host` example names the reader's own) must
  say so (`placeholders`).

Every other example is run by tests/docs/test_doc_examples.py against a simulator.
"""

from __future__ import annotations

import itertools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
REAL_HOST = "real host"
_FENCE = re.compile(r"^```(\w*)\s*$")
_OPERATORS = {">", ">>", "<", "|", ";", "&&", "||", "&", "2>", "2>&1"}


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    text: str  # the shell line, prompt removed, continuations joined
    comment: str

    @property
    def argv(self) -> list[str]:
        """pvefix's own arguments: up to the first shell operator."""
        out: list[str] = []
        for word in _words(self.text)[1:]:
            if word in _OPERATORS or word.startswith((">", "2>")):
                break
            out.append(word)
        return out

    @property
    def exits(self) -> tuple[int, ...]:
        """The exit statuses the page promises for this example."""
        said = re.search(r"\bexit (\d+)\b", self.comment)
        return (int(said.group(1)),) if said else (0, 2)

    @property
    def background(self) -> bool:
        words = _words(self.text)
        return bool(words) and words[-1] == "&"

    @property
    def runnable(self) -> bool:
        """Run against the simulator: not marked for a real host, not a server (`sim serve`
        runs until stopped: parsed only)."""
        return (REAL_HOST not in self.comment and not self.background
                and self.argv[:2] != ["sim", "serve"])

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def _words(text: str) -> list[str]:
    """Shell words, with `;`, `&`, `|`, `>` split off as the shell does; comments dropped."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def _comment(line: str) -> str:
    """The trailing comment: after the first ` #` outside quotes."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[i + 1:].strip()
    return ""


def _command(raw: str) -> str | None:
    text = raw.strip()
    text = text.removeprefix("$ ")
    for prefix in ("pvefix ", ".venv/bin/pvefix "):
        if text.startswith(prefix):
            return "pvefix " + text[len(prefix):]
    return None


def examples(page: Path) -> list[Example]:
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Example] = []
    in_fence: str | None = None
    i = 0
    while i < len(lines):
        raw = lines[i]
        fence = _FENCE.match(raw.strip())
        if fence is not None:
            in_fence = None if in_fence is not None else fence.group(1)
            i += 1
            continue
        shell_block = in_fence in ("sh", "bash", "console", "shell")
        indented = in_fence is None and raw.startswith("    ")
        start = i
        if shell_block or indented:
            while raw.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                raw = raw.rstrip()[:-1] + " " + lines[i].strip()
            command = _command(raw)
            if command is not None:
                out.append(Example(str(page.relative_to(ROOT)), start + 1, command,
                                   _comment(command)))
        i += 1
    return out


PLACEHOLDER = "placeholder"
_SUPPLIED = ("--connection", "--bundle", "--profile")
_MAKES = ("--ready-file", "-o", "--out")


def placeholders(page_examples: list[Example]) -> list[tuple[Example, str]]:
    """(example, value) for each `--connection`/`--bundle`/`--profile` value the reader must
    supply: made by no earlier example of the page, not a built-in scenario or `make demo`'s."""
    made: set[str] = set()
    out: list[tuple[Example, str]] = []
    for example in page_examples:
        argv = example.argv
        mine = REAL_HOST in example.comment  # the reader's own host: said already
        for flag, value in itertools.pairwise(argv):
            if (flag in _SUPPLIED and value not in made and not mine
                    and not value.startswith(("pvefix/scenarios/", ".demo/"))):
                out.append((example, value))
        made.update(v for f, v in itertools.pairwise(argv) if f in _MAKES)
        if argv[:2] == ["collect", "import"] and len(argv) > 3:
            made.add(argv[3])
    return out


def all_examples() -> list[Example]:
    return [e for page in PAGES for e in examples(page)]
