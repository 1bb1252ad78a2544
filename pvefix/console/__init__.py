"""Terminal presentation shared by the commands (live wait lines)."""
