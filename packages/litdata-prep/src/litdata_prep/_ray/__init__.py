"""Ray: a job on a cluster's actors (``executor``), what one node reserves (``machine``), Ray Data (``data``)."""
