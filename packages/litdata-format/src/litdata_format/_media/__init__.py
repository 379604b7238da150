"""Media leaves: the typed wrappers (``Image``, ``Video``, ``Graph``, ...) and their serializers."""
