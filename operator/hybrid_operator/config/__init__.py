"""Configuration: what the operator is told to do, validated before anything runs.

``watches.yaml`` (its model, loader and validator: every error names file, line, entry and key),
the settings of ``hybrid-operator run`` (flags, environment, defaults in one documented object),
the SDK's scalar spellings (Go durations and booleans) and deterministic YAML output. Pure: no
cluster, no process, no I/O beyond reading the files it is pointed at.
"""
