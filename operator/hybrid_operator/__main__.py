"""``python -m hybrid_operator``: the same command line as the ``hybrid-operator`` script."""

from hybrid_operator.cli import main

raise SystemExit(main())
