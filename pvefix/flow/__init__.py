"""Flows: the sequences a command runs around the executor (read the target, refuse what is
unsafe, ask, apply one phase, record the desired state), and the plan file's reader and writer.
The executor below applies a phase and returns what it reached; the commands above render."""
