"""``python -m hybrid_operator.cli``: the ``hybrid-operator`` command line."""

from hybrid_operator.cli.commands import main

raise SystemExit(main())
