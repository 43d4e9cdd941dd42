"""Benchmarks: running workloads at every level and turning their output into metrics."""
