"""The environment every playbook run gets from the operator, on top of its own.

Our ``operator_sdk.util`` collection (shipped inside the package) goes first on the collections
path, so playbooks written for the SDK find ``operator_sdk.util.k8s_status`` and friends without
Galaxy; ``osdk_metric`` finds the process's metrics receiver through :data:`METRICS_URL_ENV`.
``ANSIBLE_ROLES_PATH`` is the search path of :func:`hybrid_operator.config.locations.roles_search_path`
(the configured roles path, then the project's and the working directory's ``roles/``), so a
playbook's ``roles:`` and ``import_role`` find the project's roles as they do in the SDK's image.
"""

from __future__ import annotations

import os
from pathlib import Path

from hybrid_operator.config.locations import roles_search_path
from hybrid_operator.config.settings import Settings

COLLECTIONS = Path(__file__).resolve().parent / "collections"
#: where operator_sdk.util.osdk_metric POSTs playbook metrics (set for every run)
METRICS_URL_ENV = "HYBRID_OPERATOR_METRICS_URL"


#: ``ANSIBLE_GATHERING`` of every run unless the operator's environment sets it (issue 16 item 3)
DEFAULT_GATHERING = "explicit"


def ansible_env(settings: Settings) -> dict[str, str]:
    """Environment of every playbook run: our operator_sdk.util collection first on the collections path,
    the project's roles on the roles path."""
    environ = settings.environ
    existing = environ.get("ANSIBLE_COLLECTIONS_PATH") or environ.get("ANSIBLE_COLLECTIONS_PATHS")
    paths = [str(COLLECTIONS), *(existing.split(os.pathsep) if existing else
                                 ["~/.ansible/collections", "/usr/share/ansible/collections"])]
    roles = roles_search_path(settings.watches_file.absolute().parent, environ)
    return {"ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(paths),
            "ANSIBLE_ROLES_PATH": os.pathsep.join(str(path) for path in roles),
            # no fact gathering unless a play asks for it (the SDK scaffold's manager sets the same);
            # the operator's own ANSIBLE_GATHERING wins
            "ANSIBLE_GATHERING": environ.get("ANSIBLE_GATHERING") or DEFAULT_GATHERING}
