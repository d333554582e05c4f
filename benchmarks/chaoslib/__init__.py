"""The pieces of `make chaos` (benchmarks/chaos.py): the harness, the scenarios, the project they drive."""
