#!/usr/bin/python
"""Create or update a Prometheus metric of the operator from a playbook (operator_sdk.util.osdk_metric)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: osdk_metric
short_description: Create or update a custom Prometheus metric served on the operator's /metrics
description:
  - Sends one operation to the operator's playbook-metrics endpoint. hybrid-operator tells every run
    where it is in the environment variable HYBRID_OPERATOR_METRICS_URL; without it (and without
    I(address)) the Operator SDK's address http://localhost:5050/metrics is used.
  - The first operation on a name creates the metric with that type; later ones must use the same type.
options:
  name: {type: str, required: true, description: "Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)."}
  description: {type: str, required: true, description: "Help text of the metric."}
  address: {type: str, description: "Endpoint to POST to (default: $HYBRID_OPERATOR_METRICS_URL)."}
  counter:
    type: dict
    description: "A counter: C(increment: true) adds 1, C(add: N) adds N (N >= 0); {} only creates it."
  gauge:
    type: dict
    description: "A gauge: set, increment, decrement, add, subtract, set_to_current_time."
  histogram: {type: dict, description: "A histogram: C(observe: N)."}
  summary: {type: dict, description: "A summary (sum and count): C(observe: N)."}
"""

EXAMPLES = r"""
- name: Count the backups taken
  operator_sdk.util.osdk_metric:
    name: backups_taken_total
    description: Backups taken by the operator
    counter:
      increment: true
"""

import json
import os
import urllib.error
import urllib.request

from ansible.module_utils.basic import AnsibleModule

DEFAULT_ADDRESS = "http://localhost:5050/metrics"
KINDS = ("counter", "gauge", "histogram", "summary")


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "description": {"type": "str", "required": True},
            "address": {"type": "str"},
            "counter": {"type": "dict", "options": {"increment": {"type": "bool"}, "add": {"type": "float"}}},
            "gauge": {"type": "dict", "options": {
                "set": {"type": "float"}, "increment": {"type": "bool"}, "decrement": {"type": "bool"},
                "add": {"type": "float"}, "subtract": {"type": "float"}, "set_to_current_time": {"type": "bool"},
            }},
            "histogram": {"type": "dict", "options": {"observe": {"type": "float"}}},
            "summary": {"type": "dict", "options": {"observe": {"type": "float"}}},
        },
        mutually_exclusive=[list(KINDS)],
        required_one_of=[list(KINDS)],
        supports_check_mode=True,
    )
    params = module.params
    payload = {"name": params["name"], "description": params["description"]}
    for kind in KINDS:
        if params.get(kind) is not None:
            payload[kind] = {k: v for k, v in params[kind].items() if v is not None}
    if module.check_mode:
        module.exit_json(changed=True, metric=payload)
    address = params.get("address") or os.environ.get("HYBRID_OPERATOR_METRICS_URL") or DEFAULT_ADDRESS
    request = urllib.request.Request(address, data=json.dumps(payload).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
    except urllib.error.HTTPError as error:
        module.fail_json(msg=error.read().decode(errors="replace") or str(error), status_code=error.code)
    except (urllib.error.URLError, OSError) as error:
        module.fail_json(msg=f"cannot reach the operator's metrics endpoint {address}: {error}")
    module.exit_json(changed=True, metric=payload)


if __name__ == "__main__":
    main()
