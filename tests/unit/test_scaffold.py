"""init and create api: the project tree, each kind flavour, and refused input that writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hybrid_operator import __version__
from hybrid_operator.authoring import origin, project, scaffold
from hybrid_operator.config import model, watches
from hybrid_operator.errors import ConfigurationError

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    root = tmp_path / "Shop_Operator"
    scaffold.init(root, "example.com")
    return root


def test_init_lays_out_a_project_installing_this_hybrid_operator(project_dir: Path) -> None:
    files = tree(project_dir)
    for expected in ("watches.yaml", "Dockerfile", "Makefile", "requirements.txt", "PROJECT", ".gitignore",
                     "playbooks/.gitkeep", "roles/.gitkeep", "charts/.gitkeep", "config/manager/manager.yaml",
                     "config/rbac/service_account.yaml", "molecule/shared/verify.yml"):
        assert expected in files
    # this test runs from the checkout (pip install -e .): the new project installs that checkout
    requirements = files["requirements.txt"].decode().splitlines()
    assert requirements[-1] == f"hybrid-operator @ {REPO.as_uri()}"
    assert f"-c {REPO / 'requirements.lock'}" in requirements
    assert yaml.safe_load(files["PROJECT"]) == {"layout": "hybrid-operator/v1", "projectName": "shop-operator",
                                                "domain": "example.com"}
    assert "name: shop-operator-system" in files["config/rbac/namespace.yaml"].decode()
    makefile = files["Makefile"].decode()
    assert "\nmanifests: setup" in makefile and "\n\t$(HYBRID_OPERATOR) generate all" in makefile
    assert "\n\t$(HYBRID_OPERATOR) up $(ARGS)\n" in makefile and "HYBRID_OPERATOR ?= $(BIN)/hybrid-operator" in makefile
    readme = files["README.md"].decode()
    assert f"the checkout {REPO}" in readme and f"    hybrid-operator @ {REPO.as_uri()}\n" in readme


@pytest.mark.parametrize(("direct_url", "requirement", "constraints"), [
    ('{"url": "file:///src/hybrid-operator", "dir_info": {"editable": true}}',
     "hybrid-operator @ file:///src/hybrid-operator", "-c /src/hybrid-operator/requirements.lock"),
    ('{"url": "file:///src/dist/hybrid_operator-0.1.0-py3-none-any.whl", "archive_info": {}}',
     "hybrid-operator @ file:///src/dist/hybrid_operator-0.1.0-py3-none-any.whl", None),
    (None, f"hybrid-operator=={__version__}", None),
])
def test_init_writes_where_hybrid_operator_comes_from(tmp_path: Path, direct_url: str | None, requirement: str,
                                                      constraints: str | None) -> None:
    (tmp_path / "src" / "hybrid-operator").mkdir(parents=True)
    (tmp_path / "src" / "hybrid-operator" / "requirements.lock").write_text("kopf==1.45.2\n")
    direct_url = direct_url.replace("file:///src", (tmp_path / "src").as_uri()) if direct_url else None
    requirement = requirement.replace("file:///src", (tmp_path / "src").as_uri())
    source = origin.from_direct_url(direct_url) if direct_url else origin.from_index()
    assert source is not None
    files = scaffold.project_files(project.ProjectConfig(name="p"), source)
    lines = [line for line in files["requirements.txt"].splitlines() if not line.startswith("#")]
    expected_constraints = [constraints.replace("/src", str(tmp_path / "src"))] if constraints else []
    assert lines == [*expected_constraints, requirement]
    assert f"    {requirement}\n" in files["README.md"]


def test_a_remote_or_unreadable_direct_url_is_used_as_is_or_ignored() -> None:
    remote = origin.from_direct_url('{"url": "https://example.com/hybrid_operator-0.1.0-py3-none-any.whl", '
                                    '"archive_info": {}}')
    assert remote is not None and remote.requirement.endswith("@ https://example.com/hybrid_operator-0.1.0-py3-none-any.whl")
    assert origin.from_direct_url("not json") is None
    assert origin.from_direct_url('{"url": "git+https://x", "vcs_info": {}}') is None


def test_init_refuses_to_overwrite(project_dir: Path) -> None:
    (project_dir / "watches.yaml").write_text("# mine\n")
    before = tree(project_dir)
    with pytest.raises(ConfigurationError, match="never overwrites"):
        scaffold.init(project_dir)
    assert tree(project_dir) == before


def test_init_refuses_a_bad_domain(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="invalid --domain"):
        scaffold.init(tmp_path / "p", "Example_COM")
    assert not (tmp_path / "p").exists()


def test_create_api_role(project_dir: Path) -> None:
    scaffold.create_api(project_dir, scaffold.ApiRequest("shop", "v1alpha1", "Shop", "role"))
    (watch,) = watches.load(project_dir / "watches.yaml", {})
    assert isinstance(watch, model.AnsibleWatch)
    assert str(watch.gvk) == "shop.example.com/v1alpha1 Shop"
    assert watch.role == project_dir / "roles" / "shop"
    tasks = (project_dir / "roles/shop/tasks/main.yml").read_text()
    assert "operator_sdk.util.k8s_status" in tasks and "kind: Shop" in tasks
    crd = yaml.safe_load((project_dir / "config/crd/shop.example.com_shops.yaml").read_text())
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    assert version["schema"]["openAPIV3Schema"]["properties"]["status"]["x-kubernetes-preserve-unknown-fields"]
    role = yaml.safe_load((project_dir / "config/rbac/role.yaml").read_text())
    assert {"apiGroups": ["shop.example.com"], "resources": ["shops/status", "shops/finalizers"],
            "verbs": ["get", "patch", "update"]} in role["rules"]
    assert any("configmaps" in rule["resources"] for rule in role["rules"])
    sample = yaml.safe_load((project_dir / "config/samples/shop_v1alpha1_shop.yaml").read_text())
    assert sample["apiVersion"] == "shop.example.com/v1alpha1" and sample["metadata"]["name"] == "shop-sample"
    scenario = yaml.safe_load((project_dir / "molecule/shop/molecule.yml").read_text())
    variables = scenario["provisioner"]["inventory"]["group_vars"]["all"]
    assert variables["success_condition"] == "Successful"
    assert variables["expected_objects"] == [{"api_version": "v1", "kind": "ConfigMap", "name": "shop-sample-shop"}]


def test_create_api_playbook_has_no_fact_gathering(project_dir: Path) -> None:
    scaffold.create_api(project_dir, scaffold.ApiRequest("shop", "v1", "Order", "playbook"))
    (play,) = yaml.safe_load((project_dir / "playbooks/order.yml").read_text())
    assert play["gather_facts"] is False and play["hosts"] == "localhost"
    assert any("operator_sdk.util.k8s_status" in task for task in play["tasks"])


def test_create_api_new_chart_and_imported_chart(project_dir: Path, tmp_path: Path) -> None:
    scaffold.create_api(project_dir, scaffold.ApiRequest("cache", "v1", "Cache", "chart"))
    assert (project_dir / "charts/cache/templates/deployment.yaml").is_file()
    source = tmp_path / "external"
    (source / "templates").mkdir(parents=True)
    (source / "Chart.yaml").write_text("apiVersion: v2\nname: ext\nversion: 0.1.0\n")
    (source / "values.yaml").write_text("size: 3\n")
    (source / "templates/cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
    scaffold.create_api(project_dir, scaffold.ApiRequest("cache", "v1", "Ext", "chart", chart=source))
    loaded = {w.gvk.kind: w for w in watches.load(project_dir / "watches.yaml", {})}
    assert isinstance(loaded["Ext"], model.HelmWatch) and loaded["Ext"].chart == project_dir / "charts/ext"
    assert (project_dir / "charts/ext/templates/cm.yaml").is_file()
    assert yaml.safe_load((project_dir / "config/samples/cache_v1_ext.yaml").read_text())["spec"] == {"size": 3}
    scenario = yaml.safe_load((project_dir / "molecule/cache/molecule.yml").read_text())
    assert scenario["provisioner"]["inventory"]["group_vars"]["all"]["success_condition"] == "Deployed"


@pytest.mark.parametrize(("request_", "message"), [
    (scaffold.ApiRequest("shop", "v1", "shop", "role"), "invalid --kind"),
    (scaffold.ApiRequest("shop", "v1", "Sh-op", "role"), "invalid --kind"),
    (scaffold.ApiRequest("Shop", "v1", "Shop", "role"), "invalid --group"),
    (scaffold.ApiRequest("shop_x", "v1", "Shop", "role"), "invalid --group"),
    (scaffold.ApiRequest("shop", "1", "Shop", "role"), "invalid --version"),
    (scaffold.ApiRequest("shop", "v1gamma1", "Shop", "role"), "invalid --version"),
    (scaffold.ApiRequest("shop", "v1", "Site", "role"), "kind Site already exists"),
    (scaffold.ApiRequest("other", "v2", "SITE", "playbook"), "kind SITE already exists"),
    (scaffold.ApiRequest("shop", "v1", "Shop", "chart", chart=Path("/nonexistent/chart")), "chart not found"),
])
def test_bad_requests_write_nothing(project_dir: Path, request_: scaffold.ApiRequest, message: str) -> None:
    scaffold.create_api(project_dir, scaffold.ApiRequest("web", "v1", "Site", "role"))
    before = tree(project_dir)
    with pytest.raises(ConfigurationError, match=message):
        scaffold.create_api(project_dir, request_)
    assert tree(project_dir) == before


def test_create_api_outside_a_project(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="run `hybrid-operator init` first"):
        scaffold.create_api(tmp_path, scaffold.ApiRequest("shop", "v1", "Shop", "role"))
    assert list(tmp_path.iterdir()) == []


def test_existing_role_is_kept(project_dir: Path) -> None:
    (project_dir / "roles/shop/tasks").mkdir(parents=True)
    (project_dir / "roles/shop/tasks/main.yml").write_text("- ansible.builtin.debug: {msg: mine}\n")
    report = scaffold.create_api(project_dir, scaffold.ApiRequest("shop", "v1", "Shop", "role"))
    assert "kept roles/shop/tasks/main.yml (exists)" in report
    assert "mine" in (project_dir / "roles/shop/tasks/main.yml").read_text()


def test_this_repository_runs_the_molecule_scenarios_create_api_writes() -> None:
    """So `make test`'s run of the website scenario is the run of a scenario a new project gets."""
    for path in sorted((REPO / "molecule").glob("*/molecule.yml")):
        written = yaml.safe_load(path.read_text())
        inputs = written["provisioner"]["inventory"]["group_vars"]["all"]
        made = scaffold.molecule_scenario(path.parent.name.capitalize(), inputs["sample_file"],
                                          inputs["success_condition"], inputs["expected_objects"])
        assert yaml.safe_load(made) == written, f"{path} differs from what `create api` writes"
    assert (REPO / "molecule/website/molecule.yml").read_text() == scaffold.molecule_scenario(
        "Website", "config/samples/web_v1alpha1_website.yaml", "Successful",
        [{"api_version": "v1", "kind": "ConfigMap", "name": "hello-content"},
         {"api_version": "apps/v1", "kind": "Deployment", "name": "hello-web"}])


def test_this_repository_runs_the_molecule_playbooks_init_writes() -> None:
    for relative, text in scaffold.molecule_shared_files().items():
        assert (REPO / relative).read_text() == text, f"{relative} differs from the template init writes"
    prepare = scaffold.molecule_shared_files()["molecule/shared/prepare.yml"]
    assert "--metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0" in prepare
    assert "{{ log_dir }}/operator.log" in prepare and "{{ state_dir }}/operator.log" not in prepare
