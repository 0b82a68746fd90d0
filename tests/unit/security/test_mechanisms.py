"""The pure security pieces: SCRAM against RFC 7677's worked example and Kafka's credential
format, PLAIN's checks, JAAS parsing, certificate principals, and the broker config's security
validation."""
from __future__ import annotations

import base64
import datetime
import hashlib

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.security import AuthenticationError, IllegalSaslState, jaas, principal, scram
from kafkalite.security.plain import PlainServer, encode_token

# RFC 7677 section 3
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential() -> scram.ScramCredential:
    return scram.make_credential("SCRAM-SHA-256", "pencil", 4096, base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))


def test_scram_sha_256_server_matches_rfc_7677() -> None:
    """The server side produces RFC 7677's server-first and server-final bytes for its client messages."""
    server = scram.ScramServer("SCRAM-SHA-256", server_nonce=SERVER_NONCE)
    assert server.client_first(CLIENT_FIRST) == "user"
    assert server.server_first(rfc_credential()) == SERVER_FIRST
    assert server.client_final(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete and server.authorization_id == "user"


def test_scram_sha_256_client_matches_rfc_7677() -> None:
    """The client side (inter-broker) produces RFC 7677's client messages and accepts its server-final."""
    client = scram.ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first_message() == CLIENT_FIRST
    assert client.final_message(SERVER_FIRST) == CLIENT_FINAL
    client.verify_server_final(SERVER_FINAL)
    with pytest.raises(AuthenticationError):
        client.verify_server_final(b"v=" + base64.b64encode(b"\0" * 32))


def test_kafka_credential_format_round_trips() -> None:
    """salt=...,stored_key=...,server_key=...,iterations=N, as ScramCredentialUtils writes it."""
    cred = scram.make_credential("SCRAM-SHA-512", "secret", 8192)
    text = cred.to_config()
    assert text.startswith("salt=") and text.endswith(",iterations=8192")
    assert [f.split("=", 1)[0] for f in text.split(",")] == ["salt", "stored_key", "server_key", "iterations"]
    assert scram.ScramCredential.from_config(text) == cred
    assert len(cred.stored_key) == 64
    with pytest.raises(scram.CredentialFormatError):
        scram.ScramCredential.from_config("salt=@@,iterations=x")
    with pytest.raises(ValueError):
        scram.make_credential("SCRAM-SHA-512", "secret", 1000)


def exchange(mechanism: str, cred: scram.ScramCredential, password: str) -> tuple[scram.ScramServer, bytes, bytes]:
    """(server after server-first, the server-first message, the client's correct client-final)."""
    server = scram.ScramServer(mechanism)
    client = scram.ScramClient(mechanism, "u", password, nonce="cnonce")
    server.client_first(client.first_message())
    first = server.server_first(cred)
    return server, first, client.final_message(first)


def proof_for(mechanism: str, password: str, salt: bytes, iterations: int, auth_message: bytes) -> bytes:
    name = scram.MECHANISMS[mechanism][0]
    salted = scram.salted_password(mechanism, password, salt, iterations)
    client_key = scram._hmac(name, salted, b"Client Key")
    stored = hashlib.new(name, client_key).digest()
    signature = scram._hmac(name, stored, auth_message)
    return base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature)))


@pytest.mark.parametrize("mechanism", sorted(scram.MECHANISMS))
def test_scram_wrong_password_and_tampering_fail(mechanism: str) -> None:
    """A wrong password, a changed channel binding or nonce, and messages out of order are refused."""
    cred = scram.make_credential(mechanism, "right")
    server, _, final = exchange(mechanism, cred, "wrong")
    with pytest.raises(AuthenticationError, match="Invalid user credentials"):
        server.client_final(final)
    server, _, final = exchange(mechanism, cred, "right")
    with pytest.raises(AuthenticationError, match="channel binding"):
        server.client_final(final.replace(b"c=biws", b"c=eSws"))
    server, _, final = exchange(mechanism, cred, "right")
    with pytest.raises(AuthenticationError, match="nonce"):
        server.client_final(final.replace(b",r=cnonce", b",r=cnoncX"))
    server, _, final = exchange(mechanism, cred, "right")
    assert server.client_final(final).startswith(b"v=") and server.complete
    with pytest.raises(IllegalSaslState):
        scram.ScramServer(mechanism).client_final(b"c=biws,r=x,p=AAAA")
    unknown = scram.ScramServer(mechanism)
    unknown.client_first(b"n,,n=u,r=abc")
    with pytest.raises(AuthenticationError):
        unknown.server_first(None)


def test_scram_accepts_old_librdkafka_doubled_client_nonce() -> None:
    """librdkafka < 2.6.1 sends r=<client nonce><server-first r> with a proof over that message;
    accepted as Kafka 3.8.1+ does (endsWith the server's nonce)."""
    mechanism = "SCRAM-SHA-512"
    cred = scram.make_credential(mechanism, "pw")
    server, first, _ = exchange(mechanism, cred, "pw")
    nonce = first.split(b",")[0][2:]
    without_proof = b"c=biws,r=cnonce" + nonce
    auth = b"n=u,r=cnonce," + first + b"," + without_proof
    final = without_proof + b",p=" + proof_for(mechanism, "pw", cred.salt, cred.iterations, auth)
    assert server.client_final(final).startswith(b"v=")


def test_scram_username_escaping() -> None:
    """=2C and =3D in SCRAM user names decode to ',' and '='; other '=' escapes are refused."""
    server = scram.ScramServer("SCRAM-SHA-256")
    assert server.client_first(b"n,,n=a=2Cb=3Dc,r=xyz") == "a,b=c"
    with pytest.raises(AuthenticationError):
        scram.ScramServer("SCRAM-SHA-256").client_first(b"n,,n=a=41,r=xyz")
    with pytest.raises(AuthenticationError):
        scram.ScramServer("SCRAM-SHA-256").client_first(b"p=tls-unique,,n=a,r=xyz")


def test_plain_checks_users_and_authzid() -> None:
    """PLAIN: the JAAS users' passwords, authzid empty or equal to the user, three tokens."""
    users = {"alice": "pw"}
    server = PlainServer(users)
    assert server.evaluate(encode_token("alice", "pw")) == b"" and server.authorization_id == "alice"
    for token in (encode_token("alice", "no"), encode_token("bob", "pw"), encode_token("alice", "pw", "bob"),
                  b"alice\x00pw", b"\x00\x00pw", b"\x00alice\x00", b"\xff\x00alice\x00pw"):
        with pytest.raises(AuthenticationError):
            PlainServer(users).evaluate(token)
    with pytest.raises(IllegalSaslState):
        server.evaluate(encode_token("alice", "pw"))


def test_jaas_parsing() -> None:
    """Kafka's sasl.jaas.config syntax: module, flag, quoted or bare options, one entry ending in ';'."""
    entry = jaas.parse('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                       'password="a\\"b c" user_admin="x" user_bob=y;')
    assert entry.login_module == jaas.PLAIN_LOGIN_MODULE and entry.flag == "required"
    assert entry.username == "admin" and entry.password == 'a"b c'
    assert entry.plain_users() == {"admin": "x", "bob": "y"}
    for bad in ("Module required username=\"x\"", "Module maybe;", "Module required username;",
                "M required a=\"1\"; N required b=\"2\";", ""):
        with pytest.raises(jaas.JaasError):
            jaas.parse(bad)


def test_certificate_principal_is_the_rfc2253_subject() -> None:
    """User:CN=alice,OU=eng,O=acme (most specific first, as X500Principal prints it); no certificate: ANONYMOUS."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "DE"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "acme"),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
                      x509.NameAttribute(NameOID.COMMON_NAME, "alice, jr")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    assert str(principal.from_certificate(cert)) == "User:CN=alice\\, jr,OU=eng,O=acme,C=DE"
    assert principal.from_certificate(None) == principal.ANONYMOUS


BASE = {"zookeeper.connect": "h:1"}
SASL = {"listeners": "SASL_SSL://:0", "ssl.keystore.location": "/k.pem", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "inter.broker.listener.name": "SASL_SSL", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="b" password="p";'}


def test_security_config_accepted_and_resolved_per_listener() -> None:
    """Listener-prefixed properties win over the broker-wide ones; per-mechanism JAAS entries resolve."""
    cfg = BrokerConfig.from_properties({**BASE, **SASL, "ssl.client.auth": "none",
                                        "listener.name.sasl_ssl.ssl.client.auth": "required"})
    lc = cfg.listener_config("SASL_SSL")
    assert lc.security_protocol == "SASL_SSL" and lc["ssl.client.auth"] == "required"
    assert cfg["ssl.client.auth"] == "none" and cfg.inter_broker_listener == "SASL_SSL"
    assert cfg.jaas_config("SASL_SSL", "SCRAM-SHA-512").username == "b"
    assert cfg.jaas_config("SASL_SSL", "PLAIN") is None


@pytest.mark.parametrize("change,message", [
    ({"ssl.keystore.location": None}, "needs ssl.keystore.location"),
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "not supported"),
    ({"sasl.mechanism.inter.broker.protocol": "PLAIN"}, "must be in"),
    ({"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": None}, "needs a sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN"}, "PLAIN needs"),
    ({"ssl.truststore.password": "x"}, "PEM trust stores"),
    ({"ssl.keystore.password": "x"}, "only ssl.key.password"),
    ({"ssl.keystore.type": "JKS"}, "must be one of"),
    ({"listener.name.sasl_ssl.bogus": "1"}, "Unknown configuration"),
    ({"inter.broker.listener.name": "OTHER"}, "must be a listener name"),
    ({"security.inter.broker.protocol": "SSL"}, "Only one of"),
    ({"listeners": "CLIENT://:0", "inter.broker.listener.name": "CLIENT"}, "not in listener.security.protocol.map"),
])
def test_security_config_mistakes_are_one_line_errors(change: dict, message: str) -> None:
    """Bad security settings stop start-up with a ConfigError naming the problem."""
    props = {**BASE, **SASL, **change}
    props = {k: v for k, v in props.items() if v is not None}
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties(props)


def test_security_package_is_pure() -> None:
    """kafkalite/security imports no Twisted, kazoo, network or broker code (net feeds it bytes)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[3] / "kafkalite" / "security"
    forbidden = ("twisted", "kazoo", "kafkalite.net", "kafkalite.broker", "kafkalite.coordination", "socket")
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert not name.startswith(forbidden), f"{path.name} imports {name}"
