"""The command line: ``strata`` (or ``python -m strata.cli``)."""
