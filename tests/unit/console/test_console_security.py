"""The security page: ACLs created and deleted through the console on a broker with an
authorizer (the console's PLAINTEXT principal, User:ANONYMOUS, is a super user there), and the
page's note when there is no authorizer."""
from __future__ import annotations

from typing import Any

from kafkalite.console.settings import ConsoleSettings

from .conftest import Console, make_console

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
