"""Jinja in the keys of a spec map runs nothing (docs/security.md, "Keys of the spec are data too").

Issue 28 item 1: values were unsafe, keys were not. With any playbook that iterates a spec map,
``spec: {features: {"{{ lookup('pipe', 'id > /tmp/x') }}": true}}`` ran the command as the
operator's user. Through the real entry points:

* a real ``hybrid-operator run`` process, CRs applied with kubectl to the embedded cluster, and a
  playbook that turns every key of the raw spec into a value in three ways (``dict2items`` of the
  top level, ``ansible.utils.to_paths`` of every depth, ``to_json`` kept with ``set_fact`` and used
  again): the issue's CR and 20 seeded variations are refused naming the key, and no marker appears;
* the refusal bypassed (the runner called directly, cold and warm): 20 seeded variations per runner
  reach ``ansible-playbook`` through every variable derived from the spec -- the snake_cased
  variables, ``_<group>_<kind>_spec``, ``_<group>_<kind>`` and ``_related`` -- and a playbook made
  for each one iterates the map holding the Jinja key (``dict2items``, ``keys()``, ``items()``,
  ``with_dict``, ``map(attribute='key')``, the names in ``vars``). Every key arrives as
  literal text (the playbook reports it back) and nothing is executed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import artifacts
from hybrid_operator.ansible.extravars import mark_unsafe, object_key
from hybrid_operator.ansible.runner import AnsibleRunner, RunnerMode
from hybrid_operator.ansible.runs import RunRequest
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind
from security.spec_attacks import KeyAttack, jinja_path, key_attacks, marker_directory
from support.attacker import SECURITY_GROUP, Operator, write_project
from support.cluster import Cluster
from support.operator import apply, condition, get_or_none, open_crd, wait_for

pytestmark = [pytest.mark.security]

KINDS = {"KeyJinja": True, "KeyJinjaRaw": False}  # kind -> snakeCaseParameters
SEED = 2028
VARIATIONS = 20


def generic_playbook(kind: str) -> str:
    """Turns every key of the raw spec into a value, at every depth (what the issue's playbooks do)."""
    spec = object_key(GroupVersionKind(SECURITY_GROUP, "v1", kind)) + "_spec"
    return f"""\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Every top-level key of the raw spec, as a value
      ansible.builtin.debug:
        msg: "{{{{ item.key }}}}"
      loop: "{{{{ {spec} | dict2items }}}}"
    - name: Every path of the raw spec
      ansible.builtin.set_fact:
        spec_paths: "{{{{ {spec} | ansible.utils.to_paths }}}}"
    - name: Every path, as a value
      ansible.builtin.debug:
        msg: "{{{{ item.key }}}}"
      loop: "{{{{ spec_paths | dict2items }}}}"
    - name: The spec as JSON, kept
      ansible.builtin.set_fact:
        spec_json: "{{{{ {spec} | to_json }}}}"
    - name: The spec as JSON, used again
      ansible.builtin.debug:
        msg: "{{{{ spec_json }}}}"
"""


@pytest.fixture(scope="module")
def keys_cluster(shared_cluster: Cluster) -> Cluster:
    for kind in KINDS:
        apply(shared_cluster, open_crd(kind, SECURITY_GROUP))
        shared_cluster.kubectl("wait", "--for=condition=Established", f"crd/{kind.lower()}s.{SECURITY_GROUP}")
    return shared_cluster


@pytest.fixture(scope="module")
def operator(keys_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    workdir = tmp_path_factory.mktemp("keys")
    watches = "".join(f"""\
- group: {SECURITY_GROUP}
  version: v1
  kind: {kind}
  playbook: playbooks/{kind.lower()}.yml
  snakeCaseParameters: {str(snake).lower()}
""" for kind, snake in KINDS.items())
    files = {"watches.yaml": watches, **{f"playbooks/{kind.lower()}.yml": generic_playbook(kind) for kind in KINDS}}
    process = Operator(keys_cluster, write_project(workdir / "project", files), workdir, workdir / "runner")
    try:
        yield process
    finally:
        process.stop()


def cr(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{SECURITY_GROUP}/v1", "kind": kind, "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def refused(cluster: Cluster, kind: str, name: str) -> dict[str, Any] | None:
    obj = get_or_none(cluster, kind.lower(), name)
    found = condition(obj, "Failure") if obj else None
    return found if found and found["status"] == "True" else None


def ran(operator: Operator, cluster: Cluster, kind: str, name: str) -> bool:
    """Whether any run of the CR happened (a run log record, a Successful condition, or artifacts)."""
    obj = get_or_none(cluster, kind.lower(), name) or {}
    directory = artifacts.artifacts_dir(operator.artifacts, GroupVersionKind(SECURITY_GROUP, "v1", kind),
                                        "default", name)
    return bool(operator.runs(name)) or condition(obj, "Successful") is not None or directory.exists()


def test_the_issues_jinja_key_runs_nothing(keys_cluster: Cluster, operator: Operator) -> None:
    with marker_directory() as markers:
        marker = markers / "issue"
        key = f"{{{{ lookup('pipe', 'id > {marker}') }}}}"
        apply(keys_cluster, cr("KeyJinja", "issue", {"features": {key: True}}))
        failure = wait_for(lambda: refused(keys_cluster, "KeyJinja", "issue") or
                           (marker.exists() and {"message": "the command ran"}), "the issue's CR to be refused")
        assert not marker.exists(), "the Jinja in a spec key ran a command as the operator's user"
        assert "spec.features[" in failure["message"] and "lookup('pipe'" in failure["message"], failure
        assert not ran(operator, keys_cluster, "KeyJinja", "issue")


def test_twenty_jinja_keys_are_refused_and_run_nothing(keys_cluster: Cluster, operator: Operator) -> None:
    with marker_directory() as markers:
        attacks = key_attacks(SEED, VARIATIONS, markers)
        for attack in attacks:
            kind = "KeyJinja" if attack.snake else "KeyJinjaRaw"
            apply(keys_cluster, cr(kind, attack.name, attack.spec))
        for attack in attacks:
            kind = "KeyJinja" if attack.snake else "KeyJinjaRaw"
            wait_for(lambda a=attack, k=kind: refused(keys_cluster, k, a.name) or a.marker.exists() or
                     ran(operator, keys_cluster, k, a.name), f"{attack.name} to be refused (or to run)")
        executed = [(attack.name, attack.key) for attack in attacks if attack.marker.exists()]
        assert executed == [], f"Jinja in spec keys ran commands: {executed}"
        for attack in attacks:
            kind = "KeyJinja" if attack.snake else "KeyJinjaRaw"
            failure = refused(keys_cluster, kind, attack.name)
            assert failure is not None and "a key may not contain" in failure["message"], (attack, failure)
            assert not ran(operator, keys_cluster, kind, attack.name), attack


# -- the refusal bypassed: what reaches Ansible is inert by itself (cold and warm runner) ----------------------


def vectors(attack: KeyAttack, gvk: GroupVersionKind) -> list[tuple[str, str | None]]:
    """(the map holding the Jinja key as a Jinja expression, or None for a top-level key; its label)."""
    whole = object_key(gvk)
    found: list[tuple[str, str | None]] = [
        ("raw spec", jinja_path(f"{whole}_spec", attack.parents)),
        ("whole object", jinja_path(f"{whole}['spec']", attack.parents)),
        ("related", jinja_path("_related['Pod'][0]['spec']", attack.parents)),
    ]
    converted = attack.converted_parents()
    if converted:
        head, *rest = converted
        found.append(("variable", jinja_path(str(head), tuple(rest))))
    else:
        found.append(("variable names", None))
    return found


def iterations(label: str, name: str, expression: str | None, key: str) -> str:
    """Tasks that turn each key of ``expression``'s map into a value, kept in ``seen`` and used again."""
    tag = f"{name}: {label}"
    if expression is None:  # the key is a variable's name
        return f"""\
    - name: "{tag}: variable names, kept"
      ansible.builtin.set_fact:
        names: "{{{{ vars.keys() | select('search', 'pipe') | list }}}}"
    - name: "{tag}: variable names, used"
      ansible.builtin.set_fact:
        seen: "{{{{ seen + names }}}}"
"""
    return f"""\
    - name: "{tag}: dict2items"
      ansible.builtin.set_fact:
        seen: "{{{{ seen + [item.key] }}}}"
      loop: "{{{{ {expression} | dict2items }}}}"
    - name: "{tag}: keys(), kept"
      ansible.builtin.set_fact:
        kept: "{{{{ {expression}.keys() | list }}}}"
    - name: "{tag}: keys(), used"
      ansible.builtin.debug:
        msg: "{{{{ kept }}}}"
    - name: "{tag}: items()"
      ansible.builtin.set_fact:
        seen: "{{{{ seen + [item.0] }}}}"
      loop: "{{{{ {expression}.items() | list }}}}"
    - name: "{tag}: with_dict"
      ansible.builtin.debug:
        msg: "{{{{ item.key }}}}"
      with_dict: "{{{{ {expression} }}}}"
    - name: "{tag}: map(attribute='key'), kept"
      ansible.builtin.set_fact:
        mapped: "{{{{ {expression} | dict2items | map(attribute='key') | list }}}}"
    - name: "{tag}: map(attribute='key'), used"
      ansible.builtin.set_fact:
        seen: "{{{{ seen + mapped }}}}"
"""


def playbook(attacks: list[KeyAttack], gvk: GroupVersionKind) -> str:
    tasks = "".join(iterations(label, attack.name, expression, attack.key)
                    for attack in attacks for label, expression in vectors(attack, gvk))
    return f"""\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Nothing seen yet
      ansible.builtin.set_fact:
        seen: []
{tasks}    - name: Report every key seen
      ansible.builtin.set_stats:
        per_host: false
        data:
          seen: "{{{{ seen }}}}"
"""


def combined(attacks: list[KeyAttack]) -> dict[str, Any]:
    """One spec holding every attack, each under a top-level key of its own (a top-level key stays on top)."""
    spec: dict[str, Any] = {}
    for attack in attacks:
        if attack.parents:
            spec[str(attack.parents[0])] = attack.spec[str(attack.parents[0])]
        else:
            spec[attack.key] = attack.spec[attack.key]
    return spec


def prefixed(attack: KeyAttack, index: int) -> KeyAttack:
    """``attack`` with its top-level container renamed apart from the others' (attacks then share a spec)."""
    if not attack.parents:
        return attack
    head = str(attack.parents[0])
    renamed = f"{head}{'Set' if attack.snake else 'set'}{chr(ord('a') + index)}"
    spec = {renamed if key == head else key: value for key, value in attack.spec.items()}
    return KeyAttack(attack.name, spec, (renamed, *attack.parents[1:]), attack.key, attack.marker, attack.snake)


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["cold", "warm"])
async def test_jinja_keys_stay_literal_even_if_the_refusal_is_bypassed(mode: RunnerMode, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ANSIBLE_LOCAL_TEMP", str(tmp_path / "ansible-tmp"))
    runner = AnsibleRunner(max_workers=1, timeout=600, work_dir=tmp_path, project_dir=tmp_path, mode=mode)
    with marker_directory() as markers:
        attacks = key_attacks(SEED + (mode == "warm"), VARIATIONS, markers)
        try:
            for snake in (True, False):
                group = [prefixed(attack, index) for index, attack in enumerate(attacks) if attack.snake == snake]
                kind = "KeyJinja" if snake else "KeyJinjaRaw"
                gvk = GroupVersionKind(SECURITY_GROUP, "v1", kind)
                book = tmp_path / f"{kind}.yml"
                book.write_text(playbook(group, gvk))
                spec = combined(group)
                obj = {**cr(kind, "bypass", spec), "metadata": {"name": "bypass", "namespace": "default", "uid": "1"}}
                related = mark_unsafe({"Pod": [{"kind": "Pod", "spec": spec}]})
                watch = AnsibleWatch(gvk=gvk, playbook=book, snake_case_parameters=snake)
                result = await runner.run(RunRequest(cr=obj, watch=watch, artifacts_root=tmp_path / "runner",
                                                     extra_vars={"_related": related}))
                executed = [(attack.name, attack.key) for attack in attacks if attack.marker.exists()]
                assert executed == [], f"Jinja in spec keys ran commands ({mode}): {executed}"
                assert result.succeeded, (result.error, result.failed_tasks)
                seen = set(result.stats_data.get("seen") or [])
                for attack in group:  # each key arrived, as literal text (snake-safe keys convert to themselves)
                    assert attack.key in seen, (attack, sorted(seen))
        finally:
            await runner.close()
        executed = [(attack.name, attack.key) for attack in attacks if attack.marker.exists()]
        assert executed == [], f"Jinja in spec keys ran commands ({mode}): {executed}"
