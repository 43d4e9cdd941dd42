"""Benchmark results: samples, runs, their statistics, and the SQLite store that keeps them."""
