"""The warm interpreter's copy of ansible.builtin's routing table is ansible-core's own answer, never shared.

A zygote parses the table once (:func:`hybrid_operator.ansible.warmworker._remember_builtin_routing`);
every run forked from it must get exactly what ansible-core's parser returns, as objects of its own,
and any other collection's ``runtime.yml`` must still be parsed.
"""

from __future__ import annotations

import os

import ansible
import pytest
import yaml
from ansible.utils.collection_loader import _collection_finder

from hybrid_operator.ansible import warmworker

BUILTIN = ("ansible.builtin", "runtime.yml")


@pytest.fixture
def remembered(monkeypatch: pytest.MonkeyPatch) -> bytes:
    monkeypatch.setattr(_collection_finder, "_meta_yml_to_dict", _collection_finder._meta_yml_to_dict)
    warmworker._remember_builtin_routing()
    assert ansible.__file__ is not None
    with open(os.path.join(os.path.dirname(ansible.__file__), *warmworker.BUILTIN_ROUTING), "rb") as handle:
        return handle.read()


def test_the_builtin_table_is_parsed_once_and_each_caller_gets_a_fresh_copy(remembered: bytes) -> None:
    routing = _collection_finder._meta_yml_to_dict
    assert routing is not None
    expected = yaml.load(remembered, Loader=yaml.CSafeLoader)
    first = routing(remembered, BUILTIN)
    assert first == expected and "plugin_routing" in first

    first["plugin_routing"].clear()  # a caller that changes its copy changes nobody else's
    assert routing(remembered, BUILTIN) == expected


def test_other_content_is_parsed_as_before(remembered: bytes) -> None:
    routing = _collection_finder._meta_yml_to_dict
    assert routing is not None
    other = b"plugin_routing:\n  modules:\n    old: {redirect: ns.coll.new}\n"
    assert routing(other, ("ns.coll", "runtime.yml")) == {"plugin_routing": {"modules": {"old": {
        "redirect": "ns.coll.new"}}}}
    changed = remembered.replace(b"plugin_routing:", b"extra_key: 1\nplugin_routing:", 1)  # changed on disk since
    assert routing(changed, BUILTIN)["extra_key"] == 1
    assert routing(other, BUILTIN) == yaml.safe_load(other)  # same name, other bytes
