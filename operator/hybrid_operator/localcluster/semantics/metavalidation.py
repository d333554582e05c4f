"""ObjectMeta validation every kind gets: label and annotation syntax and sizes, as apimachinery words it.

kube-apiserver validates the labels and annotations of every object it
stores (``ValidateObjectMeta``): label keys and annotation keys are
*qualified names* (an optional DNS-subdomain prefix and ``/``, then at most 63
alphanumerics, ``-``, ``_`` or ``.``, starting and ending alphanumeric), label
values are empty or at most 63 such characters, and all annotations together
(keys plus values) are at most 256 KiB.  Each violation is a cause of one
422 Invalid answer, on field ``metadata.labels`` or ``metadata.annotations``,
with the value and apimachinery's message.
"""

from __future__ import annotations

import json
import re
from typing import Any

QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63
DNS_SUBDOMAIN_MAX = 253
TOTAL_ANNOTATIONS_MAX = 256 * 1024

_QUALIFIED_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED = re.compile(f"^{_QUALIFIED_FMT}$")
_LABEL_VALUE_FMT = f"({_QUALIFIED_FMT})?"
_LABEL_VALUE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_SUBDOMAIN_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_SUBDOMAIN = re.compile(f"^{_SUBDOMAIN_FMT}$")

_QUALIFIED_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                  "alphanumeric character")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
                    "'.', and must start and end with an alphanumeric character")
_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                  "'.', and must start and end with an alphanumeric character")

Cause = dict[str, str]


def regex_error(message: str, pattern: str, *examples: str) -> str:
    """apimachinery's ``RegexError`` wording: the rule, examples, and the regex."""
    if not examples:
        return f"{message} (regex used for validation is '{pattern}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def subdomain_errors(value: str) -> list[str]:
    errors = []
    if len(value) > DNS_SUBDOMAIN_MAX:
        errors.append(max_len_error(DNS_SUBDOMAIN_MAX))
    if not _SUBDOMAIN.match(value):
        errors.append(regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN_FMT, "example.com"))
    return errors


def qualified_name_errors(value: str) -> list[str]:
    """apimachinery's ``IsQualifiedName``: ``[prefix/]name``."""
    parts = value.split("/")
    errors: list[str] = []
    if len(parts) > 2:
        return [f"a qualified name {regex_error(_QUALIFIED_MSG, _QUALIFIED_FMT, 'MyName', 'my.name', '123-abc')} "
                "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(f"prefix part {message}" for message in subdomain_errors(prefix))
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        errors.append(f"name part {max_len_error(QUALIFIED_NAME_MAX)}")
    if not _QUALIFIED.match(name):
        errors.append("name part " + regex_error(_QUALIFIED_MSG, _QUALIFIED_FMT, "MyName", "my.name", "123-abc"))
    return errors


def label_value_errors(value: str) -> list[str]:
    errors = []
    if len(value) > LABEL_VALUE_MAX:
        errors.append(max_len_error(LABEL_VALUE_MAX))
    if not _LABEL_VALUE.match(value):
        errors.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors


def _invalid(field: str, value: str, message: str) -> Cause:
    return {"reason": "FieldValueInvalid", "field": field,
            "message": f"Invalid value: {json.dumps(value, ensure_ascii=False)}: {message}"}


def label_causes(labels: Any, field: str = "metadata.labels") -> list[Cause]:
    if not isinstance(labels, dict):
        return []
    causes: list[Cause] = []
    for key, value in labels.items():
        causes.extend(_invalid(field, key, message) for message in qualified_name_errors(key))
        if isinstance(value, str):
            causes.extend(_invalid(field, value, message) for message in label_value_errors(value))
    return causes


def annotation_causes(annotations: Any, field: str = "metadata.annotations") -> list[Cause]:
    if not isinstance(annotations, dict):
        return []
    causes: list[Cause] = []
    total = 0
    for key, value in annotations.items():
        causes.extend(_invalid(field, key, message) for message in qualified_name_errors(key.lower()))
        total += len(key.encode()) + len(str(value).encode())
    if total > TOTAL_ANNOTATIONS_MAX:
        causes.append({"reason": "FieldValueTooLong", "field": field,
                       "message": f"Too long: may not be more than {TOTAL_ANNOTATIONS_MAX} bytes"})
    return causes


def object_meta_causes(meta: dict[str, Any]) -> list[Cause]:
    """Every label and annotation problem of ``meta``, in apimachinery's order (labels first)."""
    return [*label_causes(meta.get("labels")), *annotation_causes(meta.get("annotations"))]
