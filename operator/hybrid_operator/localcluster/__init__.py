"""The embedded Kubernetes API server: a separate world inside the package.

It imports nothing from the operator, and the operator imports nothing from it:
they only talk HTTP, exactly as the operator talks to a real cluster.
"""
