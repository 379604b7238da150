"""Processes, forks and obstore: state built once per process, and where obstore runs.

- ``_process``: ``PerProcess``, the fork hook, the process identity, where obstore runs.
- ``_helper``: the obstore helper process; ``_requests``: the storage calls it is sent, as values.
- ``_loop``: event loops in background threads; ``_forkserver``: workers forked from a loaded script.
"""
