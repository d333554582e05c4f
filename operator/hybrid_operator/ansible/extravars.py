"""The extra vars an Ansible run receives for a custom resource, exactly as the Operator SDK builds them.

Playbooks written for the Operator SDK read the CR through these variables, so their names, their
snake_case spelling and their precedence are a compatibility contract (``compat-ansible.md`` §2).
:func:`build_extra_vars` merges, later keys winning:

1. the ``spec`` keys at the top level, snake_cased recursively (:func:`to_snake`) unless the watch
   sets ``snakeCaseParameters: false``; a missing or non-map ``spec`` counts as ``{}``;
2. ``ansible_operator_meta: {name, namespace}``;
3. ``_<group>_<kind>``: the whole CR with its keys untouched (see :func:`object_key`);
4. ``_<group>_<kind>_spec``: the spec with its keys untouched;
5. the watch's ``vars``;
6. the finalizer's ``vars``, on finalizer runs only.

With ``markUnsafe`` (on by default in this product) every string that came from the CR -- in 1, 3
and 4 -- is wrapped as ``{"__ansible_unsafe": "..."}``. ansible-core's JSON loader turns that into
unsafe text when it reads ``-e @extravars``, so a ``{{ ... }}`` typed into a CR is never templated.
The ``name``/``namespace`` in 2 are Kubernetes names (no braces possible) and stay plain; the
watch's own ``vars`` are the operator author's and are templated as usual.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind

UNSAFE_KEY = "__ansible_unsafe"
META_KEY = "ansible_operator_meta"

# Acronyms kept whole by the SDK's conversion (with an optional plural "s").
_SPECIAL_WORDS = ("HTTP", "URL", "IP")
_SPECIAL_LOWER = frozenset(word.lower() for word in _SPECIAL_WORDS)
# "a12b34" style runs get word boundaries: a letter, digits, then a letter followed by digits.
_LETTER_DIGITS_LETTER_DIGITS = re.compile(r"([A-Za-z])([0-9]+)([A-Za-z][0-9]+)")
_SEPARATORS = frozenset(" _-")


def to_snake(name: str) -> str:
    """Convert one key to snake_case with the Operator SDK's rules (``paramconv.ToSnake``).

    Camel-case boundaries and spaces/dashes become ``_``; a leading capital gives a leading ``_``
    (``ThisKey`` -> ``_this_key``) unless the first word is one of HTTP/URL/IP; those acronyms and
    their plurals stay whole (``egressIPs`` -> ``egress_ips``); letter/digit runs stay together
    (``sizeK8sBuckets`` -> ``size_k8s_buckets``, ``db2_init`` unchanged). An all-uppercase key skips
    the acronym handling. The empty string (on which the SDK panics) is returned unchanged.
    """
    text = _LETTER_DIGITS_LETTER_DIGITS.sub(r"\1 \2 \3", name).strip(" ")
    if not text:
        return text
    starts_with_capital = "A" <= text[0] <= "Z"
    if text.upper() != text:
        text = _isolate_special_words(text)
    words = [word.lower() for word in _split_words(text)]
    joined = "_".join(words)
    if starts_with_capital and words[0] not in _SPECIAL_LOWER:
        return "_" + joined
    return joined


def _isolate_special_words(text: str) -> str:
    """Put ``_`` around the first occurrence of each acronym; a plural ``s`` joins it as ``S``."""
    for word in _SPECIAL_WORDS:
        start = text.find(word)
        if start < 0:
            continue
        end = start + len(word)
        plural = end < len(text) and text[end] == "s"
        rest_start = end + 1 if plural else end
        at_end = rest_start >= len(text)
        before = "_" if start > 0 or at_end else ""
        after = "" if at_end else "_"
        text = text[:start] + before + word + ("S" if plural else "") + after + text[rest_start:]
    return text


def _split_words(text: str) -> list[str]:
    """Split at separators and where the letter case flips (``JSONData`` -> ``JSON``, ``Data``)."""
    words: list[str] = []
    current = ""
    for index, char in enumerate(text):
        if char in _SEPARATORS:
            words.append(current)
            current = ""
        elif current and _case_flips(char, text[index + 1 : index + 2]):
            if _is_upper(char):
                words.append(current)  # an upper followed by a lower starts a new word
                current = char
            else:
                words.append(current + char)  # a lower followed by an upper ends the word
                current = ""
        else:
            current += char
    words.append(current)
    return words


def _is_upper(char: str) -> bool:
    return "A" <= char <= "Z"


def _is_lower(char: str) -> bool:
    return "a" <= char <= "z"


def _case_flips(char: str, following: str) -> bool:
    if not following:
        return False
    return (_is_upper(char) and _is_lower(following)) or (_is_lower(char) and _is_upper(following))


def snake_keys(value: Any) -> Any:
    """Snake_case every map key in ``value``, recursively, including maps inside lists.

    Values are never changed. When two keys of one map convert to the same name, the later wins.
    """
    if isinstance(value, Mapping):
        return {_snake_key(key): snake_keys(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [snake_keys(item) for item in value]
    return value


def _snake_key(key: Any) -> Any:
    return to_snake(key) if isinstance(key, str) else key


def mark_unsafe(value: Any) -> Any:
    """Wrap every string inside ``value`` as ``{"__ansible_unsafe": s}``; keys and other scalars stay."""
    if isinstance(value, str):
        return {UNSAFE_KEY: value}
    if isinstance(value, Mapping):
        return {key: mark_unsafe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [mark_unsafe(item) for item in value]
    return value


def object_key(gvk: GroupVersionKind) -> str:
    """The extra var holding the whole CR: ``"_" + group + "_" + lower(kind)``, ``.``/``-`` -> ``_``.

    ``cache.example.com/Memcached`` gives ``_cache_example_com_memcached``; the core group gives
    ``__secret`` for ``Secret``. The raw spec is under the same name plus ``_spec``.
    """
    return f"_{gvk.group}_{gvk.kind.lower()}".replace(".", "_").replace("-", "_")


def build_extra_vars(cr: Mapping[str, Any], watch: AnsibleWatch, *, finalizer: bool) -> dict[str, Any]:
    """The extra vars for one run on ``cr`` (see the module docstring for the merge order).

    ``finalizer`` says this is a finalizer run (the CR is being deleted and carries the watch's
    finalizer); the watch must then have a finalizer. The result shares no objects with ``cr`` or
    ``watch``, so the caller may serialise or change it freely.
    """
    if finalizer and watch.finalizer is None:
        raise ValueError(f"finalizer run requested for {watch.gvk}, whose watch has no finalizer")
    raw_spec = cr.get("spec")
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    protect = mark_unsafe if watch.mark_unsafe else copy.deepcopy

    top_level = snake_keys(spec) if watch.snake_case_parameters else copy.deepcopy(dict(spec))
    extra_vars: dict[str, Any] = {key: protect(value) for key, value in top_level.items()}
    metadata = cr.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    extra_vars[META_KEY] = {"name": metadata.get("name") or "", "namespace": metadata.get("namespace") or ""}
    key = object_key(watch.gvk)
    extra_vars[key] = protect(dict(cr))
    extra_vars[f"{key}_spec"] = protect(dict(spec))
    extra_vars.update(copy.deepcopy(watch.vars))
    if finalizer and watch.finalizer is not None:
        extra_vars.update(copy.deepcopy(watch.finalizer.vars))
    return extra_vars
