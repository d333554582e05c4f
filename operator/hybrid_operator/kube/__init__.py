"""Talking to the Kubernetes API: the adapter around the ``kubernetes`` client, and object accessors.

:mod:`.client` is the only importer of ``kubernetes`` (reads, status patches, finalizers, Events,
discovery, server-side apply, list/watch for dependents); :mod:`.connection` says how to reach the
server for those who speak HTTP themselves; :mod:`.objects` reads fields of objects held as dicts;
:mod:`.informer` is the one list-then-watch loop. Nothing here knows about Ansible or Helm.
"""
