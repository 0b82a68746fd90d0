"""The JAAS configuration strings of Kafka's ``sasl.jaas.config`` properties.

One login module entry: ``<LoginModuleClass> <flag> [key=value ...];`` where values are quoted
strings (``\\`` escapes the next character) or bare tokens, as Java's ConfigFile parser (and
Kafka's JaasConfig) reads them. PlainLoginModule's options carry the client side
(``username``/``password``) and, on a broker, the users it accepts (``user_<name>="<password>"``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasError(ValueError):
    """A malformed ``sasl.jaas.config`` value; str() is one line for the user."""


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def username(self) -> str | None:
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        return self.options.get("password")

    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_<name>="<password>"`` options: name -> password."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}


_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.S)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            raise JaasError(f"sasl.jaas.config: unexpected text at {text[pos:pos + 20]!r}")
        if m.group(1) is not None:
            out.append(("str", re.sub(r"\\(.)", r"\1", m.group(1), flags=re.S)))
        elif m.group(2) is not None:
            out.append(("word", m.group(2)))
        elif m.group(3) is not None:
            out.append(("=", "="))
        else:
            out.append((";", ";"))
        pos = m.end()
    return out


def parse(text: str) -> JaasEntry:
    """Parse one login module entry (Kafka's ``sasl.jaas.config`` allows exactly one)."""
    toks = _tokens(text)
    if len(toks) < 3 or toks[0][0] != "word" or toks[1][0] != "word":
        raise JaasError("sasl.jaas.config must be '<LoginModule> <flag> key=\"value\" ... ;'")
    module, flag = toks[0][1], toks[1][1].lower()
    if flag not in FLAGS:
        raise JaasError(f"sasl.jaas.config: invalid control flag {toks[1][1]!r}")
    options: dict[str, str] = {}
    i = 2
    while i < len(toks) and toks[i][0] != ";":
        if i + 2 >= len(toks) or toks[i][0] != "word" or toks[i + 1][0] != "=" or toks[i + 2][0] not in ("str", "word"):
            raise JaasError("sasl.jaas.config: options must be key=\"value\" pairs")
        options[toks[i][1]] = toks[i + 2][1]
        i += 3
    if i >= len(toks):
        raise JaasError("sasl.jaas.config: the login module entry must end with ';'")
    if i + 1 != len(toks):
        raise JaasError("sasl.jaas.config must contain exactly one login module")
    return JaasEntry(module, flag, options)


#: The JVM option a Kafka broker's KAFKA_OPTS names its JAAS file with.
LOGIN_CONFIG_OPTION = "-Djava.security.auth.login.config="


def file_section(text: str, name: str) -> JaasEntry | None:
    """The login module entry of section ``name`` (``Client``, ``KafkaServer``) of a JAAS file,
    or None when the file has no such section. A section holds one entry here."""
    m = re.search(r"(?:^|[\s;}])" + re.escape(name) + r"\s*\{(.*?)\}\s*;", text, re.S)
    if m is None:
        return None
    return parse(m.group(1))


def zookeeper_login(kafka_opts: str | None) -> tuple[str, str] | None:
    """(username, password) of the ``Client`` section of the JAAS file that ``KAFKA_OPTS`` names
    with ``-Djava.security.auth.login.config=<file>``: how a Kafka broker (and Kafka's tools) log
    in to ZooKeeper. None when KAFKA_OPTS names no file or the file has no Client section."""
    path = next((opt[len(LOGIN_CONFIG_OPTION):] for opt in (kafka_opts or "").split()
                 if opt.startswith(LOGIN_CONFIG_OPTION)), None)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise JaasError(f"cannot read the JAAS file {path}: {exc.strerror or exc}") from None
    entry = file_section(text, "Client")
    if entry is None:
        return None
    if not entry.username or entry.password is None:
        raise JaasError(f"{path}: the Client section needs username and password")
    return entry.username, entry.password
