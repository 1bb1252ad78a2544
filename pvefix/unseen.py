"""The characters no output of pvefix shows raw: what render/inert.py escapes in every line it
writes, and what makes hints.py write a command word as bash's $'...' (one class, here, so the
two cannot drift apart; a floor-0 module both may import).

C0 controls but tab and LF, DEL and C1 (ESC and CR among them: a terminal acts on them, a CI
runner splits lines at CR), U+2028/U+2029 (line and paragraph separators), and the characters
that reorder or hide text without being seen: the bidirectional embeddings, overrides and
isolates (U+202A-U+202E, U+2066-U+2069), the marks U+200E/U+200F and U+061C, and the
zero-width U+200B-U+200D and U+FEFF.
"""

UNSAFE = ("\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029"
          "\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff")
