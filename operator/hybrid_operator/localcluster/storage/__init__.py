"""Storage: where the embedded API server keeps objects and the changes to them.

Owns durability and ordering, nothing else: objects by storage key, namespace
and name in SQLite (as k3s keeps them by default), the single global
resourceVersion, and the feed of committed changes that watches and the
controllers follow.  It knows no Kubernetes rules (names, finalizers,
schemas): those live one layer up, in :mod:`..semantics`, so that storage can
be reasoned about (and replaced) on its own.
"""
