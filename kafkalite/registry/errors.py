"""Confluent Schema Registry's REST errors: HTTP status, ``error_code`` and message text.

Every failure a handler can meet is a :class:`RegistryError`; the REST layer turns it into
``{"error_code": ..., "message": ...}`` with the HTTP status. Codes and message formats are the
ones Confluent's registry sends (its ``Errors`` table), so clients that match on them work.
The incompatible-schema answer is HTTP 409 with error_code 409, as Confluent Platform 7.x sends
and confluent-kafka-python's integration suite checks.
"""
from __future__ import annotations


class RegistryError(Exception):
    """One REST error: ``status`` (HTTP) and Confluent's ``error_code``."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


# HTTP 404
def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: int | str) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    return RegistryError(404, 40403, "Schema not found" if schema_id is None else f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40406, f"Subject '{subject}' Version {version} was soft deleted."
                                     "Set permanent=true to delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not deleted "
                                     "first before being permanently deleted")


def subject_compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


def not_found(path: str) -> RegistryError:
    return RegistryError(404, 404, f"HTTP 404 Not Found: {path}")


def method_not_allowed(method: str) -> RegistryError:
    return RegistryError(405, 405, f"HTTP 405 Method Not Allowed: {method}")


def unsupported_media_type(content_type: str) -> RegistryError:
    return RegistryError(415, 415, f"HTTP 415 Unsupported Media Type: {content_type}")


def not_acceptable(accept: str) -> RegistryError:
    return RegistryError(406, 406, f"HTTP 406 Not Acceptable: {accept}")


def too_large(limit: int) -> RegistryError:
    return RegistryError(413, 413, f"Request body larger than {limit} bytes")


def unprocessable(message: str) -> RegistryError:
    """A body that is not JSON, or JSON of the wrong shape (Confluent answers 422 with code 422)."""
    return RegistryError(422, 422, message)


# HTTP 409
def incompatible(subject: str, details: list[str]) -> RegistryError:
    return RegistryError(409, 409, "Schema being registered is incompatible with an earlier schema for subject "
                                   f"\"{subject}\", details: [{', '.join(details)}]")


# HTTP 422
def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, message)


def invalid_version(version: str) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. "
                                     "Allowed values are between [1, 2^31-1] and the string \"latest\"")


def invalid_compatibility(level: object) -> RegistryError:
    return RegistryError(422, 42203, "Invalid compatibility level. Valid values are none, backward, forward, full, "
                                     "backward_transitive, forward_transitive, and full_transitive")


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD.")


def operation_not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def reference_exists(key: str) -> RegistryError:
    return RegistryError(422, 42206, f"One or more references exist to the schema {key}.")


def id_does_not_match(message: str) -> RegistryError:
    return RegistryError(422, 42207, message)


def invalid_subject(subject: str) -> RegistryError:
    return RegistryError(422, 42208, f"The specified subject '{subject}' is not a valid.")


def schema_too_large(message: str) -> RegistryError:
    return RegistryError(422, 42209, message)


# HTTP 500
def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, message)


def operation_timeout(message: str) -> RegistryError:
    return RegistryError(500, 50002, message)


def forwarding_failed(message: str) -> RegistryError:
    return RegistryError(500, 50003, message)


def unknown_leader(message: str = "Leader not known.") -> RegistryError:
    return RegistryError(500, 50004, message)
