"""A spec cannot override what the role or playbook sets itself (docs/security.md, "The spec cannot
override the automation's own variables").

Issue 28 item 3: extra vars outrank ``set_fact`` and role ``vars/``, so with an open CRD (what
``generate`` writes for a kind without a schema file) a CR in ``tenant-a`` set ``dbNamespace:
victim``, ``dbImage: evil/...`` and ``state: absent`` on the shipped ``database`` role and wrote and
deleted objects in namespace ``victim``. Through the real entry points:

* a real ``hybrid-operator run`` with the repository's own ``roles/database``, an open CRD, and the
  issue's CRs applied with kubectl in ``tenant-a``: they are refused naming ``spec.dbNamespace`` and
  ``spec.dbImage``, nothing runs, ``victim``'s objects stay and no object appears there; a CR that
  sets only the role's defaults (``replicas``, ``storage``, ``state``) still runs;
* ``hybrid-operator check`` (a subprocess, as a user runs it) lists, per entry, the variables the
  automation sets, and warns about a schema property that becomes one.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.attacker import SECURITY_GROUP, Operator, write_project
from support.cluster import Cluster, create_namespace
from support.operator import apply, condition, get_or_none, open_crd, wait_for

pytestmark = [pytest.mark.security]

KIND = "OpenDatabase"
DATABASE_ROLE = Path(__file__).resolve().parents[2] / "roles" / "database"
TENANT = "tenant-a"
VICTIM = "victim"


@pytest.fixture(scope="module")
def db_cluster(shared_cluster: Cluster) -> Cluster:
    apply(shared_cluster, open_crd(KIND, SECURITY_GROUP))
    shared_cluster.kubectl("wait", "--for=condition=Established", f"crd/{KIND.lower()}s.{SECURITY_GROUP}")
    for namespace in (TENANT, VICTIM):
        create_namespace(shared_cluster, namespace)
    return shared_cluster


@pytest.fixture(scope="module")
def operator(db_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    workdir = tmp_path_factory.mktemp("database")
    watches = f"""\
- group: {SECURITY_GROUP}
  version: v1
  kind: {KIND}
  role: {DATABASE_ROLE}
  finalizer:
    name: {SECURITY_GROUP}/database-cleanup
    vars:
      state: absent
"""
    process = Operator(db_cluster, write_project(workdir / "project", {"watches.yaml": watches}), workdir,
                       workdir / "runner")
    try:
        yield process
    finally:
        process.stop()


def database(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{SECURITY_GROUP}/v1", "kind": KIND, "metadata": {"name": name, "namespace": TENANT},
            "spec": {"engine": "postgres", "version": "16", **spec}}


def victims_objects(cluster: Cluster) -> dict[str, list[str]]:
    found = {}
    for resource in ("configmaps", "services", "statefulsets"):
        listing = cluster.get_json(resource, "-n", VICTIM)
        found[resource] = sorted(item["metadata"]["name"] for item in listing["items"]
                                 if item["metadata"]["name"] != "kube-root-ca.crt")
    return found


def refused(cluster: Cluster, name: str) -> dict[str, Any] | None:
    obj = get_or_none(cluster, KIND.lower(), name, "-n", TENANT)
    found = condition(obj, "Failure") if obj else None
    return found if found and found["status"] == "True" and "refused" in found["message"] else None


def settled(cluster: Cluster, operator: Operator, name: str) -> Any:
    """The CR's refusal, or (the attack got through) its first run."""
    return refused(cluster, name) or operator.runs(name)


def test_a_spec_cannot_override_the_database_roles_own_variables(db_cluster: Cluster, operator: Operator) -> None:
    apply(db_cluster, {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "shop-config", "namespace": VICTIM}, "data": {"owner": "the victim"}})
    apply(db_cluster, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "shop", "namespace": VICTIM},
                       "spec": {"ports": [{"port": 5432}], "selector": {"app": "shop"}}})
    before = victims_objects(db_cluster)
    attack = {"dbNamespace": VICTIM, "dbImage": "evil/db:1"}
    apply(db_cluster, database("shop", {**attack, "state": "absent"}))  # deletes shop-config, shop in victim
    apply(db_cluster, database("grab", attack))  # creates grab-config, grab, a StatefulSet in victim
    for name in ("shop", "grab"):
        outcome = wait_for(lambda n=name: settled(db_cluster, operator, n), f"{name} to be refused")
        assert victims_objects(db_cluster) == before, "a CR in tenant-a changed namespace victim"
        assert not isinstance(outcome, list), f"{name} ran the role with a spec overriding its variables: {outcome}"
        for key, variable in (("dbNamespace", "db_namespace"), ("dbImage", "db_image")):
            assert f'spec.{key}: becomes the variable "{variable}", which the automation sets itself (set_fact at ' \
                   in outcome["message"], outcome["message"]
    assert operator.runs("shop") == operator.runs("grab") == []
    # what a role's defaults/ hold stays for the spec to set (the run itself may fail on this cluster)
    apply(db_cluster, database("defaults", {"replicas": 2, "storage": "2Gi", "state": "present"}))
    wait_for(lambda: operator.runs("defaults"), "a CR setting only the role's defaults to run", timeout=180)
    assert refused(db_cluster, "defaults") is None
    assert victims_objects(db_cluster) == before


# -- hybrid-operator check ---------------------------------------------------------------------------------------

ROLE_TASKS = """\
- name: Names
  ansible.builtin.set_fact:
    target_namespace: "{{ ansible_operator_meta.namespace }}"
    size: "{{ size | default(1) }}"
- name: Read it
  kubernetes.core.k8s_info:
    kind: ConfigMap
  register: found_maps
- name: Load more
  ansible.builtin.include_vars:
    file: extra.yml
"""
PLAY = """\
- hosts: localhost
  gather_facts: false
  vars:
    image: "busybox"
  tasks:
    - name: A block
      vars:
        block_var: 1
      block:
        - ansible.builtin.set_fact: computed=1 cacheable=true
"""


def test_check_lists_the_variables_the_automation_sets(tmp_path: Path) -> None:
    watches = f"""\
- group: {SECURITY_GROUP}
  version: v1
  kind: Shop
  role: shop
- group: {SECURITY_GROUP}
  version: v1
  kind: Plain
  playbook: playbooks/plain.yml
"""
    schema = """\
openAPIV3Schema:
  type: object
  properties:
    spec:
      type: object
      properties:
        targetNamespace: {type: string}
        size: {type: integer}
        replicas: {type: integer}
"""
    path = write_project(tmp_path / "project", {
        "watches.yaml": watches, "roles/shop/tasks/main.yml": ROLE_TASKS,
        "roles/shop/vars/main.yml": "shop_port: 8080\n", "roles/shop/vars/extra.yml": "shop_mode: fast\n",
        "roles/shop/defaults/main.yml": "replicas: 1\n", "playbooks/plain.yml": PLAY,
        "schemas/shop.yaml": schema,
    })
    done = subprocess.run([sys.executable, "-m", "hybrid_operator.cli", "check", "--watches-file", str(path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    shop = lines[lines.index(next(line for line in lines if "Shop" in line)) + 1]
    assert shop == ("  sets 4 variable(s) itself; a resource whose spec key becomes one is refused: "
                    "found_maps, shop_mode, shop_port, target_namespace"), shop
    plain = lines[lines.index(next(line for line in lines if "Plain" in line)) + 1]
    assert plain == ("  sets 3 variable(s) itself; a resource whose spec key becomes one is refused: "
                     "block_var, computed, image"), plain
    # the schema lets a CR set targetNamespace, which every run would refuse: check says so
    assert "warning: schemas/shop.yaml: spec property targetNamespace becomes \"target_namespace\", which the " \
           "automation sets itself (set_fact at roles/shop/tasks/main.yml:1)" in done.stderr, done.stderr
    # inputs: a role default, and a set_fact that defaults the variable it sets
    assert "spec.size" not in done.stderr and "spec.replicas" not in done.stderr
