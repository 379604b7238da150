"""Instrumentation: one probe per site, fanned out to the tracer and the watchdog's activity board.

- ``_probe``: the call every instrumented site makes; ``_switches``: whether anything listens.
- ``_tracer``: the trace log; ``_activity``: what each DataLoader worker is doing now.
"""
