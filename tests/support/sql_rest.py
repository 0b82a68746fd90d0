"""One request to a kafkalite-sql-server's REST API, as the tests make it (ksqlDB's content type;
an error status comes back with its JSON body rather than as an exception)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def ksql_call(url: str, body: Any = None, timeout: float = 60) -> tuple[int, Any]:
    """GET ``url`` (no body) or POST ``body`` as JSON; the status and the decoded answer."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/vnd.ksql.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())
