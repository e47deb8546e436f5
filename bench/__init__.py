"""Benchmarks, one script per measured rate, each printing JSON, with their helper modules; and
the GPU check (`device_check.py`), which writes its report to a file."""
