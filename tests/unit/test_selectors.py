"""Label and field selector parsing, canonical forms, matching and kube-apiserver error messages."""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_operator.localcluster.errors import ApiError
from hybrid_operator.localcluster.semantics.fieldselectors import (
    EVERYTHING_FIELDS,
    FieldSelector,
    parse_field_selector,
    supported_fields,
)
from hybrid_operator.localcluster.semantics.labelselectors import (
    EVERYTHING_LABELS,
    NOTHING_LABELS,
    LabelSelector,
    Operator,
    from_label_selector_object,
    parse_label_selector,
)

pytestmark = pytest.mark.unit

# --------------------------------------------------------------------------- label selectors: parsing


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("", ""),
        ("   ", ""),
        ("a=b", "a=b"),
        (" a == b , c!=d", "a==b,c!=d"),
        ("x in (b, a, b), y notin (c)", "x in (a,b),y notin (c)"),
        ("z,!y", "!y,z"),
        ("a,b=c,a!=d", "a,a!=d,b=c"),
        ("in in (in), notin notin (notin)", "in in (in),notin notin (notin)"),
        ("app.kubernetes.io/name=web", "app.kubernetes.io/name=web"),
        ("a=", "a="),
        ("a in ()", "a in ()"),
        ("a in (,x)", "a in (,x)"),
        ("a in (x,)", "a in (,x)"),
        ("a in (x,,y)", "a in (,x,y)"),
        ("n>1,m<10", "m<10,n>1"),
        ("\ta\n=\rb", "a=b"),
    ],
)
def test_label_selector_canonical_form(text: str, canonical: str) -> None:
    selector = parse_label_selector(text)
    assert str(selector) == canonical
    assert parse_label_selector(str(selector)) == selector  # the canonical form round-trips


def test_empty_label_selector_is_everything() -> None:
    assert parse_label_selector("") == EVERYTHING_LABELS
    assert EVERYTHING_LABELS.empty
    assert not parse_label_selector("a").empty
    assert EVERYTHING_LABELS.matches({}) and EVERYTHING_LABELS.matches(None)


def test_label_requirements_structure() -> None:
    selector = parse_label_selector("b notin (y,x),a")
    assert [(r.key, r.operator, r.values) for r in selector.requirements] == [
        ("a", Operator.EXISTS, ()),
        ("b", Operator.NOT_IN, ("x", "y")),
    ]


VALUE_HELP = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
NAME_HELP = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("a=b,,c", "found ',', expected: identifier after ','"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("=a", "found '=', expected: !, identifier, or 'end of string'"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("!=a", "found '!=', expected: !, identifier, or 'end of string'"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("a in (b,=)", "unable to parse requirement: found '=', expected: ',', or identifier"),
        ("a=(b)", "unable to parse requirement: found '(', expected: identifier"),
        ("-a=b", f'unable to parse requirement: key: Invalid value: "-a": {NAME_HELP}'),
        ("x/=y", 'unable to parse requirement: key: Invalid value: "x/": name part must be non-empty'),
        ("/x=y", 'unable to parse requirement: key: Invalid value: "/x": prefix part must be non-empty'),
        (
            "a" * 64,
            f'unable to parse requirement: key: Invalid value: "{"a" * 64}": '
            "name part must be no more than 63 characters",
        ),
        ("a=b/c", f'unable to parse requirement: values[0][a]: Invalid value: "b/c": {VALUE_HELP}'),
        ("k in (ok,-bad)", f'unable to parse requirement: values[1][k]: Invalid value: "-bad": {VALUE_HELP}'),
        (
            "a>x",
            'unable to parse requirement: values[0]: Invalid value: "x": '
            "for 'Gt', 'Lt' operators, the value must be an integer",
        ),
    ],
)
def test_label_selector_errors(text: str, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_label_selector(text)
    assert (caught.value.code, caught.value.reason) == (400, "BadRequest")
    assert caught.value.message == message


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("a/b/c", "a qualified name must consist of"),
        ("Upper.Case/x", "prefix part a lowercase RFC 1123 subdomain must consist of"),
        (f"{'p' * 254}/x", "prefix part must be no more than 253 characters"),
    ],
)
def test_label_key_validation(key: str, fragment: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_label_selector(f"{key}=v")
    assert fragment in caught.value.message


# --------------------------------------------------------------------------- label selectors: matching

LABELS = {"app": "web", "tier": "frontend", "replicas": "3", "empty": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("missing=", False),
        ("empty=", True),
        ("app!=db", True),
        ("app!=web", False),
        ("missing!=x", True),
        ("app in (db,web)", True),
        ("app in (db)", False),
        ("missing in (x)", False),
        ("app notin (db)", True),
        ("app notin (web)", False),
        ("missing notin (x)", True),
        ("app", True),
        ("missing", False),
        ("!app", False),
        ("!missing", True),
        ("replicas>2", True),
        ("replicas>3", False),
        ("replicas<4", True),
        ("app>1", False),  # a non-numeric label never satisfies gt/lt
        ("missing<100", False),
        ("app=web,tier=frontend", True),
        ("app=web,tier=backend", False),
        ("app=web,app!=web", False),
    ],
)
def test_label_selector_matches(text: str, expected: bool) -> None:
    assert parse_label_selector(text).matches(LABELS) is expected


def test_label_selector_matches_objects_without_labels() -> None:
    assert parse_label_selector("!a,b!=c").matches(None)
    assert not parse_label_selector("a").matches(None)


# --------------------------------------------------------------------------- metav1.LabelSelector objects


@pytest.mark.parametrize(
    ("obj", "canonical", "matching", "not_matching"),
    [
        ({}, "", {}, None),
        ({"matchLabels": {"app": "web"}}, "app=web", {"app": "web"}, {"app": "db"}),
        (
            {
                "matchLabels": {"tier": "fe", "app": "web"},
                "matchExpressions": [
                    {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                    {"key": "canary", "operator": "DoesNotExist"},
                    {"key": "zone", "operator": "NotIn", "values": ["b"]},
                    {"key": "team", "operator": "Exists", "values": []},
                ],
            },
            "app=web,!canary,env in (dev,prod),team,tier=fe,zone notin (b)",
            {"app": "web", "tier": "fe", "env": "dev", "team": "x"},
            {"app": "web", "tier": "fe", "env": "dev", "team": "x", "canary": "1"},
        ),
    ],
)
def test_from_label_selector_object(
    obj: dict[str, Any],
    canonical: str,
    matching: dict[str, str],
    not_matching: dict[str, str] | None,
) -> None:
    selector = from_label_selector_object(obj)
    assert str(selector) == canonical
    assert selector.matches(matching)
    if not_matching is not None:
        assert not selector.matches(not_matching)


def test_null_label_selector_object_selects_nothing() -> None:
    selector = from_label_selector_object(None)
    assert selector == NOTHING_LABELS
    assert not selector.empty
    assert not selector.matches({})
    assert not selector.matches({"app": "web"})


@pytest.mark.parametrize(
    ("obj", "fragment"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]},
            '"Equals" is not a valid',
        ),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "values set can't be empty"),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            "must be empty for exists",
        ),
        ({"matchLabels": {"bad key": "x"}}, 'key: Invalid value: "bad key"'),
        ({"matchLabels": {"a": "bad value"}}, 'values[0][a]: Invalid value: "bad value"'),
    ],
)
def test_invalid_label_selector_objects(obj: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ApiError) as caught:
        from_label_selector_object(obj)
    assert caught.value.code == 400
    assert fragment in caught.value.message


# --------------------------------------------------------------------------- field selectors


@pytest.mark.parametrize(
    ("text", "kind", "canonical"),
    [
        ("", "ConfigMap", ""),
        ("metadata.name=x", "ConfigMap", "metadata.name=x"),
        ("metadata.name==x", "Deployment", "metadata.name=x"),
        (
            "metadata.namespace!=kube-system,metadata.name=a",
            "Pod",
            "metadata.name=a,metadata.namespace!=kube-system",
        ),
        (" metadata.name = x ", "Secret", "metadata.name=x"),
        ("metadata.name=a\\,b\\=c\\\\d", "ConfigMap", "metadata.name=a\\,b\\=c\\\\d"),
        ("metadata.name=", "ConfigMap", "metadata.name="),
        (
            "involvedObject.kind=Deployment,involvedObject.name=web,involvedObject.namespace=default,"
            "involvedObject.uid=u1",
            "Event",
            "involvedObject.kind=Deployment,involvedObject.name=web,involvedObject.namespace=default,"
            "involvedObject.uid=u1",
        ),
        ("type=Warning,reason=Failed", "Event", "reason=Failed,type=Warning"),
        ("spec.nodeName=n1,status.phase!=Running", "Pod", "spec.nodeName=n1,status.phase!=Running"),
        ("type=kubernetes.io/tls", "Secret", "type=kubernetes.io/tls"),
        ("status.phase=Active", "Namespace", "status.phase=Active"),
        ("status.replicas=0", "ReplicaSet", "status.replicas=0"),
        ("status.successful=1", "Job", "status.successful=1"),
    ],
)
def test_field_selector_canonical_form(text: str, kind: str, canonical: str) -> None:
    selector = parse_field_selector(text, kind=kind)
    assert str(selector) == canonical
    assert parse_field_selector(str(selector), kind=kind) == selector


@pytest.mark.parametrize(
    ("text", "kind", "unsupported"),
    [
        ("spec.replicas=1", "Deployment", "spec.replicas"),
        ("type=Opaque", "ConfigMap", "type"),
        ("involvedObject.name=x", "Pod", "involvedObject.name"),
        ("status.phase=Running", "Deployment", "status.phase"),
        ("metadata.labels=x", "Event", "metadata.labels"),
        ("metadata.name=a,spec.foo=b", "Pod", "spec.foo"),
        ("=x", "ConfigMap", ""),
    ],
)
def test_unsupported_field_labels(text: str, kind: str, unsupported: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_field_selector(text, kind=kind)
    assert (caught.value.code, caught.value.reason) == (400, "BadRequest")
    assert caught.value.message == f"field label not supported: {unsupported}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
        ("metadata.name=a=b", "invalid field selector: unescaped character in value: '='"),
        ("metadata.name=a\\x", "invalid field selector: invalid escape sequence: \\x"),
        ("metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"),
    ],
)
def test_malformed_field_selectors(text: str, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_field_selector(text, kind="ConfigMap")
    assert caught.value.code == 400
    assert caught.value.message == message


CORE_EVENT = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "web.1", "namespace": "default"},
    "involvedObject": {"kind": "Deployment", "name": "web", "namespace": "default", "uid": "u1"},
    "reason": "ScalingReplicaSet",
    "type": "Normal",
    "source": {"component": "deployment-controller"},
    "reportingComponent": "deployment-controller",
}
NEW_EVENT = {
    "apiVersion": "events.k8s.io/v1",
    "kind": "Event",
    "metadata": {"name": "web.2", "namespace": "default"},
    "regarding": {"kind": "Deployment", "name": "web", "namespace": "default"},
    "reason": "ScalingReplicaSet",
    "type": "Normal",
    "deprecatedSource": {"component": "deployment-controller"},
    "reportingController": "deployment-controller",
}
POD = {
    "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"nodeName": "node-1", "restartPolicy": "Always"},
    "status": {"phase": "Running"},
}


@pytest.mark.parametrize(
    ("text", "kind", "obj", "expected"),
    [
        ("", "ConfigMap", {}, True),
        ("metadata.name=web.1", "Event", CORE_EVENT, True),
        ("metadata.name=other", "Event", CORE_EVENT, False),
        ("metadata.namespace=default,metadata.name!=x", "Event", CORE_EVENT, True),
        ("involvedObject.kind=Deployment,involvedObject.name=web", "Event", CORE_EVENT, True),
        ("involvedObject.uid=u2", "Event", CORE_EVENT, False),
        ("involvedObject.fieldPath=", "Event", CORE_EVENT, True),  # missing compares as ""
        ("source=deployment-controller", "Event", CORE_EVENT, True),
        ("reportingComponent=deployment-controller,type=Normal", "Event", CORE_EVENT, True),
        ("involvedObject.kind=Deployment,involvedObject.name=web", "Event", NEW_EVENT, True),
        ("involvedObject.name=db", "Event", NEW_EVENT, False),
        ("source=deployment-controller,reason=ScalingReplicaSet", "Event", NEW_EVENT, True),
        ("reportingComponent=deployment-controller", "Event", NEW_EVENT, True),
        ("spec.nodeName=node-1,status.phase=Running", "Pod", POD, True),
        ("status.phase!=Running", "Pod", POD, False),
        ("spec.schedulerName=", "Pod", POD, True),
        ("status.podIP!=", "Pod", POD, False),
        ("type=Opaque", "Secret", {"type": "Opaque"}, True),
        ("type=Opaque", "Secret", {}, False),
        ("status.phase=Terminating", "Namespace", {"status": {"phase": "Terminating"}}, True),
        ("status.replicas=0", "ReplicaSet", {"status": {"replicas": 0}}, True),
        ("status.replicas=0", "ReplicaSet", {"status": {}}, False),
        ("status.successful=2", "Job", {"status": {"successful": 2}}, True),
        ("metadata.name=a\\,b", "ConfigMap", {"metadata": {"name": "a,b"}}, True),
    ],
)
def test_field_selector_matches(text: str, kind: str, obj: dict[str, Any], expected: bool) -> None:
    assert parse_field_selector(text, kind=kind).matches(obj) is expected


def test_field_selector_helpers() -> None:
    selector = parse_field_selector("metadata.namespace!=a,metadata.name=web", kind="ConfigMap")
    assert selector.exact("metadata.name") == "web"
    assert selector.exact("metadata.namespace") is None
    assert not selector.empty
    assert parse_field_selector("", kind="Pod").empty
    assert FieldSelector() == EVERYTHING_FIELDS
    assert EVERYTHING_FIELDS.matches({"metadata": {"name": "anything"}})


def test_supported_fields_per_kind() -> None:
    assert supported_fields("Widget") == ("metadata.name", "metadata.namespace")
    assert "involvedObject.resourceVersion" in supported_fields("Event")
    assert "spec.serviceAccountName" in supported_fields("Pod")
    assert "status.podIP" in supported_fields("Pod")


def test_label_selector_is_hashable_and_immutable() -> None:
    selector = parse_label_selector("a=b")
    assert {selector: 1}[parse_label_selector("a = b")] == 1
    with pytest.raises(AttributeError):
        selector.nothing = True  # type: ignore[misc]
    assert isinstance(selector, LabelSelector)
