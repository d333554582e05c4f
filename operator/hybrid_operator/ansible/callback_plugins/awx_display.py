"""ansible-runner's ``awx_display`` stdout callback, with the environment taken out of every task result.

Why this file exists: ``awx_display`` writes each task result into the run's job events (a partial
file from inside ``ansible-playbook``, then ``job_events/*.json``) and its stdout. It removes
``ansible_facts.ansible_env`` -- the whole environment of the operator, secrets included -- only
when the task's action is spelled exactly ``setup`` or ``gather_facts``; ``ansible.builtin.setup``,
``ansible.legacy.setup``, ``ansible.builtin.gather_facts``, a collection's redirect to them, or the
same module in a loop wrote the environment to disk and into the operator's memory.

Every run puts this directory before ansible-runner's own on ``ANSIBLE_CALLBACK_PLUGINS``
(:mod:`hybrid_operator.ansible.runner`), so Ansible loads this file as the stdout callback
``awx_display`` that ansible-runner forces. It is ansible-runner's callback in every respect but
one: before a result is shown or written, ``ansible_env`` leaves the ``ansible_facts`` of that
result and of each of its loop items, whatever the task's action is called. Callbacks receive a
copy of the result, so the facts a play sees are unchanged.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType
from typing import Any


def _runner_callback() -> ModuleType:
    """ansible-runner's own ``awx_display``: the next one on ``ANSIBLE_CALLBACK_PLUGINS`` (where the
    ansible-runner that started this run put its callback directory), loaded by path as Ansible would.

    Self-contained on purpose: ``ansible-playbook`` may run on an interpreter where neither
    ansible-runner nor hybrid-operator can be imported.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    for directory in os.environ.get("ANSIBLE_CALLBACK_PLUGINS", "").split(os.pathsep):
        candidate = os.path.join(directory, "awx_display.py")
        if not directory or os.path.abspath(directory) == here or not os.path.isfile(candidate):
            continue
        spec = importlib.util.spec_from_file_location("_ansible_runner_awx_display", candidate)
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    from ansible_runner.display_callback.callback import awx_display  # not on the path: the installed one

    return awx_display


_runner = _runner_callback()
DOCUMENTATION = _runner.DOCUMENTATION

#: the facts that hold the environment of the process that gathered them
ENVIRONMENT_FACTS = ("ansible_env",)


def strip_environment(result: Any) -> None:
    """Remove the environment facts from a task result and from each of its loop items, in place."""
    if not isinstance(result, dict):
        return
    facts = result.get("ansible_facts")
    if isinstance(facts, dict):
        for name in ENVIRONMENT_FACTS:
            facts.pop(name, None)
    items = result.get("results")
    if isinstance(items, list):
        for item in items:
            strip_environment(item)


def _stripped(name: str) -> Any:
    parent = getattr(_runner.CallbackModule, name)

    def method(self: Any, result: Any, *args: Any, **kwargs: Any) -> Any:
        strip_environment(getattr(result, "_result", None))
        return parent(self, result, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"ansible-runner's ``{name}`` on the result without its environment facts."
    return method


class CallbackModule(_runner.CallbackModule):  # type: ignore[misc]
    """ansible-runner's ``awx_display``; every method given a task result strips its environment first."""

    CALLBACK_NAME = "awx_display"


for _name in ("v2_runner_on_ok", "v2_runner_on_failed", "v2_runner_on_skipped", "v2_runner_on_unreachable",
              "v2_runner_on_async_poll", "v2_runner_on_async_ok", "v2_runner_on_async_failed",
              "v2_runner_item_on_ok", "v2_runner_item_on_failed", "v2_runner_item_on_skipped", "v2_runner_retry",
              "v2_runner_on_file_diff", "v2_on_file_diff"):
    setattr(CallbackModule, _name, _stripped(_name))
