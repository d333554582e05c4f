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

Different on purpose (docs/ansible.md, docs/security.md): :func:`refusals` lists why a spec may not
reach Ansible at all -- a top-level key that would set one of Ansible's own variables
(:mod:`hybrid_operator.ansible.reserved`) or one the operator sets, and keys of one map that
snake_case to the same name (the SDK lets one of them win silently, depending on key order). The
reconciler refuses such a CR before anything runs.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hybrid_operator.ansible import reserved
from hybrid_operator.config.model import AnsibleWatch, GroupVersionKind

UNSAFE_KEY = "__ansible_unsafe"
META_KEY = "ansible_operator_meta"
#: the objects of the watch's ``triggers`` (set by the reconciler, after the SDK's extra vars)
RELATED_KEY = "_related"

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
    """``value`` as ansible-core's JSON loader will read it as unsafe: keys and strings at every depth.

    A string, map or list becomes ``{"__ansible_unsafe": <a copy of value>}``: the loader hands the
    whole value to ansible-core's ``wrap_var``, which marks every string inside it -- map keys
    included, in maps inside lists too -- as unsafe text. Other scalars (numbers, booleans, null)
    stay as they are: nothing in them can be templated.
    """
    if isinstance(value, str | Mapping | list | tuple):
        return {UNSAFE_KEY: _plain(value)}
    return value


def _plain(value: Any) -> Any:
    """A deep copy of ``value`` with JSON's containers (tuples become lists)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
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
    ``watch``, so the caller may serialise or change it freely. With ``markUnsafe`` each value that
    came from the CR is wrapped whole (:func:`mark_unsafe`); :func:`extra_vars_documents` is what a
    run receives, which also makes the names of the spec's variables unsafe.
    """
    from_spec, others = _parts(cr, watch, finalizer=finalizer)
    protect = mark_unsafe if watch.mark_unsafe else _plain
    return {**{key: protect(value) for key, value in from_spec.items()}, **others}


def _parts(cr: Mapping[str, Any], watch: AnsibleWatch, *, finalizer: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the spec's top-level variables, unprotected; everything the operator adds after them, protected)."""
    if finalizer and watch.finalizer is None:
        raise ValueError(f"finalizer run requested for {watch.gvk}, whose watch has no finalizer")
    raw_spec = cr.get("spec")
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    protect = mark_unsafe if watch.mark_unsafe else _plain
    from_spec: dict[str, Any] = snake_keys(spec) if watch.snake_case_parameters else _plain(spec)
    others: dict[str, Any] = {}
    metadata = cr.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    others[META_KEY] = {"name": metadata.get("name") or "", "namespace": metadata.get("namespace") or ""}
    key = object_key(watch.gvk)
    others[key] = protect(dict(cr))
    others[f"{key}_spec"] = protect(dict(spec))
    others.update(copy.deepcopy(watch.vars))
    if finalizer and watch.finalizer is not None:
        others.update(copy.deepcopy(watch.finalizer.vars))
    return from_spec, others


@dataclass(frozen=True)
class RunVars:
    """The extra vars of one run, as the JSON documents given to ``ansible-playbook -e @<file>``, in order.

    ``dropped`` names the spec's top-level variables that were left out because they are Ansible's
    own (connection, become, shell, interpreter or magic variables): the reconciler refuses such a
    spec before it gets here, so this happens only if that check was bypassed.
    """

    documents: tuple[dict[str, Any], ...]
    dropped: tuple[str, ...] = ()


def extra_vars_documents(cr: Mapping[str, Any], watch: AnsibleWatch, *, finalizer: bool,
                         extra: Mapping[str, Any] | None = None) -> RunVars:
    """What one run receives: :func:`build_extra_vars` plus ``extra`` (set after it), split for safety.

    This is where the object becomes the run's input, so the last line of defence lives here:

    * the spec's top-level variables that Ansible itself reads (``ansible_*`` and the magic variables)
      are never written, whatever the caller checked before (:attr:`RunVars.dropped`);
    * with ``markUnsafe``, the spec's variables go first, in one document wrapped whole as
      ``{"__ansible_unsafe": {...}}``: ansible-core then marks their names unsafe too, and every key
      and string inside them. The operator's variables follow in a second document (the two share no
      name, so the merge order of :func:`build_extra_vars` is kept whatever the hash behaviour).
    """
    from_spec, others = _parts(cr, watch, finalizer=finalizer)
    others.update(copy.deepcopy(dict(extra or {})))
    dropped = tuple(name for name in from_spec if reserved.is_ansible_name(name))
    kept = {name: value for name, value in from_spec.items() if name not in others and name not in dropped}
    if not watch.mark_unsafe:
        return RunVars(({**kept, **others},), dropped)
    documents = ({UNSAFE_KEY: kept},) if kept else ()
    return RunVars((*documents, others), dropped)


def operator_names(gvk: GroupVersionKind) -> tuple[str, ...]:
    """The extra vars the operator itself sets for every run of ``gvk``'s objects."""
    key = object_key(gvk)
    return META_KEY, key, f"{key}_spec", RELATED_KEY


#: keys ansible-core's JSON loader gives a meaning of its own (unsafe text, a vault-encrypted value)
LOADER_KEYS = frozenset({UNSAFE_KEY, "__ansible_vault"})
#: every Jinja delimiter starts with it; a key holding one could, joined to another, start a template
JINJA_START = "{"
_SHOWN_KEY_CHARS = 60


def refusals(cr: Mapping[str, Any], watch: AnsibleWatch,
             automation_vars: Mapping[str, str] | None = None) -> list[str]:
    """Why ``cr``'s spec may not reach Ansible, one message per offending key; empty when it may.

    A top-level key is refused when the variable it becomes (its snake_case form, or the key itself
    with ``snakeCaseParameters: false``) -- or the raw key -- is one of Ansible's own names or one
    the operator sets (:func:`operator_names`), or one of ``automation_vars``: the variables the
    watch's playbook or role sets itself (name -> where), which an extra var would override. Keys of
    any map in the spec (at any depth, maps inside lists included) are refused when they hold ``{``
    (see :data:`JINJA_START`) or are one of :data:`LOADER_KEYS`, and -- with snake_case conversion
    on -- when two keys of one map convert to the same name.
    """
    raw_spec = cr.get("spec")
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    own = operator_names(watch.gvk)
    problems: list[str] = []
    for key in spec:
        if not isinstance(key, str) or JINJA_START in key or key in LOADER_KEYS:
            continue  # refused below, with every other key of the kind
        variable = to_snake(key) if watch.snake_case_parameters else key
        hit = reserved.reserved_among(dict.fromkeys((variable, key)), own)
        if hit:
            problems.append(_reserved_message(key, variable, hit[0], own))
        elif automation_vars and variable in automation_vars:
            problems.append(_automation_message(key, variable, automation_vars[variable]))
    problems.extend(_key_problems(spec, "spec", snake=watch.snake_case_parameters))
    return problems


def _reserved_message(key: str, variable: str, name: str, own: tuple[str, ...]) -> str:
    becomes = f'becomes the variable "{variable}"; ' if variable != key else ""
    if name in own:
        return f'spec.{key}: {becomes}"{name}" is set by the operator itself; a custom resource may not set it'
    return (f'spec.{key}: {becomes}"{name}" is a reserved Ansible variable (connection, privilege escalation, '
            "interpreter or magic variable); a custom resource may not set it")


def _automation_message(key: str, variable: str, where: str) -> str:
    becomes = f'becomes the variable "{variable}", which' if variable != key else f'is the variable "{variable}", which'
    return (f"spec.{key}: {becomes} the automation sets itself ({where}); a custom resource may not override "
            "it (a spec key would outrank it). Only a role's defaults/ may be set from the spec")


def _key_problems(value: Any, path: str, *, snake: bool) -> list[str]:
    """Problems with the keys of every map in ``value`` (recursively): ``{``, loader keys, snake_case collisions."""
    problems: list[str] = []
    if isinstance(value, Mapping):
        groups: dict[Any, list[str]] = {}
        for key in value:
            if not isinstance(key, str):
                continue
            if JINJA_START in key:
                problems.append(f"{path}[{_shown(key)}]: a key may not contain {JINJA_START!r}: keys, like "
                                "values, must not carry Jinja, and Ansible does not keep keys unsafe through "
                                "every filter")
            elif key in LOADER_KEYS:
                problems.append(f"{path}.{key}: a key Ansible's extra vars loader interprets; a custom resource "
                                "may not use it")
            elif snake:
                groups.setdefault(to_snake(key), []).append(key)
        for converted, keys in groups.items():
            if len(keys) > 1:
                named = " and ".join(f"{path}.{key}" for key in sorted(keys))
                problems.append(f'{named} both become "{converted}" after snake_case conversion; '
                                "keep only one of them")
        for key, item in value.items():
            if isinstance(key, str) and (JINJA_START in key or key in LOADER_KEYS):
                continue  # its contents are never used
            problems.extend(_key_problems(item, f"{path}.{key}", snake=snake))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            problems.extend(_key_problems(item, f"{path}[{index}]", snake=snake))
    return problems


def related_without_unsafe_keys(found: Mapping[str, Any]) -> tuple[dict[str, list[Any]], list[str]]:
    """The ``_related`` objects (kind -> objects) without those holding a key with ``{`` or a key Ansible's
    loader interprets, at any depth; and why each one left out was (``Kind namespace/name: the problem``).

    Such keys are refused in a spec; a related object cannot be refused, so it is left out of the run.
    ``metadata.managedFields`` is not looked at: the API server writes its ``k:{...}`` keys.
    """
    kept: dict[str, list[Any]] = {}
    left_out: list[str] = []
    for kind, items in found.items():
        kept[kind] = []
        for item in items if isinstance(items, list) else []:
            metadata = item.get("metadata") if isinstance(item, Mapping) else None
            metadata = metadata if isinstance(metadata, Mapping) else {}
            checked = {**item, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}} \
                if isinstance(item, Mapping) else item
            named = f"{kind} {metadata.get('namespace') or ''}/{metadata.get('name') or ''}".replace(" /", " ")
            problems = _key_problems(checked, named, snake=False)
            if problems:
                left_out.append(problems[0])
            else:
                kept[kind].append(item)
    return kept, left_out


def _shown(key: str) -> str:
    """``key`` quoted for a message, cut to a readable length."""
    shown = key if len(key) <= _SHOWN_KEY_CHARS else key[:_SHOWN_KEY_CHARS] + "..."
    return json.dumps(shown)
