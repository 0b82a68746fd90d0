"""Dynamic password configs as Kafka stores them in ZooKeeper (Kafka's PasswordEncoder, KIP-226).

A password-type dynamic broker config (``sasl.jaas.config``) is never written to
``/config/brokers/<id>`` in clear: it is encrypted with a key derived from the broker's
``password.encoder.secret`` (PBKDF2, a random 256-byte salt, AES) and stored as Kafka's
comma-separated ``name:value`` map (``keyFactoryAlgorithm``, ``cipherAlgorithm``, ``keyLength``,
``salt``, ``iterations``, ``encryptedPassword``, ``passwordLength``, ``initializationVector``
[, ``authenticationTagLength``]), so a Kafka broker with the same secret reads what kafkalite
wrote and the other way round. Pure: no Twisted, no broker imports.
"""
from __future__ import annotations

import base64
import os
from typing import Callable

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

#: Java SecretKeyFactory names -> hash
KEY_FACTORIES: dict[str, Callable[[], hashes.HashAlgorithm]] = {
    "PBKDF2WithHmacSHA512": hashes.SHA512, "PBKDF2WithHmacSHA256": hashes.SHA256, "PBKDF2WithHmacSHA1": hashes.SHA1}
CIPHERS = ("AES/CBC/PKCS5Padding", "AES/GCM/NoPadding")
DEFAULT_KEY_FACTORY = "PBKDF2WithHmacSHA512"     # Kafka's choice when password.encoder.keyfactory.algorithm is unset
GCM_TAG_BITS = 128
GCM_IV_BYTES = 12


class PasswordEncoderError(ValueError):
    """Not decodable with this secret, or an algorithm kafkalite does not have; one line."""


def _java_length(text: str) -> int:
    """String.length() in Java: UTF-16 code units (Kafka's passwordLength sanity check)."""
    return len(text.encode("utf-16-le")) // 2


class PasswordEncoder:
    """Encodes and decodes dynamic passwords with one secret (``password.encoder.*`` settings)."""

    def __init__(self, secret: str, key_factory: str | None = None, cipher: str = "AES/CBC/PKCS5Padding",
                 key_length: int = 128, iterations: int = 4096) -> None:
        key_factory = key_factory or DEFAULT_KEY_FACTORY
        if key_factory not in KEY_FACTORIES:
            raise PasswordEncoderError(f"password.encoder.keyfactory.algorithm {key_factory} is not supported "
                                       f"(kafkalite has {', '.join(KEY_FACTORIES)})")
        if cipher not in CIPHERS:
            raise PasswordEncoderError(f"password.encoder.cipher.algorithm {cipher} is not supported "
                                       f"(kafkalite has {', '.join(CIPHERS)})")
        if key_length not in (128, 192, 256):
            raise PasswordEncoderError(f"password.encoder.key.length {key_length} is not an AES key length")
        self.secret, self.key_factory, self.cipher = secret, key_factory, cipher
        self.key_length, self.iterations = key_length, iterations

    def _key(self, key_factory: str, key_length: int, salt: bytes, iterations: int) -> bytes:
        if key_factory not in KEY_FACTORIES:
            raise PasswordEncoderError(f"unknown key factory algorithm {key_factory}")
        kdf = PBKDF2HMAC(KEY_FACTORIES[key_factory](), key_length // 8, salt, iterations)
        return kdf.derive(self.secret.encode("utf-8"))

    def encode(self, password: str) -> str:
        salt = os.urandom(256)
        key = self._key(self.key_factory, self.key_length, salt, self.iterations)
        params = {"keyFactoryAlgorithm": self.key_factory, "cipherAlgorithm": self.cipher,
                  "keyLength": str(self.key_length), "salt": _b64(salt), "iterations": str(self.iterations)}
        data = password.encode("utf-8")
        if self.cipher == "AES/GCM/NoPadding":
            iv = os.urandom(GCM_IV_BYTES)
            encrypted = AESGCM(key).encrypt(iv, data, None)
            params["authenticationTagLength"] = str(GCM_TAG_BITS)
        else:
            iv = os.urandom(16)
            padder = padding.PKCS7(128).padder()
            encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
            encrypted = encryptor.update(padder.update(data) + padder.finalize()) + encryptor.finalize()
        params.update(encryptedPassword=_b64(encrypted), passwordLength=str(_java_length(password)),
                      initializationVector=_b64(iv))
        return ",".join(f"{k}:{v}" for k, v in params.items())

    def decode(self, encoded: str) -> str:
        try:
            params = dict(item.split(":", 1) for item in encoded.split(",") if item)
            key = self._key(params["keyFactoryAlgorithm"], int(params["keyLength"]),
                            base64.b64decode(params["salt"]), int(params["iterations"]))
            encrypted, iv = base64.b64decode(params["encryptedPassword"]), base64.b64decode(params["initializationVector"])
            cipher = params["cipherAlgorithm"]
            if cipher == "AES/GCM/NoPadding":
                if int(params.get("authenticationTagLength", GCM_TAG_BITS)) != GCM_TAG_BITS:
                    raise PasswordEncoderError("only 128-bit GCM tags are supported")
                data = AESGCM(key).decrypt(iv, encrypted, None)
            elif cipher == "AES/CBC/PKCS5Padding":
                decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
                unpadder = padding.PKCS7(128).unpadder()
                data = unpadder.update(decryptor.update(encrypted) + decryptor.finalize()) + unpadder.finalize()
            else:
                raise PasswordEncoderError(f"unknown cipher algorithm {cipher}")
            password = data.decode("utf-8")
            expected = int(params["passwordLength"])
        except PasswordEncoderError:
            raise
        except Exception as exc:  # noqa: BLE001 - a wrong secret fails the padding/tag check, bad text anything
            raise PasswordEncoderError(f"Password could not be decoded ({type(exc).__name__})") from None
        if _java_length(password) != expected:
            raise PasswordEncoderError("Password could not be decoded, sanity check of length failed")
        return password


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
