"""Workflows that the chaos suite's worker subprocesses run (``-A tests.chaos.apps.<module>:registry``)."""
