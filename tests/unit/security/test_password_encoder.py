"""Dynamic passwords are stored as Kafka's PasswordEncoder stores them: the comma-separated
``name:value`` map with a PBKDF2 key (from the secret's UTF-8 bytes, the 256-byte salt, the
iterations) and AES, so the stored text decodes with the same secret only; the key derivation is
checked independently with hashlib, and a wrong secret or a tampered value is a one-line error."""
from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from kafkalite.security.password_encoder import PasswordEncoder, PasswordEncoderError

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="b0b-sécret";'


def fields(encoded: str) -> dict[str, str]:
    return dict(item.split(":", 1) for item in encoded.split(","))


def test_cbc_encoding_is_kafkas_format_and_round_trips() -> None:
    encoded = PasswordEncoder("s3cret").encode(JAAS)
    f = fields(encoded)
    assert (f["keyFactoryAlgorithm"], f["cipherAlgorithm"], f["keyLength"], f["iterations"]) == \
        ("PBKDF2WithHmacSHA512", "AES/CBC/PKCS5Padding", "128", "4096")
    assert len(base64.b64decode(f["salt"])) == 256 and len(base64.b64decode(f["initializationVector"])) == 16
    assert int(f["passwordLength"]) == len(JAAS) and "b0b" not in encoded
    # decrypt by hand, as Kafka's PBEKeySpec + Cipher would
    key = hashlib.pbkdf2_hmac("sha512", b"s3cret", base64.b64decode(f["salt"]), 4096, 16)
    decryptor = Cipher(algorithms.AES(key), modes.CBC(base64.b64decode(f["initializationVector"]))).decryptor()
    unpadder = padding.PKCS7(128).unpadder()
    plain = unpadder.update(decryptor.update(base64.b64decode(f["encryptedPassword"])) + decryptor.finalize())
    assert (plain + unpadder.finalize()).decode() == JAAS
    assert PasswordEncoder("s3cret").decode(encoded) == JAAS
    assert PasswordEncoder("s3cret").encode(JAAS) != encoded                  # a fresh salt and IV each time


def test_gcm_and_other_key_factories_round_trip() -> None:
    encoder = PasswordEncoder("s3cret", "PBKDF2WithHmacSHA1", "AES/GCM/NoPadding", 256, 1024)
    encoded = encoder.encode(JAAS)
    assert fields(encoded)["authenticationTagLength"] == "128"
    # decoding reads the algorithms from the stored text, not from the decoder's settings
    assert PasswordEncoder("s3cret").decode(encoded) == JAAS


def test_wrong_secret_or_tampered_text_is_refused() -> None:
    encoded = PasswordEncoder("s3cret", cipher="AES/GCM/NoPadding").encode(JAAS)
    with pytest.raises(PasswordEncoderError, match="could not be decoded"):
        PasswordEncoder("other").decode(encoded)
    with pytest.raises(PasswordEncoderError, match="could not be decoded"):
        PasswordEncoder("s3cret").decode(encoded.replace("passwordLength:", "passwordLength:1"))
    with pytest.raises(PasswordEncoderError, match="could not be decoded"):
        PasswordEncoder("s3cret").decode("garbage")
    with pytest.raises(PasswordEncoderError, match="not supported"):
        PasswordEncoder("s3cret", cipher="DES/CBC/PKCS5Padding")
