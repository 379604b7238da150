"""Encryption of datasets: Fernet (password-derived key) and RSA-OAEP, per sample or per chunk.

An encrypted dataset records ``{"algorithm": ..., "level": ...}`` in ``config.encryption``;
the key itself never goes into the dataset. Readers need the same key: the object used to
write, or one loaded from the key file written by :meth:`Encryption.save` (a Fernet key file
holds only the salt, so the password is needed again). Key files are interchangeable with
upstream LitData's.

``cryptography`` is imported only when an encryption object is made or loaded.
"""

from __future__ import annotations

import base64
import functools
import importlib
import inspect
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from litdata_format._guards import is_str_dict

__all__ = [
    "Encryption",
    "EncryptionLevel",
    "EncryptionLevelType",
    "FernetEncryption",
    "RSAEncryption",
]

EncryptionLevelType = Literal["sample", "chunk"]
_LEVELS = ("sample", "chunk")
_INSTALL = 'pip install "litdata-format[encryption]"'

# PBKDF2 parameters fixed by the format: a different count would derive a different key.
_KDF_ITERATIONS = 480_000
_SALT_BYTES = 16


class EncryptionLevel:
    """What gets encrypted: each item's bytes (``SAMPLE``) or each whole chunk file (``CHUNK``)."""

    SAMPLE = "sample"
    CHUNK = "chunk"


_SUBMODULES = (
    "fernet",
    "hazmat.primitives.asymmetric.padding",
    "hazmat.primitives.asymmetric.rsa",
    "hazmat.primitives.hashes",
    "hazmat.primitives.kdf.pbkdf2",
    "hazmat.primitives.serialization",
)


def _cryptography() -> Any:
    try:
        import cryptography

        for name in _SUBMODULES:  # reached below as attributes of the package
            importlib.import_module(f"cryptography.{name}")
    except ImportError:
        raise ImportError(f"encryption needs the 'cryptography' package: {_INSTALL}") from None
    return cryptography


def _check_level(level: Any) -> str:
    if level not in _LEVELS:
        # Upstream's sentence first: code written for upstream matches it.
        raise ValueError(f"The provided `level` should be either `sample` or `chunk`: got {level!r}")
    return level


def _as_bytes(data: Any) -> bytes:
    return data if isinstance(data, bytes) else bytes(data)


def _read_key_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            state = json.load(handle)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not an encryption key file (invalid JSON: {err})") from None
    if not is_str_dict(state):
        raise ValueError(f"{path}: not an encryption key file (expected a JSON object)")
    return state


def _write_key_file(path: str | os.PathLike[str], state: Mapping[str, Any]) -> None:
    # Same bytes as upstream: json.dumps with its default separators, no trailing newline.
    with open(path, "wb") as handle:
        handle.write(json.dumps(state).encode("utf-8"))


def _wrong_key(where: str, algorithm: str) -> ValueError:
    place = where or "the data"
    return _wrong_key_error()(
        f"{place}: {algorithm} decryption failed: the key is wrong (wrong password or key file) or the "
        "encrypted bytes were altered; load the key the dataset was written with"
    )


@functools.cache
def _wrong_key_error() -> type[ValueError]:
    """``WrongKeyError``, made on first use.

    It derives from cryptography's ``InvalidToken`` (what upstream raises for a wrong Fernet key)
    and importing cryptography is too slow for import time.
    """
    from cryptography.fernet import InvalidToken

    class WrongKeyError(ValueError, InvalidToken):
        """Decryption failed: the key is wrong or the encrypted bytes were altered.

        Also a ``cryptography.fernet.InvalidToken`` (upstream LitData's error for a wrong Fernet
        key) and a ``ValueError`` (cryptography's error for a wrong RSA key).
        """

    WrongKeyError.__module__ = __name__
    WrongKeyError.__qualname__ = "WrongKeyError"  # pickled by name, e.g. from a DataLoader worker
    globals()["WrongKeyError"] = WrongKeyError
    return WrongKeyError


def __getattr__(name: str) -> Any:
    if name == "WrongKeyError":
        return _wrong_key_error()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _accepts_where(function: Any) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "where" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class Encryption(ABC):
    """What the writer and the readers use to encrypt and decrypt a dataset.

    Subclasses name their ``algorithm`` and implement ``encrypt``, ``decrypt``, ``save`` and
    ``load``; ``level`` ("sample" or "chunk") is "sample" unless they set it, and ``state_dict``
    may hold what they like (the index records it with the algorithm and level). A subclass
    written for upstream LitData, whose ``decrypt`` takes only the data, works as is.
    """

    level: str = "sample"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        decrypt = cls.__dict__.get("decrypt")
        if decrypt is not None and not getattr(decrypt, "__isabstractmethod__", False) and not _accepts_where(decrypt):
            # Readers pass where= for error messages; a one-argument decrypt just ignores it.
            @functools.wraps(decrypt)
            def decrypt_ignoring_where(self: Any, data: Any, where: str = "") -> bytes:
                return decrypt(self, data)

            cls.decrypt = decrypt_ignoring_where  # type: ignore[method-assign]

    @property
    @abstractmethod
    def algorithm(self) -> str:
        """The name written to ``config.encryption.algorithm``."""

    @abstractmethod
    def encrypt(self, data: bytes) -> bytes:
        """The ciphertext of ``data``.

        Args:
            data: the plaintext.
        """

    @abstractmethod
    def decrypt(self, data: bytes, where: str = "") -> bytes:
        """The plaintext of ``data``; a wrong key raises ValueError naming ``where``.

        Args:
            data: the ciphertext.
            where: names the item or chunk in the error.
        """

    def state_dict(self) -> dict[str, Any]:
        """Settings ``index.json`` records under ``config.encryption``, with the algorithm and level (never the key)."""
        return {"algorithm": self.algorithm, "level": self.level}

    def recorded(self) -> dict[str, Any]:
        """What ``index.json`` records under ``config.encryption``: state_dict(), algorithm and level.

        A subclass's ``state_dict`` need not hold the algorithm and level the readers check.
        """
        state = self.state_dict()
        if not is_str_dict(state):
            raise TypeError(f"{type(self).__name__}.state_dict() must return a dict, got {type(state).__name__}")
        return {**state, "algorithm": self.algorithm, "level": self.level}

    def check_matches(self, recorded: Mapping[str, Any] | None, source: str = "the dataset") -> None:
        """Raise ValueError unless ``recorded`` (``config.encryption``) was written with this kind of key.

        Args:
            recorded: the dataset's ``config.encryption``.
            source: names the dataset in the error.
        """
        if not recorded:
            raise ValueError(f"{source}: the dataset is not encrypted, but encryption={self!r} was given")
        for key in ("algorithm", "level"):
            mine = self.algorithm if key == "algorithm" else self.level
            # A key the index does not record cannot be checked: an older writer recorded only a
            # subclass's state_dict(), which may lack it.
            if key in recorded and recorded[key] != mine:
                raise ValueError(
                    f"Encryption {key} mismatch. {source}: the dataset is encrypted with {key} "
                    f"{recorded.get(key)!r}, but the given encryption uses {mine!r}"
                )

    @abstractmethod
    def save(self, file_path: str | os.PathLike[str]) -> None:
        """Write a key file that :meth:`load` reads back.

        Args:
            file_path: the key file to write.
        """

    @classmethod
    def load(cls, file_path: str | os.PathLike[str], password: str) -> Encryption:
        """Load a key file written by :meth:`save` (here or by upstream LitData).

        Called on :class:`Encryption` itself, the algorithm is read from the file.

        Args:
            file_path: the key file.
            password: the password the key was made with.
        """
        if cls is not Encryption:
            raise NotImplementedError(f"{cls.__name__} does not implement load()")
        state = _read_key_file(file_path)
        if "private_key" in state or "public_key" in state:
            return RSAEncryption.load(file_path, password)
        if state.get("algorithm") == "fernet":
            return FernetEncryption.load(file_path, password)
        raise ValueError(f"{file_path}: not a Fernet or RSA key file (keys: {sorted(state)})")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(level={getattr(self, 'level', None)!r})"


class FernetEncryption(Encryption):
    """Symmetric encryption (AES-128-CBC + HMAC-SHA256, the Fernet recipe) with a password-derived key.

    The key is PBKDF2-HMAC-SHA256 of the password over a random 16-byte salt (480000
    iterations, 32 bytes, url-safe base64). Each ciphertext is a Fernet token (version byte,
    timestamp, IV, ciphertext, HMAC), url-safe base64 encoded.

    Args:
        password: the secret the key is derived from.
        level: "sample" encrypts each item, "chunk" each whole chunk file.
    """

    def __init__(self, password: str, level: EncryptionLevelType = "sample") -> None:
        self._setup(password, level, os.urandom(_SALT_BYTES))

    def _setup(self, password: str, level: str, salt: bytes) -> None:
        _cryptography()
        # Typed, yet checked: bytes would derive a different key than the same text as a str.
        if not isinstance(password, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"the password must be a str, got {type(password).__name__}")
        self.password = password
        self.level = _check_level(level)
        self.salt = salt
        self.key = self._derive_key(password, salt)
        self._make_fernet()

    def _make_fernet(self) -> None:
        from cryptography.fernet import Fernet

        self.fernet = Fernet(self.key)

    @property
    def algorithm(self) -> str:
        return "fernet"

    def _derive_key(self, password: str, salt: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

        kdf = PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=salt, iterations=_KDF_ITERATIONS)
        return base64.urlsafe_b64encode(kdf.derive(password.encode()))

    def encrypt(self, data: bytes) -> bytes:
        return self.fernet.encrypt(_as_bytes(data))

    def decrypt(self, data: bytes, where: str = "") -> bytes:
        from cryptography.fernet import InvalidToken

        try:
            return self.fernet.decrypt(_as_bytes(data))
        except InvalidToken:
            raise _wrong_key(where, "Fernet") from None

    def save(self, file_path: str | os.PathLike[str]) -> None:
        """Write ``{"algorithm", "level", "salt"}`` (the salt url-safe base64); the password is not stored.

        Args:
            file_path: the key file to write.
        """
        state: dict[str, Any] = self.state_dict()
        state["salt"] = base64.urlsafe_b64encode(self.salt).decode("utf-8")
        _write_key_file(file_path, state)

    @classmethod
    def load(cls, file_path: str | os.PathLike[str], password: str) -> FernetEncryption:
        """Re-derive the key from ``password`` and the salt saved in ``file_path``.

        Args:
            file_path: the key file.
            password: the password the key was derived from.
        """
        state = _read_key_file(file_path)
        if state.get("algorithm", "fernet") != "fernet" or "salt" not in state:
            raise ValueError(f"{file_path}: not a Fernet key file (keys: {sorted(state)})")
        try:
            salt = base64.urlsafe_b64decode(state["salt"])
        except (ValueError, TypeError):
            raise ValueError(f"{file_path}: the salt is not valid base64") from None
        instance = cls.__new__(cls)
        instance._setup(password, state.get("level", "sample"), salt)
        return instance

    def __getstate__(self) -> dict[str, Any]:
        # The Fernet object is rebuilt from the key; unpickling never re-runs the slow KDF.
        return {"password": self.password, "level": self.level, "salt": self.salt, "key": self.key}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.password = state.get("password", "")
        self.level = state["level"]
        self.salt = state["salt"]
        # upstream's pickles hold the same attributes (plus its Fernet object, rebuilt here)
        self.key = state["key"] if "key" in state else self._derive_key(self.password, self.salt)
        self._make_fernet()


class RSAEncryption(Encryption):
    """Public-key encryption: RSA 2048-bit, OAEP padding with MGF1-SHA256 and SHA-256.

    Each item (or chunk) is one OAEP block, so RSA can only encrypt payloads of at most
    190 bytes; larger ones raise ValueError (use :class:`FernetEncryption` for those).

    Args:
        password: protects the private key in saved key files.
        level: "sample" encrypts each item, "chunk" each whole chunk file.
    """

    _KEY_BITS: ClassVar[int] = 2048

    def __init__(self, password: str, level: EncryptionLevelType = "sample") -> None:
        crypto = _cryptography()
        self.password = password
        self.level = _check_level(level)
        rsa = crypto.hazmat.primitives.asymmetric.rsa
        self.private_key: Any = rsa.generate_private_key(public_exponent=65537, key_size=self._KEY_BITS)
        self.public_key: Any = self.private_key.public_key()

    @property
    def algorithm(self) -> str:
        return "rsa"

    @staticmethod
    def _padding() -> Any:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        return padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA256()), algorithm=hashes.SHA256(), label=None)

    def max_plaintext_bytes(self) -> int:
        """The largest payload one OAEP-SHA256 block can hold with this key (190 for 2048 bits)."""
        if self.public_key is None:
            raise ValueError("this RSAEncryption has no public key")
        return self.public_key.key_size // 8 - 2 * 32 - 2

    def encrypt(self, data: bytes) -> bytes:
        if self.public_key is None:
            raise ValueError("this RSAEncryption has no public key to encrypt with")
        limit = self.max_plaintext_bytes()
        if len(data) > limit:
            raise ValueError(
                f"RSA-OAEP can encrypt at most {limit} bytes at once, got {len(data)} bytes "
                f"(level={self.level!r}); use FernetEncryption for larger samples or chunks"
            )
        return self.public_key.encrypt(_as_bytes(data), self._padding())

    def decrypt(self, data: bytes, where: str = "") -> bytes:
        if self.private_key is None:
            raise ValueError(f"{where or 'the data'}: this RSAEncryption has no private key to decrypt with")
        try:
            return self.private_key.decrypt(_as_bytes(data), self._padding())
        except ValueError:
            raise _wrong_key(where, "RSA") from None

    # -- key files ----------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        from cryptography.hazmat.primitives import serialization

        private = None
        if self.private_key is not None:
            protection = (
                serialization.BestAvailableEncryption(self.password.encode())
                if self.password
                else serialization.NoEncryption()
            )
            private = self.private_key.private_bytes(
                encoding=serialization.Encoding.PEM,
                format=serialization.PrivateFormat.TraditionalOpenSSL,
                encryption_algorithm=protection,
            ).decode("utf-8")
        public = None
        if self.public_key is not None:
            public = self.public_key.public_bytes(
                encoding=serialization.Encoding.PEM, format=serialization.PublicFormat.SubjectPublicKeyInfo
            ).decode("utf-8")
        return {"private_key": private, "public_key": public, "password": self.password, "level": self.level}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._restore(state, state.get("password") or "", "the pickled RSAEncryption")

    def _restore(self, state: Mapping[str, Any], password: str, source: str) -> None:
        _cryptography()
        from cryptography.hazmat.primitives import serialization

        self.password = password
        self.level = _check_level(state.get("level", "sample"))
        self.private_key = None
        self.public_key = None
        if state.get("private_key"):
            self.private_key = _load_private_pem(state["private_key"].encode("utf-8"), password, source)
        if state.get("public_key"):
            self.public_key = serialization.load_pem_public_key(state["public_key"].encode("utf-8"))
        elif self.private_key is not None:
            self.public_key = self.private_key.public_key()

    def save(self, file_path: str | os.PathLike[str]) -> None:
        """Write ``{"private_key", "public_key", "password", "level"}`` as upstream LitData does.

        The private key PEM is encrypted with the password, but upstream's format also stores
        the password itself in the file (its loader needs it), so keep the key file secret.

        Args:
            file_path: the key file to write.
        """
        _write_key_file(file_path, self.__getstate__())

    @classmethod
    def load(cls, file_path: str | os.PathLike[str], password: str) -> RSAEncryption:
        """Load a key file written by :meth:`save`.

        ``password`` unlocks the private key; when empty, the password stored in the file is used.

        Args:
            file_path: the key file.
            password: unlocks the private key; empty to use the one stored in the file.
        """
        state = _read_key_file(file_path)
        if not state.get("private_key") and not state.get("public_key"):
            raise ValueError(f"{file_path}: not an RSA key file (keys: {sorted(state)})")
        instance = cls.__new__(cls)
        instance._restore(state, password or state.get("password") or "", str(file_path))
        return instance

    def save_keys(self, private_key_path: str | os.PathLike[str], public_key_path: str | os.PathLike[str]) -> None:
        """Write the private key (PEM, encrypted with the password) and the public key (PEM) to two files.

        Args:
            private_key_path: the file for the private key.
            public_key_path: the file for the public key.
        """
        state = self.__getstate__()
        if not state["private_key"] or not state["public_key"]:
            raise ValueError("this RSAEncryption lacks a private or a public key to save")
        with open(private_key_path, "wb") as handle:
            handle.write(state["private_key"].encode("utf-8"))
        with open(public_key_path, "wb") as handle:
            handle.write(state["public_key"].encode("utf-8"))

    def load_keys(
        self, private_key_path: str | os.PathLike[str], public_key_path: str | os.PathLike[str], password: str
    ) -> None:
        """Replace this object's keys with the PEM files written by :meth:`save_keys`.

        Args:
            private_key_path: the private key's PEM file.
            public_key_path: the public key's PEM file.
            password: unlocks the private key.
        """
        from cryptography.hazmat.primitives import serialization

        with open(private_key_path, "rb") as handle:
            self.private_key = _load_private_pem(handle.read(), password, str(private_key_path))
        with open(public_key_path, "rb") as handle:
            self.public_key = serialization.load_pem_public_key(handle.read())
        self.password = password


def _load_private_pem(pem: bytes, password: str, source: str) -> Any:
    from cryptography.hazmat.primitives import serialization

    lines = pem.splitlines()
    encrypted = any(line.startswith((b"-----BEGIN ENCRYPTED", b"Proc-Type: 4,ENCRYPTED")) for line in lines)
    if encrypted and not password:
        raise ValueError(f"{source}: the private key is encrypted; pass the password it was saved with")
    try:
        return serialization.load_pem_private_key(pem, password=password.encode() if encrypted else None)
    except ValueError:
        raise ValueError(
            f"{source}: cannot load the private key: the password is wrong or the file is corrupt"
        ) from None
    except TypeError as err:  # encrypted-ness disagreed with the PEM headers
        raise ValueError(f"{source}: cannot load the private key ({err})") from None
