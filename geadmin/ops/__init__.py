"""Everything that changes or exercises a server: model actions, the diagnostics bundle, and the
registry of background runs (runs.py) a page starts and watches: load tests, fleet rollouts."""
