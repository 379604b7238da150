"""Upstream's ``litdata.utilities`` package path."""
