"""Fixtures shared by the root tests. Server fixtures live in their own modules (one function per
server) and are exposed here, so any test can ask for them by name."""

from __future__ import annotations

from tests.servers import s3_bucket, s3_server

__all__ = ["s3_bucket", "s3_server"]
