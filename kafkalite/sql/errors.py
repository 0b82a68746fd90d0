"""ksqlDB's error bodies: ``{"@type": "statement_error", "error_code": 40001, "message": ...,
"statementText": ..., "entities": []}`` for a statement that cannot run, ``generic_error`` for
the rest (``KsqlErrorMessage`` / ``KsqlStatementErrorMessage`` in ksqldb-rest-model).

Error codes are ksqlDB's ``Errors``: HTTP status * 100 + a detail digit."""
from __future__ import annotations

from typing import Any

BAD_STATEMENT = 40001
QUERY_ENDPOINT = 40002       # a push query sent to /ksql
BAD_REQUEST = 40000
HTTP2_ONLY = 40004           # /inserts-stream over HTTP/1.1
NOT_FOUND = 40400
SERVER_ERROR = 50000


class KsqlError(Exception):
    """A statement ksqlDB would refuse; carries its error code and, for parse errors, the position."""

    def __init__(self, message: str, *, statement: str = "", code: int = BAD_STATEMENT,
                 line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.statement = statement
        self.code = code
        self.line = line
        self.column = column
        self.entities: list[dict[str, Any]] = []          # what the request's earlier statements answered

    def body(self) -> dict[str, Any]:
        """The REST error entity (``statement_error`` when a statement is at fault)."""
        if self.statement:
            return {"@type": "statement_error", "error_code": self.code, "message": self.message,
                    "statementText": self.statement, "entities": self.entities}
        return {"@type": "generic_error", "error_code": self.code, "message": self.message}

    @property
    def http_status(self) -> int:
        return self.code // 100
