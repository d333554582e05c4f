#!/usr/bin/python
"""Ask the operator to reconcile this object again after a period (operator_sdk.util.requeue_after)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: requeue_after
short_description: Reconcile the current object again after a period
description:
  - Returns the period; the operator sees the task result and requeues the object after it. The run
    ends after this task as far as the operator is concerned, so make it the last task.
options:
  time: {type: str, required: true, description: "A duration such as 30s, 5m or 1h30m."}
"""

import re

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    module = AnsibleModule(argument_spec={"time": {"type": "str", "required": True}}, supports_check_mode=True)
    period = module.params["time"]
    if not re.fullmatch(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+", period):
        module.fail_json(msg=f"time {period!r} is not a duration such as 30s, 5m or 1h30m")
    module.exit_json(changed=False, period=period)


if __name__ == "__main__":
    main()
