"""ksql-python-ng (PyPI ``ksql-python-ng``, module ``ksql``), unmodified, as a user drives a
ksqlDB server with it: ``python ksql_python_ng_client.py URL TOPIC``.

Each call's result (or the client's error) is printed as one JSON line ``{"step": ..., ...}`` for
the test to check; the script itself asserts nothing, so that the test shows what the client saw.
"""
from __future__ import annotations

import json
import sys
from typing import Any


def main(url: str, topic: str) -> None:
    from ksql import KSQLAPI
    from ksql.errors import KSQLError

    def say(step: str, **fields: Any) -> None:
        print(json.dumps({"step": step, **fields}), flush=True)

    # asks /info for the server's version first; its HTTP/1.1 calls wait up to `timeout` seconds,
    # its HTTP/2 ones (inserts_stream, query with use_http2) httpx's default 5 s: each HTTP/2 call
    # comes after an HTTP/1.1 one that warms the same server path (the inserts producer, PRINT)
    client = KSQLAPI(url, timeout=60)
    say("version", version=client.get_ksql_version())
    say("create", answer=client.create_stream("orders", ["id VARCHAR KEY", "item VARCHAR", "qty INT"],
                                             topic, value_format="JSON"))
    say("show", answer=client.ksql("SHOW STREAMS;"))
    say("describe", answer=client.ksql("DESCRIBE orders;"))
    try:
        client.ksql("CREATE STREAM broken (id VARCHAR KEY WITH (KAFKA_TOPIC='x');")
    except KSQLError as exc:
        say("bad-sql", message=exc.msg, error_code=exc.error_code)
    say("insert-values", answer=client.ksql("INSERT INTO orders (id, item, qty) VALUES ('o1', 'tea', 2);"))
    say("inserts", answer=client.inserts_stream("orders", [{"ID": "o2", "ITEM": "jam", "QTY": 1}]))
    properties = client.get_properties()
    say("properties", names=sorted(p["name"] for p in properties))
    # PRINT over /query (HTTP/1.1, chunked) and over /query-stream (HTTP/2, prior knowledge)
    say("print-http1", chunks=list(client.query(f"PRINT '{topic}' FROM BEGINNING LIMIT 2;")))
    say("print-http2", chunks=list(client.query(f"PRINT '{topic}' FROM BEGINNING LIMIT 2;", use_http2=True)))
    say("close-unknown", answer=client.close_query("transient_ORDERS_1"))
    say("drop", answer=client.ksql("DROP STREAM orders;"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
