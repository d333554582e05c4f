"""Ask a real kube-apiserver what it does with KEP-5866's `shardSelector`, and print the answers.

Run against the real control plane (`hybrid-operator cluster --control-plane real`, docs/real-cluster.md):
``python scripts/kep5866_probe.py --kubeconfig .hybrid/kubeconfig``. It creates a namespace of its own
with ConfigMaps and a custom resource (a CRD it installs), then, for both kinds: LISTs with shard
ranges and compares what comes back with the objects whose 64-bit FNV-1a hash of ``metadata.uid``
falls in the range (computed here), WATCHes one half while creating more objects, and sends bound
syntaxes that may or may not be accepted, printing each status code and message. Each finding is one
line ``FACT <name>: <value>`` (a mismatch is printed, not hidden); the exit code is 0 when every probe
got an answer. It deletes what it created. Only loopback servers are accepted.
"""

from __future__ import annotations

import argparse
import base64
import json
import ssl
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

NAMESPACE = "kep5866-probe"
GROUP = "probe.hybrid.dev"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}
HALF = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
COUNT = 16
TOP = 1 << 64


def fnv1a64(text: str) -> int:
    """64-bit FNV-1a of ``text``'s UTF-8 bytes."""
    value = 0xCBF29CE484222325
    for byte in text.encode():
        value ^= byte
        value = (value * 0x100000001B3) % TOP
    return value


class Api:
    """Bearer-token HTTPS to the server of a kubeconfig (its CA verified)."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        self.server = str(cluster["server"]).rstrip("/")
        host = urllib.parse.urlsplit(self.server).hostname
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise SystemExit(f"{kubeconfig}: {self.server} is not a loopback server; this probe only runs locally")
        self.token = str(config["users"][0]["user"]["token"])
        with tempfile.NamedTemporaryFile("wb", suffix=".crt") as ca:
            ca.write(base64.b64decode(cluster["certificate-authority-data"]))
            ca.flush()
            self.context = ssl.create_default_context(cafile=ca.name)

    def call(self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None,
             timeout: float = 30) -> tuple[int, Any]:
        url = self.server + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json",
            "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=timeout) as response:
                raw = response.read()
                status = int(response.status)
        except urllib.error.HTTPError as refused:
            raw, status = refused.read(), refused.code
        text = raw.decode(errors="replace")
        try:
            return status, json.loads(text)
        except json.JSONDecodeError:
            return status, text

    def watch(self, path: str, query: dict[str, str], seconds: int) -> list[dict[str, Any]]:
        url = self.server + path + "?" + urllib.parse.urlencode({**query, "watch": "true",
                                                                 "timeoutSeconds": str(seconds)})
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, context=self.context, timeout=seconds + 10) as response:
            return [json.loads(line) for line in response.read().decode().splitlines() if line.strip()]


def fact(name: str, value: object) -> None:
    print(f"FACT {name}: {value}", flush=True)


def in_range(uid: str, start: int, end: int) -> bool:
    return start <= fnv1a64(uid) < end


def collection(kind: str) -> str:
    if kind == "configmaps":
        return f"/api/v1/namespaces/{NAMESPACE}/configmaps"
    return f"/apis/{GROUP}/v1/namespaces/{NAMESPACE}/widgets"


def make(api: Api, kind: str, name: str) -> dict[str, Any]:
    body: dict[str, Any] = ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
                            if kind == "configmaps" else
                            {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name}})
    status, created = api.call("POST", collection(kind), body)
    if status != 201:
        raise SystemExit(f"create {kind}/{name}: {status} {created}")
    return dict(created)


def probe_list(api: Api, kind: str, uids: dict[str, str]) -> None:
    for label, start, end in (("lower half", 0, 1 << 63), ("upper half", 1 << 63, TOP)):
        selector = f"shardRange(object.metadata.uid, '0x{start:016x}', '0x{end:016x}')" if end < TOP else \
            f"shardRange(object.metadata.uid, '0x{start:016x}', '0x10000000000000000')"
        status, body = api.call("GET", collection(kind), query={"shardSelector": selector})
        if status != 200:
            fact(f"{kind} list {label}", f"status {status}: {body}")
            continue
        # only the objects made here (the namespace also holds kube-root-ca.crt, from the controller-manager)
        got = {item["metadata"]["name"] for item in body["items"]} & set(uids)
        expected = {name for name, uid in uids.items() if in_range(uid, start, end)}
        fact(f"{kind} list {label} matches FNV-1a64(uid) in [start,end)",
             f"{got == expected} (got {len(got)}, expected {len(expected)} of {len(uids)})")
        fact(f"{kind} list {label} metadata.shardInfo", json.dumps(body["metadata"].get("shardInfo")))


def probe_watch(api: Api, kind: str) -> None:
    _, listed = api.call("GET", collection(kind), query={"limit": "1"})
    version = listed["metadata"]["resourceVersion"]
    created: dict[str, str] = {}

    def create_later() -> None:
        time.sleep(1.5)
        for index in range(COUNT):
            obj = make(api, kind, f"watched-{index}")
            created[obj["metadata"]["name"]] = obj["metadata"]["uid"]

    writer = threading.Thread(target=create_later)
    writer.start()
    events = api.watch(collection(kind), {"resourceVersion": version, "shardSelector": HALF}, seconds=6)
    writer.join()
    seen = {e["object"]["metadata"]["name"] for e in events if e.get("type") == "ADDED"}
    expected = {name for name, uid in created.items() if in_range(uid, 0, 1 << 63)}
    fact(f"{kind} watch lower half matches FNV-1a64(uid)",
         f"{seen == expected} (got {len(seen)} ADDED, expected {len(expected)} of {len(created)})")
    fact(f"{kind} watch event types", sorted({str(e.get("type")) for e in events}))


def probe_pages(api: Api, kind: str, uids: dict[str, str]) -> None:
    """LIST with limit=3 and the lower half, following `continue` to the end."""
    pages, names, token = [], set(), ""
    while True:
        query = {"shardSelector": HALF, "limit": "3", **({"continue": token} if token else {})}
        status, body = api.call("GET", collection(kind), query=query)
        if status != 200:
            fact(f"{kind} pages", f"status {status}: {body}")
            return
        meta = body["metadata"]
        pages.append(f"{len(body['items'])} items (remainingItemCount={meta.get('remainingItemCount')}, "
                     f"shardInfo={'shardInfo' in meta})")
        names |= {item["metadata"]["name"] for item in body["items"]}
        token = meta.get("continue") or ""
        if not token:
            break
    expected = {name for name, uid in uids.items() if in_range(uid, 0, 1 << 63)}
    fact(f"{kind} limit=3 pages with the lower half", "; ".join(pages))
    fact(f"{kind} pages together match FNV-1a64(uid)", (names & set(uids)) == expected)


def probe_delete_collection(api: Api, uids: dict[str, str]) -> None:
    """DELETE the collection with the lower half: which of the listed ConfigMaps are left."""
    status, body = api.call("DELETE", collection("configmaps"), query={"shardSelector": HALF})
    if isinstance(body, dict):
        fact("configmaps deletecollection response metadata", json.dumps(body.get("metadata"), sort_keys=True))
    deleted = {item["metadata"]["name"] for item in body.get("items", [])} if isinstance(body, dict) else set()
    _, left = api.call("GET", collection("configmaps"))
    remaining = {item["metadata"]["name"] for item in left["items"]} & set(uids)
    upper = {name for name, uid in uids.items() if not in_range(uid, 0, 1 << 63)}
    fact("configmaps deletecollection lower half", f"{status}; left exactly the upper half: {remaining == upper} "
         f"({len(remaining)} left of {len(uids)}, {len(deleted & set(uids))} in the response)")


def probe_initial_events(api: Api, kind: str) -> None:
    """A watch with sendInitialEvents and the lower half: what its initial-events-end bookmark carries."""
    query = {"shardSelector": HALF, "sendInitialEvents": "true", "allowWatchBookmarks": "true",
             "resourceVersionMatch": "NotOlderThan", "resourceVersion": ""}
    _, everything = api.call("GET", collection(kind))
    expected = {item["metadata"]["name"] for item in everything["items"]
                if in_range(item["metadata"]["uid"], 0, 1 << 63)}
    events = api.watch(collection(kind), query, seconds=4)
    bookmarks = [e["object"]["metadata"] for e in events if e.get("type") == "BOOKMARK"
                 and (e["object"]["metadata"].get("annotations") or {}).get("k8s.io/initial-events-end")]
    added = {e["object"]["metadata"]["name"] for e in events if e.get("type") == "ADDED"}
    fact(f"{kind} sendInitialEvents watch", f"initial ADDED match FNV-1a64(uid): {added == expected} "
         f"({len(added)} of {len(everything['items'])}); initial-events-end bookmark metadata: "
         f"{json.dumps(bookmarks[0] if bookmarks else None, sort_keys=True)}")


SYNTAX = {
    "16 lowercase hex": HALF,
    "short '0x0' start": "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
    "uppercase hex digits": "shardRange(object.metadata.uid, '0x0000000000000000', '0x800000000000000A')",
    "uppercase 0X prefix": "shardRange(object.metadata.uid, '0X0000000000000000', '0x8000000000000000')",
    "no 0x prefix": "shardRange(object.metadata.uid, '0000000000000000', '8000000000000000')",
    "top bound 0x10000000000000000": "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
    "17 digits other than the top": "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000001')",
    "start > end": "shardRange(object.metadata.uid, '0x8000000000000000', '0x0000000000000000')",
    "start == end": "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
    "namespace field": "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')",
    "two ranges ||": HALF + " || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
    "mixed fields ||": HALF + " || shardRange(object.metadata.namespace, '0x0000000000000000', "
                              "'0x10000000000000000')",
    "name field": "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
    "double quotes": 'shardRange(object.metadata.uid, "0x0000000000000000", "0x8000000000000000")',
    "spaces trimmed": "  shardRange( object.metadata.uid , '0x0000000000000000' , '0x8000000000000000' )  ",
    "garbage": "not a selector",
    "empty": "",
    "only spaces": "   ",
    "trailing ||": HALF + " ||",
    "&& instead of ||": HALF + " && " + HALF,
    "negation": "!" + HALF,
    "bare identifier": "object",
    "string literal": "'0x0000000000000000'",
    "two arguments": "shardRange(object.metadata.uid, '0x0000000000000000')",
    "indexed field": "shardRange(object['metadata'].uid, '0x0000000000000000', '0x8000000000000000')",
    "function as field": "shardRange(size(object), '0x0000000000000000', '0x8000000000000000')",
    "int bound": "shardRange(object.metadata.uid, 0, '0x8000000000000000')",
    "uint bound": "shardRange(object.metadata.uid, 0u, '0x8000000000000000')",
    "double bound": "shardRange(object.metadata.uid, 0.5, '0x8000000000000000')",
    "bytes bound": "shardRange(object.metadata.uid, b'0x0000000000000000', '0x8000000000000000')",
    "null bound": "shardRange(object.metadata.uid, null, '0x8000000000000000')",
    "bool bound": "shardRange(object.metadata.uid, true, '0x8000000000000000')",
    "identifier bound": "shardRange(object.metadata.uid, start, '0x8000000000000000')",
    "only 0x": "shardRange(object.metadata.uid, '0x', '0x8000000000000000')",
    "18 digits": "shardRange(object.metadata.uid, '0x000000000000000000', '0x8000000000000000')",
    "non-hex digit g": "shardRange(object.metadata.uid, '0x000000000000000g', '0x8000000000000000')",
    "raw string": "shardRange(object.metadata.uid, r'0x0000000000000000', '0x8000000000000000')",
    "escaped string": "shardRange(object.metadata.uid, '\\x30x0000000000000000', '0x8000000000000000')",
    "start is 2^64": "shardRange(object.metadata.uid, '0x10000000000000000', '0x10000000000000000')",
    "parenthesised": "(" + HALF + ")",
    "three ranges, order kept": "shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000') || "
                                "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || "
                                "shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')",
    "has macro": "has(object.metadata.uid)",
    "all macro": "object.all(x, x)",
    "list literal": "[" + HALF + "]",
    "map literal": "{'a': 1}",
    "message literal": "T{a: 1}",
    "method call": "object.shardRange('0x0000000000000000', '0x8000000000000000')",
    "unclosed call": "shardRange(object.metadata.uid, '0x0000000000000000'",
    "unterminated string": "shardRange(object.metadata.uid, '0x0000000000000000, '0x8000000000000000')",
    "backquoted identifier": "shardRange(`object`.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
    "optional select": "shardRange(object.?metadata.uid, '0x0000000000000000', '0x8000000000000000')",
    "lone ||": "||",
    "reserved word field": "shardRange(object.metadata.if, '0x0000000000000000', '0x8000000000000000')",
}


def probe_syntax(api: Api, kind: str) -> None:
    for label, selector in SYNTAX.items():
        status, body = api.call("GET", collection(kind), query={"shardSelector": selector})
        if status == 200:
            info = body["metadata"].get("shardInfo")
            fact(f"{kind} syntax {label}", f"200, {len(body['items'])} items, shardInfo={json.dumps(info)}")
        else:
            message = body.get("message") if isinstance(body, dict) else body
            reason = body.get("reason") if isinstance(body, dict) else ""
            fact(f"{kind} syntax {label}", f"{status} {reason}: {message}")


def probe_malformed_verbs(api: Api, kind: str) -> None:
    """WATCH and DELETECOLLECTION with a malformed selector: the status code and body (nothing is deleted)."""
    selector = SYNTAX["short '0x0' start"]
    url = api.server + collection(kind) + "?" + urllib.parse.urlencode({"watch": "true", "shardSelector": selector})
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api.token}"})
    try:
        with urllib.request.urlopen(request, context=api.context, timeout=10) as response:
            fact(f"{kind} watch malformed", f"{response.status} (a stream)")
    except urllib.error.HTTPError as refused:
        fact(f"{kind} watch malformed", f"{refused.code} {refused.read().decode()[:400]}")
    _, before = api.call("GET", collection(kind))
    status, body = api.call("DELETE", collection(kind), query={"shardSelector": selector})
    _, after = api.call("GET", collection(kind))
    fact(f"{kind} deletecollection malformed", f"{status} {json.dumps(body, sort_keys=True)[:400]}; "
         f"objects before {len(before['items'])}, after {len(after['items'])}")


def probe_tiny_range(api: Api, kind: str) -> None:
    """LIST limit=1 with a range no object's hash is in (one value wide): what a filtering server answers."""
    tiny = "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')"
    status, body = api.call("GET", collection(kind), query={"shardSelector": tiny, "limit": "1"})
    meta = body.get("metadata", {}) if isinstance(body, dict) else {}
    fact(f"{kind} limit=1 tiny range", f"{status}, {len(body.get('items', []))} items, continue="
         f"{bool(meta.get('continue'))}, remainingItemCount={meta.get('remainingItemCount')}, "
         f"shardInfo={json.dumps(meta.get('shardInfo'))}")


def setup(api: Api) -> dict[str, dict[str, str]]:
    api.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": NAMESPACE}})
    api.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    deadline = time.monotonic() + 60
    while api.call("GET", collection("widgets"))[0] != 200:
        if time.monotonic() > deadline:
            raise SystemExit("the probe CRD was not served within 60 s")
        time.sleep(0.5)
    uids: dict[str, dict[str, str]] = {}
    for kind in ("configmaps", "widgets"):
        uids[kind] = {}
        for index in range(COUNT):
            obj = make(api, kind, f"listed-{index}")
            uids[kind][obj["metadata"]["name"]] = obj["metadata"]["uid"]
    return uids


def teardown(api: Api) -> None:
    api.call("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{GROUP}")
    api.call("DELETE", f"/api/v1/namespaces/{NAMESPACE}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, default=Path(".hybrid/kubeconfig"))
    args = parser.parse_args(argv)
    api = Api(args.kubeconfig)
    status, version = api.call("GET", "/version")
    fact("server", version.get("gitVersion") if status == 200 else f"{status} {version}")
    teardown(api)
    time.sleep(1)
    try:
        uids = setup(api)
        for kind in ("configmaps", "widgets"):
            probe_list(api, kind, uids[kind])
            probe_watch(api, kind)
            probe_initial_events(api, kind)
            probe_syntax(api, kind)
            probe_tiny_range(api, kind)
        status, body = api.call("GET", collection("configmaps"), query={"shardSelector": SYNTAX["garbage"]})
        fact("malformed selector response", f"{status} {json.dumps(body, sort_keys=True)[:400]}")
        for kind in ("configmaps", "widgets"):
            probe_pages(api, kind, uids[kind])
        for kind in ("configmaps", "widgets"):
            probe_malformed_verbs(api, kind)
        probe_delete_collection(api, uids["configmaps"])
    finally:
        teardown(api)
    return 0


if __name__ == "__main__":
    sys.exit(main())
