#!/usr/bin/python
"""Create a Kubernetes Event about an object (operator_sdk.util.k8s_event)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_event
short_description: Create a core v1 Event
options:
  name: {type: str, required: true}
  namespace: {type: str, required: true}
  message: {type: str, required: true}
  reason: {type: str, required: true}
  type: {type: str, default: Normal, choices: [Normal, Warning]}
  source: {type: dict}
  involvedObject: {type: dict, required: true}
  reportingComponent: {type: str}
  appendTimestamp: {type: bool, default: false}
  state: {type: str, default: present, choices: [present, absent]}
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.operator_sdk.util.plugins.module_utils.client import api_client, call, now


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "namespace": {"type": "str", "required": True},
            "message": {"type": "str", "required": True},
            "reason": {"type": "str", "required": True},
            "type": {"type": "str", "default": "Normal", "choices": ["Normal", "Warning"]},
            "source": {"type": "dict"},
            "involvedObject": {"type": "dict", "required": True},
            "reportingComponent": {"type": "str"},
            "appendTimestamp": {"type": "bool", "default": False},
            "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
        },
        supports_check_mode=True,
    )
    from kubernetes.client.exceptions import ApiException

    params = module.params
    name = params["name"] + (f".{int(time.time() * 1000)}" if params["appendTimestamp"] else "")
    path = f"/api/v1/namespaces/{params['namespace']}/events"
    client = api_client()
    try:
        if params["state"] == "absent":
            if not module.check_mode:
                call(client, "DELETE", f"{path}/{name}")
            module.exit_json(changed=True)
        stamp = now()
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": params["namespace"]},
            "message": params["message"], "reason": params["reason"], "type": params["type"],
            "involvedObject": params["involvedObject"], "source": params["source"] or {},
            "reportingComponent": params["reportingComponent"] or "", "count": 1,
            "firstTimestamp": stamp, "lastTimestamp": stamp,
        }
        result = event if module.check_mode else call(client, "POST", path, event)
    except ApiException as exc:
        if exc.status == 404 and params["state"] == "absent":
            module.exit_json(changed=False)
        module.fail_json(msg=f"cannot {params['state']} event {name}: {exc.status} {exc.reason}")
        return
    module.exit_json(changed=True, result=result)


if __name__ == "__main__":
    main()
