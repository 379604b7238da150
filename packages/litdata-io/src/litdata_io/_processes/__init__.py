"""Processes, forks and obstore: state built once per process, the obstore helper, loop threads, the forkserver."""
