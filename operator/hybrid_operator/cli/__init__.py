"""The command line: ``hybrid-operator`` and its subcommands, the only code that parses argv.

:mod:`.commands` turns flags and environment variables into settings and hands them to the package
that does the work (``manager`` for ``run``, ``authoring`` for ``init``/``create``/``generate``,
``preview``, ``localcluster`` for ``cluster``); :mod:`.up` is ``hybrid-operator up`` (``make run``),
which starts the embedded cluster as a child process and the operator beside it. It is the top
layer: it may import every other package, and it is the only one that imports ``localcluster``.
"""

from hybrid_operator.cli.commands import main

__all__ = ["main"]
