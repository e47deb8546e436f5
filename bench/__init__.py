"""Throughput benchmarks: one script per measured rate, each printing JSON."""
