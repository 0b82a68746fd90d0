"""Topic-name rules of Kafka's ``Topic.validate`` and its '.'/'_' collision rule.

Metric names replace '.' with '_', so Kafka refuses a topic whose name differs from an
existing one only in those characters (``a.b`` vs ``a_b``); the broker applies that with
:func:`collides_with` against the existing topics before writing anything.
"""
from __future__ import annotations

import re
from typing import Iterable

from zk_schema.errors import InvalidTopicNameError

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Raise :class:`InvalidTopicNameError` with Kafka's reason if ``name`` is illegal."""
    if not isinstance(name, str) or name == "":
        raise InvalidTopicNameError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicNameError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicNameError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters,"
            f" topic name: {name}")
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicNameError(
            f"Topic name \"{name}\" is illegal, it contains a character other than"
            " ASCII alphanumerics, '.', '_' and '-'")


def is_valid_topic_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except InvalidTopicNameError:
        return False
    return True


def has_collision_chars(name: str) -> bool:
    """True if the name contains '.' or '_' (the characters metrics conflate)."""
    return "." in name or "_" in name


def unify_collision_chars(name: str) -> str:
    """The metric-name form: every '.' replaced by '_'."""
    return name.replace(".", "_")


def collides_with(name: str, existing: Iterable[str]) -> list[str]:
    """Existing topics (other than ``name`` itself) that collide with ``name``."""
    if not has_collision_chars(name):
        return []
    unified = unify_collision_chars(name)
    return sorted(t for t in existing if t != name and unify_collision_chars(t) == unified)
