#!/usr/bin/python
"""Set the status (keys and conditions) of a Kubernetes object, as operator_sdk.util.k8s_status does."""

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_status
short_description: Update the status of a Kubernetes custom resource
description:
  - Merges C(status) keys and C(conditions) into the status of the object named by api_version, kind,
    name and namespace, through its /status subresource. Conditions are merged by type; a condition's
    lastTransitionTime changes only when its status changes.
options:
  api_version: {type: str, required: true}
  kind: {type: str, required: true}
  name: {type: str, required: true}
  namespace: {type: str}
  status: {type: dict, default: {}}
  conditions: {type: list, elements: dict, default: []}
  replace_lists: {type: bool, default: false}
  force: {type: bool, default: false}
"""

import copy
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.operator_sdk.util.plugins.module_utils.client import (
    api_client,
    call,
    merge_conditions,
    resource_path,
)

VALID_STATUS = ("True", "False", "Unknown")


def merge(old: Any, new: Any, replace_lists: bool) -> Any:
    if isinstance(old, dict) and isinstance(new, dict):
        result = dict(old)
        for key, value in new.items():
            result[key] = merge(old.get(key), value, replace_lists) if key in old else value
        return result
    if isinstance(old, list) and isinstance(new, list) and not replace_lists:
        return old + [item for item in new if item not in old]
    return new


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "api_version": {"type": "str", "required": True},
            "kind": {"type": "str", "required": True},
            "name": {"type": "str", "required": True},
            "namespace": {"type": "str"},
            "status": {"type": "dict", "default": {}},
            "conditions": {"type": "list", "elements": "dict", "default": []},
            "replace_lists": {"type": "bool", "default": False},
            "force": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    for condition in params["conditions"]:
        if "type" not in condition or condition.get("status") not in VALID_STATUS:
            module.fail_json(msg=f"each condition needs a type and a status of True, False or Unknown: {condition}")
    try:
        from kubernetes.client.exceptions import ApiException
    except ImportError:
        module.fail_json(msg="the kubernetes Python client is required")
        return
    try:
        client = api_client()
        path, has_status = resource_path(client, params["api_version"], params["kind"], params["namespace"],
                                         params["name"])
        obj = call(client, "GET", path)
    except (ApiException, LookupError) as exc:
        module.fail_json(msg=f"cannot read {params['kind']} {params['name']}: {exc}")
        return
    if not has_status:
        module.fail_json(msg=f"{params['kind']} has no status subresource; add `subresources: {{status: {{}}}}` "
                             "to its CRD")
    old_status = copy.deepcopy(obj.get("status") or {})
    new_status = merge(old_status, params["status"], params["replace_lists"]) if not params["force"] \
        else dict(params["status"])
    if params["conditions"]:
        new_status["conditions"] = merge_conditions(list(old_status.get("conditions") or []), params["conditions"])
    changed = new_status != old_status
    result = obj
    if changed and not module.check_mode:
        try:
            if params["force"]:
                obj["status"] = new_status
                result = call(client, "PUT", path + "/status", obj)
            else:
                # only the keys this task changes: a whole-status patch would put back the values it read,
                # over what other writers stored meanwhile (their status keys, the operator's conditions)
                changes = {k: v for k, v in new_status.items() if old_status.get(k) != v}
                patch = {"status": {**{k: None for k in old_status if k not in new_status}, **changes}}
                result = call(client, "PATCH", path + "/status", patch, "application/merge-patch+json")
        except ApiException as exc:
            module.fail_json(msg=f"cannot update the status of {params['kind']} {params['name']}: "
                                 f"{exc.status} {exc.reason}")
    module.exit_json(changed=changed, result=result)


if __name__ == "__main__":
    main()
