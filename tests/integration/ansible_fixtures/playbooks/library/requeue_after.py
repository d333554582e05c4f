#!/usr/bin/python
"""Test stand-in for operator_sdk.util.requeue_after: returns the requested ``time`` as ``period``."""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={"time": {"type": "str", "required": True}})
    module.exit_json(changed=False, period=module.params["time"])


if __name__ == "__main__":
    main()
