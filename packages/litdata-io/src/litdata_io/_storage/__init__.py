"""Storage: the interface every backend implements, the backends, and how hard they try.

- ``_interface``: ``Storage`` and ``ObjectInfo``; ``_schemes``: which backend serves a URL scheme.
- Backends: ``_local`` (a folder or a mount), ``_obstore`` (S3, GCS, Azure, HTTP), ``_fsspec`` (hf:// and
  any fsspec filesystem).
- ``_failures``: what a backend's error means; ``_retry`` and ``_settings``: retries, timeouts, ranged downloads.
- ``_options``: ``storage_options`` as users write them; ``_aws_config`` / ``_aws_boto3``: the AWS
  credential chain; ``_secret``: credentials kept out of reprs.
"""
