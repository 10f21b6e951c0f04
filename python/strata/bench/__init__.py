"""Benchmarks and analysis tools behind ``python -m strata.cli bench`` (pure Python where possible)."""
