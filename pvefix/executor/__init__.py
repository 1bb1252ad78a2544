"""The executor: the only code that writes to a target. apply one phase of a plan (snapshot,
journaled steps with their inverses, activation, verification) and roll a snapshot back."""
