"""Which variable names a custom resource's spec may not set: the names that steer Ansible itself.

Every top-level spec key becomes an extra var, and extra vars outrank everything -- including the
inventory's ``ansible_connection=local``. A spec may therefore not set (see docs/security.md):

* any ``ansible_*`` name: connection, become, interpreter and shell variables (every variable
  ansible-core's connection, become and shell plugins read is spelled ``ansible_*``), the
  ``ansible_*`` magic variables and facts, and the SDK's ``ansible_operator_meta``;
* Ansible's magic variables without that prefix (``hostvars``, ``groups``, ``group_names``,
  ``inventory_hostname``, ``inventory_dir``, ``playbook_dir``, ``role_path``, ``omit``, ...);
* the names the operator sets for every run (``_<group>_<kind>``, ``_<group>_<kind>_spec``,
  ``_related``).

The Ansible names are read at run time from the installed ansible-core's own tables
(``INTERNAL_STATIC_VARS``, ``COMMON_CONNECTION_VARS``, ``MAGIC_VARIABLE_MAPPING``), so a newer
ansible-core's additions are refused without a change here. ansible-core's wider
``get_reserved_names()`` is *not* used: it lists playbook keywords and Jinja globals (``name``,
``namespace``, ``port``, ``action``, ``args``, ``tags``, ``environment``, ``timeout``, ...). As
variables they steer nothing (Ansible only warns about them; a value from JSON cannot be a callable
that shadows a Jinja function), and they are common spec keys of real Operator SDK operators.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

#: every variable starting with this is Ansible's own (connection, become, interpreter, facts, magic)
ANSIBLE_PREFIX = "ansible_"


@functools.cache
def magic_variables() -> frozenset[str]:
    """Ansible's magic and connection variable names, from the installed ansible-core's tables."""
    from ansible import constants  # imported on first use: it reads Ansible's configuration

    names: set[str] = set(constants.INTERNAL_STATIC_VARS) | set(constants.COMMON_CONNECTION_VARS)
    for aliases in constants.MAGIC_VARIABLE_MAPPING.values():
        names.update(aliases)
    return frozenset(names)


def is_ansible_name(name: str) -> bool:
    """True for a name Ansible itself reads or sets: ``ansible_*`` or one of :func:`magic_variables`."""
    return name.startswith(ANSIBLE_PREFIX) or name in magic_variables()


def reserved_among(names: Iterable[str], operator_names: Iterable[str] = ()) -> list[str]:
    """The ``names`` (in their order) that are Ansible's own or one of ``operator_names``."""
    own = frozenset(operator_names)
    return [name for name in names if is_ansible_name(name) or name in own]
