"""Upstream's ``litdata.utilities.encryption`` import path."""

from litdata_format import Encryption, FernetEncryption, RSAEncryption

__all__ = ["Encryption", "FernetEncryption", "RSAEncryption"]
