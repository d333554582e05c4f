"""``meta.k8s.io/v1`` Table rendering, so ``kubectl get`` prints real columns.

kubectl asks for ``application/json;as=Table;v=v1;g=meta.k8s.io`` on every
``get``; with a plain List it can only print NAME and AGE.  kube-apiserver
answers with server-side column definitions and pre-rendered cells: built-in
kinds use their printers (:mod:`.printers`); custom resources use their CRD
version's ``additionalPrinterColumns`` evaluated with JSONPath
(:mod:`.jsonpath`), by default a single ``Age`` column of type ``date``, and
``date`` cells are rendered as ages (``5m``).  Missing CRD column values are
``null`` cells, which kubectl prints as ``<none>``.  Each row carries the
object as ``includeObject`` asks: its metadata (the default), all of it, or
nothing.

``printer_columns=None`` selects the built-in printer for ``kind``; a list
(possibly empty) selects the custom-resource path.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from hybrid_operator.localcluster import clock, objects
from hybrid_operator.localcluster.apiserver.clusterprinters import printer_for
from hybrid_operator.localcluster.apiserver.jsonpath import jsonpath
from hybrid_operator.localcluster.apiserver.printers import NAME, Cells, Column, Obj, Printer

TABLE_CONTENT_TYPE = "application/json;as=Table;v=v1;g=meta.k8s.io"
INCLUDE_METADATA = "Metadata"
INCLUDE_OBJECT = "Object"
INCLUDE_NONE = "None"

# --------------------------------------------------------------------------- custom resources

_DEFAULT_CR_COLUMNS: list[dict[str, Any]] = [
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
]


def _cr_column(spec: dict[str, Any]) -> Column:
    return Column(
        name=str(spec.get("name", "")),
        type=str(spec.get("type", "string")),
        description=str(spec.get("description", "")),
        priority=int(spec.get("priority", 0) or 0),
        format=str(spec.get("format", "")),
    )


def _matches_type(value: Any, column_type: str) -> bool:
    if column_type == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if column_type == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if column_type == "boolean":
        return isinstance(value, bool)
    return False


def _render_result(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, separators=(",", ":"))


def _cr_cell(obj: Obj, spec: dict[str, Any]) -> Any:
    results = jsonpath(obj, str(spec.get("jsonPath", "")))
    if not results:
        return None
    if len(results) == 1:
        value = results[0]
        if isinstance(value, str) or _matches_type(value, str(spec.get("type", "string"))):
            return value
    return " ".join(_render_result(value) for value in results)


def _dated(value: Any, spec: dict[str, Any], now: datetime) -> Any:
    """``date`` columns are rendered as an age (``5m``), as kube-apiserver's table convertor does."""
    if spec.get("type") == "date" and isinstance(value, str) and clock.parse_timestamp(value) is not None:
        return clock.since(value, now)
    return value


def _custom_printer(printer_columns: list[dict[str, Any]]) -> Printer:
    specs = printer_columns or _DEFAULT_CR_COLUMNS
    columns = [NAME, *(_cr_column(spec) for spec in specs)]

    def cells(obj: Obj, now: datetime) -> Cells:
        return [objects.name(obj), *(_dated(_cr_cell(obj, spec), spec, now) for spec in specs)]

    return columns, cells


# --------------------------------------------------------------------------- the Table


def _row_object(item: Obj, include_object: str, kind: str, api_version: str | None) -> Obj | None:
    if include_object == INCLUDE_NONE:
        return None
    if include_object == INCLUDE_OBJECT:
        full = dict(item)
        full.setdefault("kind", kind)
        if api_version:
            full.setdefault("apiVersion", api_version)
        return full
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": item.get("metadata", {}),
    }


def table(
    items: list[Obj],
    *,
    kind: str,
    printer_columns: list[dict[str, Any]] | None,
    include_object: str = INCLUDE_METADATA,
    resource_version: str,
    now: datetime,
    api_version: str | None = None,
    continue_token: str | None = None,
) -> dict[str, Any]:
    """The ``Table`` kube-apiserver returns for ``items`` of ``kind``.

    ``include_object`` is the ``includeObject`` query value (``Metadata``,
    ``Object`` or ``None``); ``api_version`` fills a missing ``apiVersion``
    in full row objects.
    """
    columns, cells = printer_for(kind) if printer_columns is None else _custom_printer(printer_columns)
    rows = []
    for item in items:
        row: dict[str, Any] = {"cells": cells(item, now)}
        embedded = _row_object(item, include_object, kind, api_version)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [column.definition() for column in columns],
        "rows": rows,
    }


def parse_table_accept(accept: str) -> bool:
    """True when an ``Accept`` header asks for ``as=Table`` in ``meta.k8s.io`` v1 or v1beta1."""
    for media_range in accept.split(","):
        params = _media_params(media_range)
        if params.get("as") != "Table":
            continue
        if params.get("g", "meta.k8s.io") == "meta.k8s.io" and params.get("v", "v1") in ("v1", "v1beta1"):
            return True
    return False


def _media_params(media_range: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for part in media_range.split(";")[1:]:
        key, _, value = part.partition("=")
        params[key.strip()] = value.strip().strip('"')
    return params
