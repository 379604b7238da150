"""The distribution's version (the litdata packages share it), read by the package and its command line."""

__version__ = "0.2.1000"
