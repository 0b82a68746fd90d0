"""Topic-name validation (Kafka's Topic.validate) and the '.'/'_' collision helper."""
from __future__ import annotations

import pytest

from zk_schema import (InvalidTopicNameError, collides_with, has_collision_chars,
                       is_valid_topic_name, unify_collision_chars, validate_topic_name)


@pytest.mark.parametrize("name", ["a", "A-b_c.9", "x" * 249, "__consumer_offsets", "..."])
def test_legal_names(name):
    """ASCII alphanumerics, '.', '_', '-' up to 249 chars are legal (even '...')."""
    validate_topic_name(name)
    assert is_valid_topic_name(name)


@pytest.mark.parametrize("name, reason", [
    ("", "empty"), (".", r"\."), ("..", r"\."), ("x" * 250, "249"),
    ("a b", "character"), ("a/b", "character"), ("é", "character"), ("a\n", "character"),
])
def test_illegal_names(name, reason):
    """Each illegal name raises InvalidTopicNameError naming the broken rule."""
    with pytest.raises(InvalidTopicNameError, match=reason):
        validate_topic_name(name)
    assert not is_valid_topic_name(name)


def test_collision_rule():
    """'a.b' and 'a_b' collide (same metric name); names without '.'/'_' never collide."""
    assert has_collision_chars("a.b") and not has_collision_chars("ab-c")
    assert unify_collision_chars("a.b_c") == "a_b_c"
    assert collides_with("a.b", ["a_b", "a.b", "ab", "a-b"]) == ["a_b"]
    assert collides_with("ab", ["ab", "a_b"]) == []
