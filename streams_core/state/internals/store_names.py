"""Store names and their changelog topics: `<application.id>-<store name>-changelog`.

A store name becomes part of a topic name and of a file name, so it must be a legal topic name
(ASCII letters, digits, '.', '_', '-'; not '.' or '..') short enough for its changelog topic.
"""

from __future__ import annotations

import re

__all__ = ["MAX_TOPIC_LENGTH", "store_changelog_topic", "validate_store_name"]

MAX_TOPIC_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
_CHANGELOG_SUFFIX = "-changelog"


def validate_store_name(name: object) -> str:
    """Return `name` if it can name a store; raise ValueError saying what is wrong otherwise."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a store name must be a non-empty string, got {name!r}")
    if name in (".", "..") or not _LEGAL.fullmatch(name):
        raise ValueError(
            f"store name {name!r} is not legal: it names the changelog topic "
            f"'<application.id>-{name}{_CHANGELOG_SUFFIX}' and a file, so use only ASCII letters, "
            "digits, '.', '_' and '-' (and not '.' or '..')"
        )
    longest = MAX_TOPIC_LENGTH - len(_CHANGELOG_SUFFIX) - 2
    if len(name) > longest:
        raise ValueError(
            f"store name {name!r} is {len(name)} characters; at most {longest} fit in a changelog topic name"
        )
    return name


def store_changelog_topic(application_id: str, store_name: str) -> str:
    """The changelog topic of a store; ValueError if it would exceed the topic name limit."""
    topic = f"{application_id}-{store_name}{_CHANGELOG_SUFFIX}"
    if len(topic) > MAX_TOPIC_LENGTH:
        raise ValueError(
            f"changelog topic {topic!r} of store {store_name!r} is {len(topic)} characters, "
            f"over Kafka's limit of {MAX_TOPIC_LENGTH}: shorten application.id or the store name"
        )
    return topic
