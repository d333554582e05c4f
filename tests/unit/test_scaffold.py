"""init and create api: the project tree, each kind flavour, and refused input that writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hybrid_operator import __version__
from hybrid_operator.authoring import scaffold
from hybrid_operator.config import model, watches
from hybrid_operator.errors import ConfigurationError

pytestmark = pytest.mark.unit


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    root = tmp_path / "Shop_Operator"
    scaffold.init(root, "example.com")
    return root


def test_init_lays_out_a_project_pinned_to_this_version(project_dir: Path) -> None:
    files = tree(project_dir)
    for expected in ("watches.yaml", "Dockerfile", "Makefile", "requirements.txt", "PROJECT", ".gitignore",
                     "playbooks/.gitkeep", "roles/.gitkeep", "charts/.gitkeep", "config/manager/manager.yaml",
                     "config/rbac/service_account.yaml", "molecule/shared/verify.yml"):
        assert expected in files
    assert f"hybrid-operator=={__version__}" in files["requirements.txt"].decode()
    assert yaml.safe_load(files["PROJECT"]) == {"layout": "hybrid-operator/v1", "projectName": "shop-operator",
                                                "domain": "example.com"}
    assert "name: shop-operator-system" in files["config/rbac/namespace.yaml"].decode()
    makefile = files["Makefile"].decode()
    assert "\nmanifests:" in makefile and "\n\t$(HYBRID_OPERATOR) generate all" in makefile


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
