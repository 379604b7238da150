"""litracer: turn litdata's tracer log into a Chrome/Perfetto trace.

``litracer LOG -o trace.json`` on the command line, or :func:`convert_file` and
:func:`write_trace` from Python. Depends on nothing but the standard library.
"""

from litracer._cli import main
from litracer._convert import Conversion, convert_file, convert_lines, parse_line, write_trace
from litracer._version import __version__

__all__ = ["Conversion", "__version__", "convert_file", "convert_lines", "main", "parse_line", "write_trace"]
