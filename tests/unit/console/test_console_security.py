"""The security page: ACLs created and deleted through the console on a broker with an
authorizer (the console's PLAINTEXT principal, User:ANONYMOUS, is a super user there), and the
page's note when there is no authorizer."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkalite.cli import configs as configs_tool
from kafkalite.cli.common import ToolError
from kafkalite.client.admin import Admin, NewTopic
from kafkalite.client.errors import ClientError
from kafkalite.client.security import ClientSecurity
from kafkalite.console.main import build_parser, settings_from
from kafkalite.console.services.security import binding_from_form
from kafkalite.console.settings import ConsoleSettings
from tests.support.security import ADMIN_PASSWORD, ADMIN_USER, listener_port, make_pki, secure_overrides
from tests.support.waiting import wait_for

from .conftest import Console, csrf_of, make_console

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}
ACL = {"resource_type": "Topic", "name": "payments", "pattern_type": "Prefixed", "principal": "User:<alice>",
       "host": "*", "operation": "Read", "permission": "Allow"}


def test_acls_listed_created_and_deleted(cluster_factory: Any) -> None:
    cluster = cluster_factory(1, overrides=AUTHORIZER)
    for console in make_console(ConsoleSettings(cluster.bootstrap, lag_sample_interval_s=0)):
        assert 'id="no-authorizer"' not in console.get("/security").text
        r = console.post("/security/acls", ACL)
        assert r.status_code == 303
        page = console.get("/security").text
        table = page.split('id="acls"')[1].split("</table>")[0]
        assert "Topic:payments" in table and "Prefixed" in table and "User:&lt;alice&gt;" in table
        bad = console.post("/security/acls", {**ACL, "operation": "IdempotentWrite"})
        assert bad.status_code == 400 and "does not support operation IdempotentWrite" in bad.text
        assert console.post("/security/acls/delete", ACL).status_code == 303
        assert "Topic:payments" not in console.get("/security").text


def test_without_an_authorizer_the_page_says_so(console: Console) -> None:
    page = console.get("/security")
    assert page.status_code == 200 and 'id="no-authorizer"' in page.text and 'id="quotas"' in page.text
    assert "start the console with --zookeeper" in page.text
    refused = console.post("/security/users", {"user": "u", "mechanism": "SCRAM-SHA-256", "password": "p"})
    assert refused.status_code == 400 and "--zookeeper" in refused.text


def _authenticates(bootstrap: str, security: ClientSecurity) -> bool:
    try:
        with Admin(bootstrap, security=security, request_timeout_ms=5000) as admin:
            admin.list_topics()
        return True
    except ClientError:
        return False


def test_on_a_secured_cluster_the_console_uses_its_own_sasl_ssl_credentials(cluster_factory: Any,
                                                                             tmp_path: Path) -> None:
    """--command-config gives the console SCRAM-SHA-512 over TLS as the super user admin: it manages
    ACLs there; the same pages over PLAINTEXT (User:ANONYMOUS) are refused by the authorizer."""
    pki = make_pki(tmp_path / "pki")
    cluster = cluster_factory(1, {**secure_overrides(pki), **AUTHORIZER, "super.users": f"User:{ADMIN_USER}"})
    assert configs_tool.main(["--zookeeper", cluster.zk_connect, "--alter", "--entity-type", "users", "--entity-name",
                              ADMIN_USER, "--add-config", f"SCRAM-SHA-512=[password={ADMIN_PASSWORD}]"]) == 0
    props = tmp_path / "console.properties"
    props.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nssl.truststore.location={pki.ca}\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     f'username="{ADMIN_USER}" password="{ADMIN_PASSWORD}";\n')
    bootstrap = f"127.0.0.1:{listener_port(cluster.brokers[0], 'SASL_SSL')}"
    settings = settings_from(build_parser().parse_args(["--bootstrap-server", bootstrap, "--command-config", str(props),
                                                        "--zookeeper", cluster.zk_connect]))
    assert (settings.security.protocol, settings.security.username) == ("SASL_SSL", ADMIN_USER)
    for console in make_console(settings):
        assert console.post("/security/acls", ACL).status_code == 303
        assert "Topic:payments" in console.get("/security").text
        assert 'id="health">healthy<' in console.get("/").text
        # SCRAM users: a credential set from the page lets that user authenticate; deleted, it does not
        users = console.get("/security").text.split('id="scram-users"')[1].split("</table>")[0]
        assert f"<td>{ADMIN_USER}</td><td>SCRAM-SHA-512</td>" in users and "salt" not in users
        r = console.post("/security/users", {"user": "alice", "mechanism": "SCRAM-SHA-256", "password": "alice-pw",
                                             "iterations": "4096"})
        assert r.status_code == 303
        assert "<td>alice</td><td>SCRAM-SHA-256</td>" in console.get("/security").text
        alice = ClientSecurity("SASL_SSL", "SCRAM-SHA-256", "alice", "alice-pw", str(pki.ca))
        wait_for(lambda: _authenticates(bootstrap, alice), 20, "alice's new credential to be accepted")
        short = console.post("/security/users", {"user": "bob", "mechanism": "SCRAM-SHA-256", "password": "x",
                                                 "iterations": "10"})
        assert short.status_code == 400 and "iterations" in short.text.lower()
        assert console.post("/security/users/delete", {"user": "alice", "mechanism": "SCRAM-SHA-256"}).status_code == 303
        assert "<td>alice</td>" not in console.get("/security").text
        wait_for(lambda: not _authenticates(bootstrap, alice), 20, "alice's deleted credential to be refused")
    for anonymous in make_console(ConsoleSettings(cluster.bootstrap, lag_sample_interval_s=0)):
        refused = anonymous.get("/security")
        assert refused.status_code == 502 and "authoriz" in refused.text.lower()


def test_user_login_makes_the_clusters_acls_apply_to_each_person(cluster_factory: Any, tmp_path: Path) -> None:
    """--user-login: every page needs a login checked against the brokers; a person sees and does
    what the cluster's ACLs allow their own user (alice: Describe on one topic only), not what the
    console's admin could."""
    pki = make_pki(tmp_path / "pki")
    cluster = cluster_factory(1, {**secure_overrides(pki), **AUTHORIZER, "super.users": f"User:{ADMIN_USER}"})
    for user, password in ((ADMIN_USER, ADMIN_PASSWORD), ("alice", "alice-pw")):
        assert configs_tool.main(["--zookeeper", cluster.zk_connect, "--alter", "--entity-type", "users",
                                  "--entity-name", user, "--add-config", f"SCRAM-SHA-512=[password={password}]"]) == 0
    bootstrap = f"127.0.0.1:{listener_port(cluster.brokers[0], 'SASL_SSL')}"
    admin_security = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", ADMIN_USER, ADMIN_PASSWORD, str(pki.ca))
    with Admin(bootstrap, security=admin_security) as admin:
        assert all(e is None for e in admin.create_topics([NewTopic("visible", 1, 1), NewTopic("hidden", 1, 1)]).values())
        admin.create_acls([binding_from_form("Topic", "visible", "Literal", "User:alice", "*", "Describe", "Allow")])
    props = tmp_path / "console.properties"
    props.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nssl.truststore.location={pki.ca}\n"
                     f"sasl.username={ADMIN_USER}\nsasl.password={ADMIN_PASSWORD}\n")
    settings = settings_from(build_parser().parse_args(["--bootstrap-server", bootstrap, "--command-config", str(props),
                                                        "--user-login"]))
    for console in make_console(settings):
        first = console.get("/topics", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/login"
        assert console.post("/topics", {"name": "x"}).status_code == 401
        token = csrf_of(console.get("/login").text)
        wrong = console.http.post("/login", data={"csrf_token": token, "username": "alice", "password": "nope"})
        assert wrong.status_code == 401 and "login failed" in wrong.text
        ok = console.http.post("/login", data={"csrf_token": token, "username": "alice", "password": "alice-pw"},
                               follow_redirects=False)
        assert ok.status_code == 303
        topics = console.get("/topics").text
        assert 'id="user">alice<' in topics and ">visible<" in topics and ">hidden<" not in topics
        refused = console.post("/topics", {"name": "by-alice", "partitions": "1", "replication_factor": "1"})
        assert refused.status_code == 502 and "authoriz" in refused.text.lower()
        assert console.post("/logout").status_code == 303
        assert console.get("/topics", follow_redirects=False).status_code == 303
        console.http.post("/login", data={"csrf_token": token, "username": ADMIN_USER, "password": ADMIN_PASSWORD})
        assert ">hidden<" in console.get("/topics").text


def test_user_login_needs_a_sasl_protocol() -> None:
    with pytest.raises(ToolError, match="--user-login needs a SASL"):
        settings_from(build_parser().parse_args(["--bootstrap-server", "h:1", "--user-login"]))
