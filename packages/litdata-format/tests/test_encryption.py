"""Encryption: round trips through the writer and the reader, key files, wrong keys, upstream fixtures."""

from __future__ import annotations

import base64
import importlib.util
import json
import pickle
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import numpy as np
import pytest

from litdata_format import BinaryWriter, DatasetReader, load_index
from litdata_format._chunks._encryption import Encryption, EncryptionLevel, FernetEncryption, RSAEncryption

FIXTURES = Path(__file__).parent / "fixtures"
UPSTREAM = FIXTURES / "upstream-0.2.76"
PASSWORD = "litdata-test"  # what the upstream fixtures were encrypted with


def _load_samples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("litdata_encryption_samples", FIXTURES / "samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


samples = _load_samples()


def _same(actual: Any, expected: Any) -> bool:
    if isinstance(expected, np.ndarray):
        return isinstance(actual, np.ndarray) and actual.dtype == expected.dtype and np.array_equal(actual, expected)
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and list(actual) == list(expected)
            and all(_same(actual[k], expected[k]) for k in expected)
        )
    if isinstance(expected, (list, tuple)):
        return type(actual) is type(expected) and all(_same(a, e) for a, e in zip(actual, expected, strict=True))
    return type(actual) is type(expected) and actual == expected


# PBKDF2 with 480000 iterations is slow on purpose: derive each key once per module.
@pytest.fixture(scope="module")
def fernet_sample() -> FernetEncryption:
    return FernetEncryption("s3cret", level="sample")


@pytest.fixture(scope="module")
def fernet_chunk() -> FernetEncryption:
    return FernetEncryption("s3cret", level="chunk")


@pytest.fixture(scope="module")
def rsa_sample() -> RSAEncryption:
    return RSAEncryption("s3cret", level="sample")


def _sample(i: int) -> dict[str, Any]:
    return {"index": i, "name": f"secret-name-{i}", "arr": np.arange(3, dtype=np.int16) * i}


def _write(folder: Path, encryption: Encryption, compression: str | None, count: int = 7, chunk_size: int = 3) -> Path:
    writer = BinaryWriter(folder, chunk_size=chunk_size, compression=compression, encryption=encryption)
    for i in range(count):
        writer.write(_sample(i))
    writer.done()
    writer.merge()
    return folder


def _read(folder: Path, encryption: Encryption | None) -> list[Any]:
    reader = DatasetReader(folder, encryption=encryption)
    try:
        return [reader[i] for i in range(len(reader))]
    finally:
        reader.close()


# -- state_dict and the index ------------------------------------------------------------------


def test_state_dicts_are_what_upstream_records(
    fernet_sample: FernetEncryption, fernet_chunk: FernetEncryption, rsa_sample: RSAEncryption
) -> None:
    assert fernet_sample.state_dict() == {"algorithm": "fernet", "level": "sample"}
    assert fernet_chunk.state_dict() == {"algorithm": "fernet", "level": "chunk"}
    assert rsa_sample.state_dict() == {"algorithm": "rsa", "level": "sample"}
    assert (EncryptionLevel.SAMPLE, EncryptionLevel.CHUNK) == ("sample", "chunk")
    for name in ("fernet_sample", "fernet_chunk", "rsa_sample", "rsa_chunk"):
        recorded = load_index(UPSTREAM / name).encryption
        assert recorded is not None
        assert list(recorded) == ["algorithm", "level"]


def test_invalid_level_is_refused() -> None:
    with pytest.raises(ValueError, match="should be either `sample` or `chunk`"):
        FernetEncryption("pw", level="item")  # type: ignore[arg-type]


# -- round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("kind", ["fernet_sample", "fernet_chunk", "rsa_sample"])
def test_round_trip(tmp_path: Path, request: pytest.FixtureRequest, kind: str, compression: str | None) -> None:
    encryption: Encryption = request.getfixturevalue(kind)
    folder = _write(tmp_path / "ds", encryption, compression)
    index = load_index(folder)
    assert index.encryption == encryption.state_dict()
    assert index.compression == compression
    for info in index.chunks:
        assert b"secret-name" not in (folder / info.filename).read_bytes()
    got = _read(folder, encryption)
    assert len(got) == 7
    assert all(_same(value, _sample(i)) for i, value in enumerate(got))


def test_rsa_chunk_level_round_trip(tmp_path: Path) -> None:
    rsa = RSAEncryption("pw", level="chunk")
    writer = BinaryWriter(tmp_path, chunk_size=2, encryption=rsa)
    for i in range(5):
        writer.write((i, f"n{i}"))
    writer.done()
    writer.merge()
    assert [info.chunk_bytes for info in load_index(tmp_path).chunks] == [256, 256, 256]
    assert _read(tmp_path, rsa) == [(i, f"n{i}") for i in range(5)]


def test_rsa_refuses_payloads_longer_than_one_block(rsa_sample: RSAEncryption, tmp_path: Path) -> None:
    assert rsa_sample.max_plaintext_bytes() == 190
    assert rsa_sample.decrypt(rsa_sample.encrypt(b"x" * 190)) == b"x" * 190
    with pytest.raises(ValueError, match="at most 190 bytes.*FernetEncryption"):
        rsa_sample.encrypt(b"x" * 191)
    writer = BinaryWriter(tmp_path, chunk_size=2, encryption=rsa_sample)
    with pytest.raises(ValueError, match="at most 190 bytes"):
        writer.write({"text": "y" * 500})


def test_reading_with_a_key_loaded_from_its_file(tmp_path: Path, fernet_chunk: FernetEncryption) -> None:
    folder = _write(tmp_path / "ds", fernet_chunk, "zstd")
    fernet_chunk.save(tmp_path / "key.json")
    loaded = Encryption.load(tmp_path / "key.json", password="s3cret")
    assert isinstance(loaded, FernetEncryption)
    assert loaded.level == "chunk" and loaded.salt == fernet_chunk.salt and loaded.key == fernet_chunk.key
    assert all(_same(value, _sample(i)) for i, value in enumerate(_read(folder, loaded)))


def test_a_new_object_with_the_same_password_has_another_salt(tmp_path: Path, fernet_sample: FernetEncryption) -> None:
    # the salt is random: readers need the saved key file, not just the password
    folder = _write(tmp_path / "ds", fernet_sample, None)
    fresh = FernetEncryption("s3cret", level="sample")
    assert fresh.salt != fernet_sample.salt
    reader = DatasetReader(folder, encryption=fresh)
    with pytest.raises(ValueError, match="the key is wrong"):
        reader[0]
    reader.close()


# -- wrong keys ------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("kind", ["fernet_sample", "fernet_chunk"])
def test_wrong_password_is_a_clear_error(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str, compression: str | None
) -> None:
    encryption: FernetEncryption = request.getfixturevalue(kind)
    folder = _write(tmp_path / "ds", encryption, compression)
    encryption.save(tmp_path / "key.json")
    wrong = FernetEncryption.load(tmp_path / "key.json", password="not-the-password")
    reader = DatasetReader(folder, encryption=wrong)
    first_chunk = load_index(folder).chunks[0].filename
    with pytest.raises(ValueError, match="Fernet decryption failed: the key is wrong") as caught:
        reader[0]
    assert first_chunk in str(caught.value)
    reader.close()


def test_wrong_rsa_key_is_a_clear_error(tmp_path: Path, rsa_sample: RSAEncryption) -> None:
    folder = _write(tmp_path / "ds", rsa_sample, None)
    reader = DatasetReader(folder, encryption=RSAEncryption("s3cret", level="sample"))
    with pytest.raises(ValueError, match=r"chunk-0-0\.bin: RSA decryption failed: the key is wrong"):
        reader[0]
    reader.close()


def test_tampered_ciphertext_is_refused(fernet_sample: FernetEncryption) -> None:
    token = bytearray(fernet_sample.encrypt(b"payload"))
    token[20] = ord("A") if token[20] != ord("A") else ord("B")
    with pytest.raises(ValueError, match="item 3: Fernet decryption failed"):
        fernet_sample.decrypt(bytes(token), where="item 3")


def test_check_matches_names_the_mismatch(fernet_sample: FernetEncryption) -> None:
    fernet_sample.check_matches({"algorithm": "fernet", "level": "sample"})
    with pytest.raises(ValueError, match="level 'chunk'"):
        fernet_sample.check_matches({"algorithm": "fernet", "level": "chunk"}, "ds/index.json")
    with pytest.raises(ValueError, match="algorithm 'rsa'"):
        fernet_sample.check_matches({"algorithm": "rsa", "level": "sample"})
    with pytest.raises(ValueError, match="not encrypted"):
        fernet_sample.check_matches(None)


# -- key files ------------------------------------------------------------------------------------


def test_fernet_key_file_has_upstreams_shape(tmp_path: Path, fernet_sample: FernetEncryption) -> None:
    fernet_sample.save(tmp_path / "key.json")
    text = (tmp_path / "key.json").read_text()
    upstream = (UPSTREAM / "fernet_sample" / "fernet.key.json").read_text()
    assert list(json.loads(text)) == list(json.loads(upstream)) == ["algorithm", "level", "salt"]
    assert text == json.dumps(json.loads(text))  # default separators, no newline, as upstream writes
    assert base64.urlsafe_b64decode(json.loads(text)["salt"]) == fernet_sample.salt
    assert len(fernet_sample.salt) == 16
    assert "s3cret" not in text


def test_rsa_key_file_round_trip(tmp_path: Path, rsa_sample: RSAEncryption) -> None:
    rsa_sample.save(tmp_path / "rsa.json")
    state = json.loads((tmp_path / "rsa.json").read_text())
    upstream = json.loads((UPSTREAM / "rsa_sample" / "rsa.state.json").read_text())
    assert list(state) == list(upstream) == ["private_key", "public_key", "password", "level"]
    assert state["private_key"].startswith("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED")
    assert state["public_key"].startswith("-----BEGIN PUBLIC KEY-----")
    loaded = Encryption.load(tmp_path / "rsa.json", password="s3cret")
    assert isinstance(loaded, RSAEncryption) and loaded.level == "sample"
    assert loaded.decrypt(rsa_sample.encrypt(b"hello")) == b"hello"
    with pytest.raises(ValueError, match="password is wrong"):
        RSAEncryption.load(tmp_path / "rsa.json", password="nope")
    # no password given: the one upstream stores in the file unlocks the key
    assert RSAEncryption.load(tmp_path / "rsa.json", password="").decrypt(rsa_sample.encrypt(b"x")) == b"x"


def test_rsa_pem_files_round_trip(tmp_path: Path, rsa_sample: RSAEncryption) -> None:
    rsa_sample.save_keys(tmp_path / "private.pem", tmp_path / "public.pem")
    other = RSAEncryption("s3cret", level="sample")
    other.load_keys(tmp_path / "private.pem", tmp_path / "public.pem", password="s3cret")
    assert other.decrypt(rsa_sample.encrypt(b"abc")) == b"abc"


def test_not_a_key_file(tmp_path: Path) -> None:
    (tmp_path / "junk.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not an encryption key file"):
        Encryption.load(tmp_path / "junk.json", password="x")
    (tmp_path / "other.json").write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="not a Fernet or RSA key file"):
        Encryption.load(tmp_path / "other.json", password="x")
    with pytest.raises(ValueError, match="not a Fernet key file"):
        FernetEncryption.load(tmp_path / "other.json", password="x")


def test_pickles_keep_the_key(fernet_sample: FernetEncryption, rsa_sample: RSAEncryption) -> None:
    for encryption in (fernet_sample, rsa_sample):
        clone = pickle.loads(pickle.dumps(encryption))
        assert type(clone) is type(encryption) and clone.level == encryption.level
        assert clone.decrypt(encryption.encrypt(b"data")) == b"data"


def test_subclass_with_upstreams_one_argument_decrypt(tmp_path: Path) -> None:
    class Xor(Encryption):
        level = "sample"

        @property
        def algorithm(self) -> str:
            return "xor"

        def encrypt(self, data: bytes) -> bytes:
            return bytes(b ^ 0x55 for b in data)

        def decrypt(self, data: bytes) -> bytes:  # type: ignore[override]
            return bytes(b ^ 0x55 for b in data)

        def save(self, file_path: Any) -> None:
            raise NotImplementedError

    xor = Xor()
    as_base = cast(Encryption, xor)
    assert as_base.decrypt(xor.encrypt(b"abc"), where="somewhere") == b"abc"
    folder = _write(tmp_path / "ds", xor, None)
    assert load_index(folder).encryption == {"algorithm": "xor", "level": "sample"}
    assert all(_same(value, _sample(i)) for i, value in enumerate(_read(folder, xor)))


class _Keyed(Encryption):
    """What upstream's docs list for a custom algorithm, nothing more: no ``level``, and a
    ``state_dict`` holding only its own setting."""

    def __init__(self, key: int) -> None:
        self.key = key

    @property
    def algorithm(self) -> str:
        return "keyed-xor"

    def encrypt(self, data: bytes) -> bytes:
        return bytes(b ^ self.key for b in data)

    def decrypt(self, data: bytes) -> bytes:  # type: ignore[override]
        return bytes(b ^ self.key for b in data)

    def state_dict(self) -> dict[str, Any]:
        return {"key_bits": 8}

    def save(self, file_path: Any) -> None:
        Path(file_path).write_text(json.dumps(self.state_dict()))

    @classmethod
    def load(cls, file_path: Any, password: str) -> _Keyed:
        return cls(int(password))


def test_subclass_without_level_or_algorithm_in_its_state_dict(tmp_path: Path) -> None:
    folder = _write(tmp_path / "ds", _Keyed(0x2A), None)
    # The index records the subclass's state_dict with what readers check: level "sample" by default.
    assert load_index(folder).encryption == {"key_bits": 8, "algorithm": "keyed-xor", "level": "sample"}
    assert all(_same(value, _sample(i)) for i, value in enumerate(_read(folder, _Keyed.load("k", "42"))))
    with pytest.raises(ValueError, match="algorithm 'keyed-xor', but the given encryption uses 'fernet'"):
        _read(folder, FernetEncryption("pw"))


def test_an_index_that_recorded_only_a_subclass_state_dict_reads(tmp_path: Path) -> None:
    """Written before the algorithm and level were always recorded: nothing to check them against."""
    folder = _write(tmp_path / "ds", _Keyed(0x2A), None)
    index = json.loads((folder / "index.json").read_text())
    index["config"]["encryption"] = {"key_bits": 8}
    (folder / "index.json").write_text(json.dumps(index))
    assert all(_same(value, _sample(i)) for i, value in enumerate(_read(folder, _Keyed(0x2A))))


def test_a_state_dict_that_is_not_a_dict_is_named(tmp_path: Path) -> None:
    class Listed(_Keyed):
        def state_dict(self) -> Any:
            return ["key_bits", 8]

    with pytest.raises(TypeError, match=r"Listed.state_dict\(\) must return a dict, got list"):
        _write(tmp_path / "ds", Listed(1), None)
    assert not (tmp_path / "ds").exists()  # refused before anything is written


# -- upstream fixtures -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fernet_sample", "fernet_chunk", "rsa_sample", "rsa_chunk"])
def test_upstream_encrypted_fixtures_read(name: str) -> None:
    meta = samples.FIXTURES[name]
    key = Encryption.load(UPSTREAM / name / meta["key_file"], password=PASSWORD)
    assert key.state_dict() == load_index(UPSTREAM / name).encryption
    got = _read(UPSTREAM / name, key)
    assert len(got) == meta["num_samples"]
    for i, value in enumerate(got):
        assert _same(value, samples.generate(name, i)), (name, i, value)


@pytest.mark.parametrize("name", ["rsa_sample", "rsa_chunk"])
def test_upstream_rsa_pem_files_load(name: str) -> None:
    meta = samples.FIXTURES[name]
    key = RSAEncryption.load(UPSTREAM / name / meta["key_file"], password=PASSWORD)
    from_pems = RSAEncryption.__new__(RSAEncryption)
    from_pems.level = key.level
    from_pems.load_keys(
        UPSTREAM / name / meta["private_key_file"], UPSTREAM / name / meta["public_key_file"], password=PASSWORD
    )
    assert from_pems.decrypt(key.encrypt(b"same key")) == b"same key"


def test_upstream_fixture_with_the_wrong_password() -> None:
    key = FernetEncryption.load(UPSTREAM / "fernet_chunk" / "fernet.key.json", password="wrong")
    reader = DatasetReader(UPSTREAM / "fernet_chunk", encryption=key)
    with pytest.raises(ValueError, match=r"chunk-0-0\.bin: Fernet decryption failed: the key is wrong"):
        reader[0]
    reader.close()


# -- optional dependency ---------------------------------------------------------------------------


def test_cryptography_is_imported_lazily_and_missing_names_the_extra() -> None:
    script = (
        "import sys\n"
        "import litdata_format._chunks._encryption as enc\n"
        "assert 'cryptography' not in sys.modules\n"
        "sys.modules['cryptography'] = None\n"
        "try:\n"
        "    enc.FernetEncryption('pw')\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert 'pip install "litdata-format[encryption]"' in done.stdout
