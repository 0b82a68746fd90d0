"""PEM key and trust stores as the listeners read them (kafkalite.net.tls): an encrypted key with
ssl.key.password, inline PEM, and the one-line errors for a wrong password, a missing trust store
and a key store without a key."""
from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.net import tls
from tests.support.security import BROKER_PASSWORD, make_pki


def listener(props: dict[str, str]) -> object:
    cfg = BrokerConfig.from_properties({"zookeeper.connect": "h:1", "listeners": "SSL://:0", **props})
    return cfg.listener_config("SSL")


def test_pem_stores_load_from_files_and_inline(tmp_path: Path) -> None:
    """Key + chain in one file (encrypted key), and the same as inline chain/key/certificates."""
    pki = make_pki(tmp_path)
    lc = listener({"ssl.keystore.location": str(pki.broker), "ssl.key.password": BROKER_PASSWORD,
                   "ssl.truststore.location": str(pki.ca), "ssl.client.auth": "required",
                   "ssl.enabled.protocols": "TLSv1.2"})
    material = tls.key_material(lc)
    assert len(material.chain) == 2 and len(material.trusted) == 1 and material.max_version == "TLSv1.2"
    assert tls.server_options(material).getContext() is not None
    inline = listener({"ssl.keystore.certificate.chain": pki.client_cert.read_text(),
                       "ssl.keystore.key": pki.client_key.read_text(),
                       "ssl.truststore.certificates": pki.ca.read_text()})
    material = tls.key_material(inline)
    assert material.chain[0].subject.rfc4514_string() == pki.client_dn()
    assert tls.client_options(material, "127.0.0.1", verify_hostname=True) is not None


def test_store_mistakes_are_one_line_errors(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    with pytest.raises(ConfigError, match="wrong ssl.key.password"):
        tls.key_material(listener({"ssl.keystore.location": str(pki.broker), "ssl.key.password": "nope"}))
    with pytest.raises(ConfigError, match="cannot read"):
        tls.key_material(listener({"ssl.keystore.location": str(tmp_path / "missing.pem")}))
    with pytest.raises(ConfigError, match="no PEM private key"):
        tls.key_material(listener({"ssl.keystore.location": str(pki.ca)}))
    material = tls.key_material(listener({"ssl.keystore.location": str(pki.client_keystore),
                                          "ssl.client.auth": "required"}))
    with pytest.raises(ConfigError, match="needs a trust store"):
        tls.server_options(material)
