"""The local store: pvefix's state directory and its private, atomic, durable writes.

Snapshots, journals, desired states, locks and probe reports all live here; this package is
the only one that decides where and how they are written (a floor below executor, desired and
verify, so none of them imports another to reach it)."""
