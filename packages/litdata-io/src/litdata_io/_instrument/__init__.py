"""Instrumentation: one probe per site, fanned out to the tracer and the watchdog's activity board."""
