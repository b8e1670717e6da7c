"""Benchmarks for the extra-work ticket service: run with `make bench` (see RESULTS.md)."""
