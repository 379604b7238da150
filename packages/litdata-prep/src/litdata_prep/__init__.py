"""litdata-prep: optimize / map / merge_datasets.

This package is a member of the litdata workspace; its public API lands here as it is built.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
