"""``hybrid-operator preview``: what applying a custom resource would change, changing nothing.

:mod:`.preview` renders the chart or runs the playbook against the real cluster behind
:mod:`.guard`, an API gate that turns every write into a server-side dry run.
"""
