"""Test helpers (importable as ``support``: tests/ is on the pytest pythonpath)."""
