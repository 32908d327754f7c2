"""Helpers shared by benchmarks (a package, so `make bench` does not run it as a benchmark)."""
