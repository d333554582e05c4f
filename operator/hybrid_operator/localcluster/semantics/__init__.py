"""Semantics: the rules of the Kubernetes API, independent of HTTP.

What kube-apiserver decides between decoding a request and storing an
object lives here: create/read/update/patch/delete of objects
(:mod:`.crud`) and everything those verbs apply, each concept in its own
module: metadata and names, generation and no-op writes, graceful deletion,
per-kind strategies and CustomResourceDefinitions, structural schemas
(pruning, defaulting, validation), built-in defaulting, the three patch
formats and their merge keys, server-side apply with managedFields, and
label/field selectors.  Everything here takes and returns plain JSON dicts and
raises :class:`~hybrid_operator.localcluster.errors.ApiError`; nothing here
knows aiohttp, so every rule can be tested without a server.
"""
