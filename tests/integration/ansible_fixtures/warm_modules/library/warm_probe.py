#!/usr/bin/python
"""A module that reports where it runs (tests/integration/test_warm_modules.py)."""

import os
import sys
import time

PRELOADED = "kubernetes" in sys.modules  # read before this module imports anything of its own

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main():
    module = AnsibleModule(argument_spec={"mode": {"type": "str", "default": "probe"},
                                          "pidfile": {"type": "str", "required": False}})
    mode = module.params["mode"]
    if mode == "fail":
        module.fail_json(msg="the probe failed on purpose")
    if mode == "raise":
        raise RuntimeError("the probe raised on purpose")
    if mode == "sleep":
        with open(module.params["pidfile"], "w") as handle:
            handle.write(str(os.getpid()))
        time.sleep(60)
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as handle:
        parent = handle.read().replace(b"\0", b" ").decode()
    default = None
    if PRELOADED:
        from kubernetes.config import kube_config
        default = kube_config.KUBE_CONFIG_DEFAULT_LOCATION
    module.exit_json(changed=False, preloaded=PRELOADED, parent=parent, parent_pid=os.getppid(),
                     kubeconfig=os.environ.get("KUBECONFIG"), kube_default=default, cwd=os.getcwd(),
                     task_env=os.environ.get("PROBE_TASK_ENV"), argv0=os.path.basename(sys.argv[0]))


if __name__ == "__main__":
    main()
