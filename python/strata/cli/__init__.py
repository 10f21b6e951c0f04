"""The command line: ``python -m strata.cli``."""
