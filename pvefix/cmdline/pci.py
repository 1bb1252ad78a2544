"""The `pci=` parameter: comma-joined options, possibly spread over several tokens.

The kernel hands each `pci=` token to drivers/pci/pci.c `pci_setup`, in command line order, and
that splits the value on commas and applies each option in turn (empty pieces are skipped). So
`pci=nocrs,realloc` equals `pci=nocrs pci=realloc`, and for `realloc` the last option wins:
`realloc` and `realloc=on` enable it, `realloc=off` disables it.
"""

from __future__ import annotations

from typing import Literal

from pvefix.cmdline.tokens import WHITESPACE, Cmdline, Token
from pvefix.errors import ValidationError

ReallocState = Literal["on", "off"]


def pci_options(cmdline: Cmdline) -> list[str]:
    """Every option of every `pci=` token, flattened, in command line order."""
    options: list[str] = []
    for token in cmdline.named("pci"):
        if token.value:
            options.extend(opt for opt in token.value.split(",") if opt)
    return options


def realloc_option_state(option: str) -> ReallocState | None:
    """What one pci option does to realloc: "on", "off", or None (not about realloc)."""
    # pci_setup compares prefixes with strncmp: "realloc=" first, then plain "realloc", and
    # pci_realloc_get_opt only looks at the first letters of the value ("off"/"on").
    if option.startswith("realloc="):
        arg = option[len("realloc=") :]
        if arg.startswith("off"):
            return "off"
        if arg.startswith("on"):
            return "on"
        return None
    if option.startswith("realloc"):
        return "on"
    return None


def pci_realloc_state(cmdline: Cmdline) -> ReallocState | None:
    """"on" or "off" as the kernel ends up after all `pci=` options (last one wins).

    None when no option sets it; the kernel then decides by itself (it turns realloc on when
    it finds SR-IOV BARs left unassigned by the firmware).
    """
    state: ReallocState | None = None
    for option in pci_options(cmdline):
        found = realloc_option_state(option)
        if found is not None:
            state = found
    return state


def ensure_pci_option(cmdline: Cmdline, option: str) -> bool:
    """Make sure the kernel ends up with `pci` option `option`. True if the line changed.

    For `realloc`, every `realloc=off` is first turned into `realloc` (in place). Then, if the
    option is still missing, it joins the last existing `pci=` token (`pci=nocrs` becomes
    `pci=nocrs,realloc`), or a new `pci=OPTION` token is appended.
    """
    if not option or any(c in WHITESPACE + ',"' for c in option):
        raise ValidationError(f"invalid pci= option {option!r}")
    changed = False
    if option == "realloc":
        changed = replace_realloc_off(cmdline)
        if pci_realloc_state(cmdline) == "on":
            return changed
    elif option in pci_options(cmdline):
        return False
    last = _last_pci_index(cmdline)
    if last is None:
        cmdline.append(Token.build("pci", option))
        return True
    token = cmdline.tokens[last]
    value = f"{token.value},{option}" if token.value else option
    cmdline.replace(last, token.with_value(value))
    return True


def replace_realloc_off(cmdline: Cmdline) -> bool:
    """Turn every `realloc=off` option into `realloc`, in place. True if any changed."""
    changed = False
    for index, token in enumerate(cmdline.tokens):
        if not _editable_pci(token) or token.value is None:
            continue
        parts = token.value.split(",")
        new = ["realloc" if realloc_option_state(p) == "off" else p for p in parts]
        if new != parts:
            cmdline.replace(index, token.with_value(",".join(new)))
            changed = True
    return changed


def _last_pci_index(cmdline: Cmdline) -> int | None:
    # Only the very last pci= token may take the new option: joining an earlier one would put
    # the option before a later token that can override it (realloc=off after it, say).
    last = None
    for index, token in enumerate(cmdline.tokens):
        if token.matches("pci") and token.value is not None:
            last = index
    if last is None or not _editable_pci(cmdline.tokens[last]):
        return None
    return last


def _editable_pci(token: Token) -> bool:
    # A value with a stray '"' in it cannot be rewritten faithfully; such a token is left
    # alone and a new `pci=` token (applied later, so it wins) is used instead.
    return token.matches("pci") and token.value is not None and '"' not in token.value
