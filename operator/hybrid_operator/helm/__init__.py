"""The Helm side: chart kinds, one release per custom resource, as the SDK's Helm operator keeps them.

The reconciler (release state, install/upgrade/drift repair/recovery/uninstall, one status write
per reconcile), the values a release gets, the per-CR annotations, the Helm status shape, and the
client that runs the helm v4 binary.
"""
