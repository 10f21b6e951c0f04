"""strata's exception classes (raised by the native core and the Python layer alike).

- ``StrataError``: the base of everything strata raises on purpose.
- ``FormatError``: a model or session file is malformed, truncated or inconsistent.
- ``ConfigError``: a setting is malformed or out of range (also a ``ValueError``).
- ``InvalidArgument``: a caller passed a bad argument (also a ``ValueError``).
- ``IOFailure``: the operating system refused a read, write or map (also an ``OSError``).
"""

from strata._strata import ConfigError, FormatError, InvalidArgument, IOFailure, StrataError

__all__ = ["ConfigError", "FormatError", "IOFailure", "InvalidArgument", "StrataError"]
