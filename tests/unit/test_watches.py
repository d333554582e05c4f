"""Unit tests for hybrid_operator.watches: parsing, defaults, path resolution and strict validation."""

from __future__ import annotations

import io
import tarfile
from datetime import timedelta
from pathlib import Path

import pytest

from hybrid_operator.config import entries, locations, model, watches
from hybrid_operator.config.model import (
    AnsibleWatch,
    GroupVersionKind,
    HelmWatch,
    LabelSelector,
    LabelSelectorRequirement,
)
from hybrid_operator.errors import ConfigurationError

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).parent / "fixtures" / "watches"
NO_ENV: dict[str, str] = {"HOME": "/nonexistent-home"}


def load_text(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> list[model.Watch]:
    path = tmp_path / "watches.yaml"
    path.write_text(text)
    return watches.load(path, env=NO_ENV if env is None else env)


def write_role(root: Path, *parts: str) -> Path:
    role = root.joinpath(*parts)
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text("- ansible.builtin.debug: {msg: hi}\n")
    return role


# -- the valid fixture: every key ------------------------------------------------------------


def test_valid_fixture_reads_every_ansible_key() -> None:
    env = {**NO_ENV, "MEMCACHED_IMAGE": "memcached:1.6", "NGINX_REPO": "quay.io/nginx"}
    loaded = watches.load(FIXTURES / "valid.yaml", env=env)
    memcached = loaded[0]
    assert isinstance(memcached, AnsibleWatch)
    assert memcached.runner == "ansible"
    assert memcached.gvk == GroupVersionKind("cache.example.com", "v1alpha1", "Memcached")
    assert memcached.playbook == FIXTURES.absolute() / "playbooks" / "memcached.yml"
    assert memcached.role is None
    assert memcached.vars == {"image": "memcached:1.6", "meta": "{{ ansible_operator_meta }}"}
    assert memcached.reconcile_period == timedelta(hours=1, minutes=30)
    assert memcached.manage_status is False
    assert memcached.watch_dependent_resources is False
    assert memcached.watch_cluster_scoped_resources is True
    assert memcached.max_runner_artifacts == 5
    assert memcached.finalizer == model.Finalizer(
        name="cache.example.com/finalizer",
        playbook=FIXTURES.absolute() / "playbooks" / "finalize.yml",
        vars={"state": "absent"},
    )
    assert memcached.selector == LabelSelector(
        {"tier": "cache"},
        (LabelSelectorRequirement("env", "In", ("prod", "staging")),
         LabelSelectorRequirement("legacy", "DoesNotExist")),
    )
    assert memcached.blacklist == (
        GroupVersionKind("apps", "v1", "Deployment"), GroupVersionKind("", "v1", "Secret"))
    assert memcached.snake_case_parameters is False
    assert memcached.mark_unsafe is False
    assert memcached.watch_annotations_changes is True


def test_valid_fixture_reads_roles_and_helm_entry() -> None:
    loaded = watches.load(FIXTURES / "valid.yaml", env={**NO_ENV, "NGINX_REPO": "quay.io/nginx"})
    secret, cleaner, nginx = loaded[1:]
    assert isinstance(secret, AnsibleWatch)
    assert secret.gvk == GroupVersionKind("", "v1", "Secret")
    assert secret.gvk.api_version == "v1"
    assert secret.role == FIXTURES.absolute() / "roles" / "memcached"
    assert isinstance(cleaner, AnsibleWatch) and cleaner.finalizer is not None
    assert cleaner.finalizer.role == FIXTURES.absolute() / "roles" / "cleanup"
    assert isinstance(nginx, HelmWatch)
    assert nginx.runner == "helm"
    assert nginx.chart == FIXTURES.absolute() / "charts" / "nginx"
    assert nginx.override_values == {
        "image.repository": "quay.io/nginx",
        "image.tag": "",  # undefined: literal after the file expansion, "" after the Helm expansion
        "ingress.hosts[0].host": "example.com",
    }
    assert nginx.watch_dependent_resources is False
    assert nginx.reconcile_period == timedelta(minutes=2)
    assert nginx.max_concurrent_reconciles == 3
    assert nginx.selector.match_labels == {"tier": "web"}
    assert nginx.dry_run_option == "server"


def test_defaults_match_the_sdk_except_mark_unsafe(tmp_path: Path) -> None:
    (tmp_path / "site.yml").write_text("- hosts: localhost\n")
    (tmp_path / "chart").mkdir()
    (tmp_path / "chart" / "Chart.yaml").write_text("name: c\nversion: 0.1.0\n")
    ansible, helm = load_text(tmp_path, "- {version: v1, kind: A, playbook: site.yml}\n"
                                        "- {version: v1, kind: B, chart: chart}\n")
    assert ansible == AnsibleWatch(gvk=GroupVersionKind("", "v1", "A"), playbook=tmp_path / "site.yml")
    assert isinstance(ansible, AnsibleWatch)
    assert ansible.reconcile_period is None
    assert (ansible.manage_status, ansible.watch_dependent_resources) == (True, True)
    assert (ansible.watch_cluster_scoped_resources, ansible.max_runner_artifacts) == (False, 20)
    assert (ansible.snake_case_parameters, ansible.watch_annotations_changes) == (True, False)
    assert ansible.mark_unsafe is True  # our product's default; the SDK's is false
    assert ansible.selector.is_empty and ansible.blacklist == () and ansible.vars == {}
    assert helm == HelmWatch(gvk=GroupVersionKind("", "v1", "B"), chart=tmp_path / "chart")
    assert isinstance(helm, HelmWatch)
    assert helm.dry_run_option == "client"
    assert (helm.max_concurrent_reconciles, helm.reconcile_period) == (None, None)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("reconcilePeriod: 0", None),
        ("reconcilePeriod: '0'", None),
        ("reconcilePeriod: 0s", None),
        ("reconcilePeriod: 10s", timedelta(seconds=10)),
        ("reconcilePeriod: 500ms", timedelta(milliseconds=500)),
        ("maxRunnerArtifacts: 0", 20),
        ("maxRunnerArtifacts: 1", 1),
        ("reconcilePeriod: null", None),
    ],
)
def test_zero_means_default(tmp_path: Path, line: str, expected: object) -> None:
    (tmp_path / "site.yml").write_text("- hosts: localhost\n")
    [watch] = load_text(tmp_path, f"- version: v1\n  kind: A\n  playbook: site.yml\n  {line}\n")
    assert isinstance(watch, AnsibleWatch)
    value = watch.max_runner_artifacts if line.startswith("max") else watch.reconcile_period
    assert value == expected


def test_dry_run_option_empty_means_client(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "Chart.yaml").write_text("name: c\n")
    [watch] = load_text(tmp_path, "- {version: v1, kind: A, chart: c, dryRunOption: ''}\n")
    assert isinstance(watch, HelmWatch) and watch.dry_run_option == "client"


def test_allow_cross_namespace_is_off_unless_set(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "Chart.yaml").write_text("name: c\n")
    confined, open_ = load_text(tmp_path, "- {version: v1, kind: A, chart: c}\n"
                                          "- {version: v1, kind: B, chart: c, allowCrossNamespace: true}\n")
    assert isinstance(confined, HelmWatch) and confined.allow_cross_namespace is False
    assert isinstance(open_, HelmWatch) and open_.allow_cross_namespace is True


def test_tgz_chart_is_accepted(tmp_path: Path) -> None:
    archive = tmp_path / "nginx-0.1.0.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        data = b"apiVersion: v2\nname: nginx\nversion: 0.1.0\n"
        info = tarfile.TarInfo("nginx/Chart.yaml")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    [watch] = load_text(tmp_path, "- {version: v1, kind: Nginx, chart: nginx-0.1.0.tgz}\n")
    assert isinstance(watch, HelmWatch) and watch.chart == archive


def test_tgz_without_chart_yaml_is_refused(tmp_path: Path) -> None:
    with tarfile.open(tmp_path / "empty.tgz", "w:gz") as tar:
        info = tarfile.TarInfo("nginx/values.yaml")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(ConfigurationError, match=r"has no <chart>/Chart.yaml inside"):
        load_text(tmp_path, "- {version: v1, kind: Nginx, chart: empty.tgz}\n")


# -- environment expansion -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("${A}", {"A": "x"}, "x"),
        ("$A", {"A": "x"}, "x"),
        ("pre-${A}-post", {"A": "x"}, "pre-x-post"),
        ("${MISSING}", {}, "${MISSING}"),
        ("$MISSING", {}, "$MISSING"),
        ("${A}${B}", {"A": "1", "B": "2"}, "12"),
        ("$A_B", {"A": "no", "A_B": "yes"}, "yes"),
        ("${A-b}", {"A": "x"}, "${A-b}"),
        ("cost: 5$", {}, "cost: 5$"),
        ("${EMPTY}", {"EMPTY": ""}, ""),
    ],
)
def test_expand_env(text: str, env: dict[str, str], expected: str) -> None:
    assert model.expand_env(text, env) == expected


def test_expand_env_or_empty_drops_undefined() -> None:
    assert model.expand_env_or_empty("a${MISSING}b$ALSO", {}) == "ab"
    assert model.expand_env_or_empty("${A}", {"A": "x"}) == "x"


def test_env_expansion_happens_before_parsing(tmp_path: Path) -> None:
    (tmp_path / "site.yml").write_text("- hosts: localhost\n")
    env = {**NO_ENV, "KIND": "Memcached", "PERIOD": "30s", "PB": "site.yml"}
    text = "- {version: v1, kind: $KIND, playbook: '${PB}', reconcilePeriod: ${PERIOD}}\n"
    [watch] = load_text(tmp_path, text, env)
    assert isinstance(watch, AnsibleWatch)
    assert (watch.gvk.kind, watch.playbook, watch.reconcile_period) == (
        "Memcached", tmp_path / "site.yml", timedelta(seconds=30))


def test_env_defaults_to_process_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "site.yml").write_text("- hosts: localhost\n")
    monkeypatch.setenv("HYBRID_TEST_KIND", "FromEnviron")
    path = tmp_path / "watches.yaml"
    path.write_text("- {version: v1, kind: $HYBRID_TEST_KIND, playbook: site.yml}\n")
    assert watches.load(path)[0].gvk.kind == "FromEnviron"


# -- paths -----------------------------------------------------------------------------------


def test_relative_paths_resolve_against_the_watches_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    watch = watches.load(FIXTURES / "valid.yaml", env=NO_ENV)[0]
    assert isinstance(watch, AnsibleWatch) and watch.playbook is not None
    assert watch.playbook.is_file() and watch.playbook.is_absolute()


def test_role_search_order(tmp_path: Path) -> None:
    base = tmp_path / "project"
    roles_path = tmp_path / "rp"
    collections = tmp_path / "coll"
    env = {"HOME": str(tmp_path / "home"), "ANSIBLE_ROLES_PATH": f"{roles_path}:relative-roles",
           "ANSIBLE_COLLECTIONS_PATH": f"{collections}"}
    cwd = tmp_path / "cwd"
    assert locations.role_candidates("ns.coll.web", base, env, cwd) == [
        collections / "ansible_collections" / "ns" / "coll" / "roles" / "web",
        roles_path / "ns.coll.web",
        roles_path / "roles" / "ns.coll.web",
        base / "relative-roles" / "ns.coll.web",
        base / "relative-roles" / "roles" / "ns.coll.web",
        base / "roles" / "ns.coll.web",
        cwd / "roles" / "ns.coll.web",  # the SDK's {{CWD}}/roles
    ]
    assert locations.role_candidates("/abs/role", base, env) == [Path("/abs/role")]
    assert locations.role_candidates("web", base, {"HOME": "/h"}, base) == [base / "roles" / "web"]


def test_roles_search_path_of_every_run(tmp_path: Path) -> None:
    """The configured roles path (variable, else ansible.cfg, else Ansible's default), then the project's
    and the working directory's roles/."""
    base, cwd, home = tmp_path / "project", tmp_path / "cwd", tmp_path / "home"
    env = {"HOME": str(home), "ANSIBLE_ROLES_PATH": "/shared/roles:relative"}
    assert locations.roles_search_path(base, env, cwd) == [
        Path("/shared/roles"), base / "relative", base / "roles", cwd / "roles"]
    base.mkdir()
    (base / "ansible.cfg").write_text("[defaults]\nroles_path = /opt/ansible/roles:~/roles\n")
    assert locations.roles_search_path(base, {"HOME": str(home)}, base) == [
        Path("/opt/ansible/roles"), home / "roles", base / "roles"]
    (base / "ansible.cfg").unlink()
    assert locations.roles_search_path(base, {"HOME": str(home), "ANSIBLE_CONFIG": "/nonexistent"}, base)[:3] == [
        home / ".ansible" / "roles", Path("/usr/share/ansible/roles"), Path("/etc/ansible/roles")]


def test_default_collections_path_uses_home(tmp_path: Path) -> None:
    candidates = locations.role_candidates("a.b.c", tmp_path, {"HOME": "/home/op"})
    assert candidates[:2] == [
        Path("/usr/share/ansible/collections/ansible_collections/a/b/roles/c"),
        Path("/home/op/.ansible/collections/ansible_collections/a/b/roles/c"),
    ]


@pytest.mark.parametrize(
    ("existing", "winner"),
    [
        (["collection", "roles_path_flat", "roles_path_nested", "local"], "collection"),
        (["roles_path_flat", "roles_path_nested", "local"], "roles_path_flat"),
        (["roles_path_nested", "local"], "roles_path_nested"),
        (["local"], "local"),
    ],
)
def test_first_existing_role_wins(tmp_path: Path, existing: list[str], winner: str) -> None:
    locations = {
        "collection": ("coll", "ansible_collections", "ns", "c", "roles", "web"),
        "roles_path_flat": ("rp", "ns.c.web"),
        "roles_path_nested": ("rp", "roles", "ns.c.web"),
        "local": ("roles", "ns.c.web"),
    }
    for name in existing:
        write_role(tmp_path, *locations[name])
    env = {"HOME": "/none", "ANSIBLE_ROLES_PATH": str(tmp_path / "rp"),
           "ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "coll")}
    [watch] = load_text(tmp_path, "- {version: v1, kind: Web, role: ns.c.web}\n", env)
    assert isinstance(watch, AnsibleWatch)
    assert watch.role == tmp_path.joinpath(*locations[winner])


# -- broken files: one ConfigurationError naming file, entry, key and the fix ----------------

MEM = "entry 1 (kind Memcached)"
NGX = "entry 1 (kind Nginx)"
BROKEN: list[tuple[str, int | None, str, str | None, list[str]]] = [
    # (fixture, line, entry label, key, fragments)
    ("unknown-key", 5, MEM, "reconcilePeriode",
     ['unknown key; did you mean "reconcilePeriod"?']),
    ("missing-playbook", 4, MEM, "playbook",
     ["playbook file not found", "playbooks/does-not-exist.yml", "relative paths are resolved"]),
    ("missing-role", 4, MEM, "role",
     ["role 'does-not-exist' was not found; looked in:", "roles/does-not-exist", "ANSIBLE_ROLES_PATH"]),
    ("playbook-and-role", 1, MEM, None, ["set either playbook or role, not both"]),
    ("no-runner", 1, MEM, None, ["missing playbook, role or chart"]),
    ("duplicate-gvk", 5, "entry 2 (kind Memcached)", None,
     ["duplicate group/version/kind cache.example.com/v1 Memcached, already watched by entry 1"]),
    ("bad-duration", 9, "entry 2 (kind Memcached)", "reconcilePeriod",
     ['invalid duration "10x": unknown unit \'x\'']),
    ("numeric-duration", 5, MEM, "reconcilePeriod",
     ["must be a Go duration string", "got a number 30", "add a unit and quote it"]),
    ("negative-duration", 5, MEM, "reconcilePeriod", ["must not be negative"]),
    ("quoted-bool", 5, MEM, "manageStatus",
     ["must be true or false (unquoted), got a string 'yes'"]),
    ("empty-version", 2, MEM, "version", ["version must not be empty"]),
    ("missing-kind", 1, "entry 1", "kind", ["kind must not be empty"]),
    ("version-with-group", 1, MEM, "version",
     ["invalid version 'cache.example.com/v1'", 'the group goes in "group"']),
    ("not-a-list", 1, "", None, ["must be a YAML list of entries", "got a mapping"]),
    ("invalid-yaml", 4, "", None, ["invalid YAML", "fix the syntax"]),
    ("empty", None, "", None, ["contains no entries"]),
    ("entry-not-mapping", 1, "entry 1", None, ["must be a mapping with group, version, kind", "a string"]),
    ("finalizer-without-name", 5, MEM, "finalizer.name",
     ["a finalizer needs a name, such as cache.example.com/finalizer"]),
    ("finalizer-without-action", 5, MEM, "finalizer",
     ["a finalizer needs a playbook, a role or vars"]),
    ("finalizer-missing-role", 7, MEM, "finalizer.role", ["role 'not-there' was not found"]),
    ("negative-artifacts", 5, MEM, "maxRunnerArtifacts", ["must be at least 0, got -1"]),
    ("vars-not-mapping", 5, MEM, "vars", ["must be a mapping of variable names"]),
    ("blacklist-typo", 7, MEM, "blacklist[0].verison",
     ['unknown key; did you mean "version"?']),
    ("selector-bad-operator", 8, MEM, "selector.matchExpressions[0].operator",
     ["invalid operator 'Equals': use one of In, NotIn, Exists, DoesNotExist"]),
    ("selector-numeric-label", 7, MEM, "selector.matchLabels.replicas",
     ["invalid value 3 for label 'replicas'", "quote numbers"]),
    ("duplicate-yaml-key", 6, MEM, "manageStatus", ["appears twice"]),
    ("max-concurrent-ansible", 5, MEM, "maxConcurrentReconciles",
     ["--max-concurrent-reconciles", "MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP>"]),
    ("helm-key-on-ansible", 5, MEM, "overrideValues", ["only valid for Helm entries"]),
    ("ansible-key-on-helm", 5, NGX, "manageStatus", ["only valid for Ansible entries"]),
    ("chart-and-playbook", 1, NGX, None, ["chart cannot be combined with playbook or role"]),
    ("chart-missing", 4, NGX, "chart", ["chart not found", "charts/does-not-exist"]),
    ("chart-without-chart-yaml", 4, NGX, "chart", ["is a directory without Chart.yaml"]),
    ("chart-broken-tgz", 4, NGX, "chart", ["is not a readable .tgz archive", "helm package"]),
    ("dry-run-option", 5, NGX, "dryRunOption",
     ["invalid dryRunOption 'always'", '"client" (the default) or "server"']),
    ("override-template", 5, NGX, "overrideValues", ["uses a Go template", "not supported"]),
    ("override-number", 5, NGX, "overrideValues",
     ["value of 'replicaCount' must be a string, got a number 3; quote it"]),
    ("helm-concurrency-zero", 5, NGX, "maxConcurrentReconciles", ["must be at least 1, got 0"]),
    ("cross-namespace-string", 5, NGX, "allowCrossNamespace", ["must be true or false (unquoted)"]),
    ("cross-namespace-on-ansible", 5, MEM, "allowCrossNamespace", ["only valid for Helm entries"]),
]


def test_at_least_fifteen_broken_fixtures() -> None:
    assert len({case[0] for case in BROKEN}) >= 15
    assert all((FIXTURES / f"broken-{case[0]}.yaml").is_file() for case in BROKEN)


@pytest.mark.parametrize(("fixture", "line", "entry", "key", "fragments"), BROKEN, ids=[c[0] for c in BROKEN])
def test_broken_file_is_refused_with_a_precise_message(
    fixture: str, line: int | None, entry: str, key: str | None, fragments: list[str]
) -> None:
    path = FIXTURES / f"broken-{fixture}.yaml"
    with pytest.raises(ConfigurationError) as raised:
        watches.load(path, env=NO_ENV)
    error = raised.value
    assert error.exit_code == 2
    assert len(error.problems) == 1, error.problems
    message = error.problems[0]
    location = f"{path}:{line}: " if line is not None else f"{path}: "
    assert message.startswith(location), message
    if entry:
        assert f"{location}{entry}: " in message, message
    if key is not None:
        assert f'key "{key}": ' in message, message
    for fragment in fragments:
        assert fragment in message, message


def test_all_problems_of_a_file_are_collected() -> None:
    path = FIXTURES / "broken-many-problems.yaml"
    with pytest.raises(ConfigurationError) as raised:
        watches.load(path, env=NO_ENV)
    problems = raised.value.problems
    assert len(problems) == 5, problems
    expected = [
        ("entry 1 (kind Memcached)", "playbook file not found"),
        ("entry 1 (kind Memcached)", 'key "reconcilePeriod": invalid duration "soon"'),
        ("entry 2 (kind Redis)", 'key "manageStatus": must be true or false'),
        ("entry 2 (kind Redis)",
         'key "watchDependentResource": unknown key; did you mean "watchDependentResources"?'),
        ("entry 3 (kind Nginx)", 'key "chart": chart not found'),
    ]
    for entry, fragment in expected:
        assert any(entry in problem and fragment in problem for problem in problems), (entry, fragment)
    message = str(raised.value)
    assert message.startswith(f"{path}: 5 problems:\n")
    assert all(f"  - {problem}" in message for problem in problems)


def test_unreadable_file_says_which_flag_to_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"cannot read the watches file.*--watches-file"):
        watches.load(tmp_path / "missing.yaml", env=NO_ENV)


def test_multiple_documents_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"invalid YAML"):
        load_text(tmp_path, "- {version: v1, kind: A}\n---\n- {version: v1, kind: B}\n")


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("reconcile_period", "reconcilePeriod"),
        ("ReconcilePeriod", "reconcilePeriod"),
        ("watchDependantResources", "watchDependentResources"),
        ("snakeCaseParams", "snakeCaseParameters"),
        ("playbok", "playbook"),
    ],
)
def test_misspelled_keys_get_a_suggestion(tmp_path: Path, key: str, suggestion: str) -> None:
    (tmp_path / "site.yml").write_text("- hosts: localhost\n")
    with pytest.raises(ConfigurationError) as raised:
        load_text(tmp_path, f"- {{version: v1, kind: A, playbook: site.yml, {key}: x}}\n")
    assert f'key "{key}": unknown key; did you mean "{suggestion}"?' in str(raised.value)


def test_misspelled_required_key_is_reported_once(tmp_path: Path) -> None:
    (tmp_path / "site.yml").write_text("- hosts: localhost\n")
    with pytest.raises(ConfigurationError) as raised:
        load_text(tmp_path, "- {version: v1, knd: A, playbook: site.yml}\n")
    assert raised.value.problems == (
        f'{tmp_path / "watches.yaml"}:1: entry 1: key "knd": unknown key; did you mean "kind"? '
        f"valid keys here are: {', '.join(sorted(entries.ANSIBLE_KEYS))}",
    )


@pytest.mark.parametrize(("key", "suggestion"), [("rolee", "role"), ("playbok", "playbook"), ("chrt", "chart")])
def test_a_misspelled_runner_key_is_reported_by_its_suggestion_alone(tmp_path: Path, key: str,
                                                                     suggestion: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        load_text(tmp_path, f"- group: example.com\n  version: v1\n  kind: A\n  {key}: a\n")
    assert len(raised.value.problems) == 1, raised.value.problems
    assert f'key "{key}": unknown key; did you mean "{suggestion}"?' in raised.value.problems[0]
    assert raised.value.problems[0].startswith(f"{tmp_path / 'watches.yaml'}:4: ")


def test_configuration_error_lists_problems() -> None:
    single = ConfigurationError.from_problems(["f: one"], source="f")
    assert (str(single), single.problems, single.exit_code) == ("f: one", ("f: one",), 2)
    double = ConfigurationError.from_problems(["f:1: a", "f:2: b"], source="f")
    assert str(double) == "f: 2 problems:\n  - f:1: a\n  - f:2: b"
    assert ConfigurationError("plain").problems == ("plain",)
    with pytest.raises(ValueError, match="at least one problem"):
        ConfigurationError.from_problems([], source="f")


def test_unknown_key_without_close_match_lists_valid_keys(tmp_path: Path) -> None:
    (tmp_path / "site.yml").write_text("- hosts: localhost\n")
    with pytest.raises(ConfigurationError) as raised:
        load_text(tmp_path, "- {version: v1, kind: A, playbook: site.yml, zzz: 1}\n")
    assert "did you mean" not in str(raised.value)
    assert "valid keys here are: blacklist, finalizer, group" in str(raised.value)


# -- label selectors -------------------------------------------------------------------------

SELECTOR = LabelSelector(
    {"app": "web"},
    (LabelSelectorRequirement("env", "In", ("prod", "dev")),
     LabelSelectorRequirement("tier", "NotIn", ("db",)),
     LabelSelectorRequirement("owner", "Exists"),
     LabelSelectorRequirement("legacy", "DoesNotExist")),
)


@pytest.mark.parametrize(
    ("labels", "selected"),
    [
        ({"app": "web", "env": "prod", "owner": "me"}, True),
        ({"app": "web", "env": "dev", "owner": "me", "tier": "front"}, True),
        ({"app": "api", "env": "prod", "owner": "me"}, False),
        ({"app": "web", "env": "qa", "owner": "me"}, False),
        ({"app": "web", "env": "prod", "owner": "me", "tier": "db"}, False),
        ({"app": "web", "env": "prod"}, False),
        ({"app": "web", "env": "prod", "owner": "me", "legacy": "yes"}, False),
        ({}, False),
    ],
)
def test_label_selector_matches(labels: dict[str, str], selected: bool) -> None:
    assert SELECTOR.matches(labels) is selected


def test_empty_selector_matches_everything_and_renders_queries() -> None:
    assert LabelSelector().matches({}) and LabelSelector().is_empty


def test_gvk_string_forms() -> None:
    gvk = GroupVersionKind("cache.example.com", "v1", "Memcached")
    assert (gvk.api_version, str(gvk)) == ("cache.example.com/v1", "cache.example.com/v1 Memcached")
