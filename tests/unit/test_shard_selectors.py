"""Unit tests for the embedded cluster's KEP-5866 shard selector parser (semantics.shardselectors, .celsyntax).

The expected messages are kube-apiserver v1.36.3's, as scripts/kep5866_probe.py measured them
(docs/real-cluster.md); test_kep5866_differential.py checks them against the real server when it is built.
"""

from __future__ import annotations

import pytest

from hybrid_operator.localcluster import errors
from hybrid_operator.localcluster.semantics import celsyntax, shardselectors
from hybrid_operator.localcluster.semantics.shardselectors import fnv1a64, go_quote, parse

pytestmark = pytest.mark.unit

LOW = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
HIGH = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"


def refusal(text: str) -> str:
    with pytest.raises(errors.ApiError) as raised:
        parse(text)
    assert raised.value.code == 500 and raised.value.reason == ""
    status = raised.value.status()
    assert "reason" not in status and status["code"] == 500
    message = raised.value.message
    assert message.startswith("invalid shard selector: ")
    return message.removeprefix("invalid shard selector: ")


def test_absent_or_empty_is_no_selector_but_spaces_are_refused() -> None:
    assert parse("") is None
    assert refusal("   ") == "empty shard selector is not allowed; omit the parameter for unfiltered lists"


@pytest.mark.parametrize(("text", "normalised"), [
    (LOW, LOW),
    ('  ( shardRange( object.metadata.uid , "0x0000000000000000" , "0x8000000000000000" ) )  ', LOW),
    (r"shardRange(object.metadata.uid, r'0x0000000000000000', '\x30x8000000000000000')", LOW),
    (f"{HIGH} || {LOW}", f"{HIGH} || {LOW}"),
    (f"{LOW} || ({HIGH} || {LOW})", f"{LOW} || {HIGH} || {LOW}"),
    ("shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')",
     "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')"),
    ("object.shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')", LOW),
])
def test_accepted_selectors_are_normalised(text: str, normalised: str) -> None:
    selector = parse(text)
    assert selector is not None
    assert selector.info() == {"selector": normalised}


@pytest.mark.parametrize(("text", "message"), [
    ("shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
     'hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)'),
    ("shardRange(object.metadata.uid, '0x0000000000000000', '0x800000000000000A')",
     'hexEnd: invalid hex character "A" in "0x800000000000000A"'),
    ("shardRange(object.metadata.uid, '0X0000000000000000', '0x8000000000000000')",
     "hexStart must have '0x' prefix, got \"0X0000000000000000\""),
    ("shardRange(object.metadata.uid, '0000000000000000', '8000000000000000')",
     "hexStart must have '0x' prefix, got \"0000000000000000\""),
    ("shardRange(object.metadata.uid, '0x', '0x8000000000000000')", "hexStart: hex value is required after '0x'"),
    ("shardRange(object.metadata.uid, '0x000000000000000000', '0x8000000000000000')",
     'hexStart: hex value too long (18 chars, max 17): "000000000000000000"'),
    ("shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000001')",
     "hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got \"0x10000000000000001\""),
    ("shardRange(object.metadata.uid, '0x10000000000000000', '0x10000000000000000')",
     "shard range start 0x10000000000000000 must be less than end 0x10000000000000000"),
    ("shardRange(object.metadata.uid, '0x8000000000000000', '0x0000000000000000')",
     "shard range start 0x8000000000000000 must be less than end 0x0000000000000000"),
    (f"{LOW} || shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')",
     'all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace"'),
    ("shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
     'unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace'),
    (f"{LOW} && {HIGH}", 'unsupported function "_&&_"; only shardRange() and || are allowed'),
    (f"!{LOW}", 'unsupported function "!_"; only shardRange() and || are allowed'),
    ("has(object.metadata.uid)", 'unsupported function "has"; only shardRange() and || are allowed'),
    ("object.all(x, x)", 'unsupported function "all"; only shardRange() and || are allowed'),
    ("object.exists(x, x)", 'unsupported function "exists"; only shardRange() and || are allowed'),
    ("object", "unexpected expression kind 3; expected shardRange() call or || operator"),
    ("'0x0000000000000000'", "unexpected expression kind 5; expected shardRange() call or || operator"),
    (f"[{LOW}]", "unexpected expression kind 4; expected shardRange() call or || operator"),
    ("{'a': 1}", "unexpected expression kind 6; expected shardRange() call or || operator"),
    ("T{a: 1}", "unexpected expression kind 8; expected shardRange() call or || operator"),
    ("shardRange(object.metadata.uid, '0x0000000000000000')", "shardRange() requires exactly 3 arguments, got 2"),
    ("shardRange(size(object), '0x0000000000000000', '0x8000000000000000')",
     "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 1"),
    ("shardRange(object.metadata.uid, 0, '0x8000000000000000')", "hexStart must be a string literal, got int64"),
    ("shardRange(object.metadata.uid, 0u, '0x8000000000000000')", "hexStart must be a string literal, got uint64"),
    ("shardRange(object.metadata.uid, 0.5, '0x8000000000000000')",
     "hexStart must be a string literal, got float64"),
    ("shardRange(object.metadata.uid, b'0x0000000000000000', '0x8000000000000000')",
     "hexStart must be a string literal, got []uint8"),
    ("shardRange(object.metadata.uid, null, '0x8000000000000000')",
     "hexStart must be a string literal, got structpb.NullValue"),
    ("shardRange(object.metadata.uid, true, '0x8000000000000000')", "hexStart must be a string literal, got bool"),
    ("shardRange(object.metadata.uid, start, '0x8000000000000000')",
     "hexStart must be a string literal (e.g. '0xff'), got expression kind 3"),
    ("not a selector", "CEL parse error: Syntax error: mismatched input 'a' expecting <EOF>"),
    ("shardRange(object.metadata.uid, '0x0000000000000000'", "CEL parse error: Syntax error: missing ')' at '<EOF>'"),
    ("shardRange(object.metadata.uid, '0x0000000000000000, '0x8000000000000000')",
     "CEL parse error: Syntax error: token recognition error at: '')'"),
    ("shardRange(object.?metadata.uid, '0x0000000000000000', '0x8000000000000000')",
     "CEL parse error: unsupported syntax '.?'"),
])
def test_refused_as_kube_apiserver_refuses(text: str, message: str) -> None:
    assert refusal(text) == message


def test_ranges_select_by_fnv1a_of_uid_or_namespace() -> None:
    selector = parse(f"{LOW} || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')")
    assert selector is not None
    for uid in (f"uid-{i}" for i in range(200)):
        value = fnv1a64(uid)
        expected = value < 1 << 63 or value >= 0xC000000000000000
        assert selector.matches({"metadata": {"uid": uid}}) is expected
    by_namespace = parse("shardRange(object.metadata.namespace, "
                         f"'0x{fnv1a64(''):016x}', '0x{fnv1a64('') + 1:016x}')")
    assert by_namespace is not None
    assert by_namespace.matches({"metadata": {"name": "cluster-scoped"}})
    assert not by_namespace.matches({"metadata": {"namespace": "default"}})


def test_custom_resource_lists_carry_no_shard_info() -> None:
    assert shardselectors.echoed(custom=False) and not shardselectors.echoed(custom=True)


def test_go_quote_escapes_as_strconv_quote() -> None:
    assert go_quote('a"b\\c') == '"a\\"b\\\\c"'
    assert go_quote("\n\t\x01é\u200b") == '"\\n\\t\\x01é\\u200b"'


def test_the_cel_tree_keeps_calls_selects_and_literals() -> None:
    node = celsyntax.parse("shardRange(a.b.c, 'x', -3)")
    assert (node.kind, node.function, len(node.args)) == (celsyntax.CALL, "shardRange", 3)
    field = node.args[0]
    assert field.kind == celsyntax.SELECT and field.field_name == "c" and field.operand is not None
    assert node.args[1].literal == celsyntax.Literal("x", "string")
    assert node.args[2].literal == celsyntax.Literal(-3, "int64")
    with pytest.raises(celsyntax.CelSyntaxError, match=r"^Syntax error: "):
        celsyntax.parse("a ||")
