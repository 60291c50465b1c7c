"""Errors of the group assignment; each maps to an `AssignorError` code carried to every member.

Each takes its message first, so a member can rebuild the leader's error from AssignmentInfo;
the `for_...` constructors build the message and keep the details as attributes.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

from streams_core.errors import StreamsError, TopologyError

__all__ = [
    "AssignmentError",
    "AssignorError",
    "CopartitioningError",
    "MissingSourceTopicError",
    "ShutdownRequestedError",
    "UnsupportedVersionError",
]


class AssignorError(enum.IntEnum):
    """Error code in AssignmentInfo, so that every member fails with the leader's error."""

    NONE = 0
    INCOMPLETE_SOURCE_TOPIC_METADATA = 1
    VERSION_PROBING = 2
    ASSIGNMENT_ERROR = 3
    SHUTDOWN_REQUESTED = 4
    COPARTITIONING_MISMATCH = 5


class AssignmentError(StreamsError):
    """The group assignment could not be computed, encoded or decoded."""

    code = AssignorError.ASSIGNMENT_ERROR


class UnsupportedVersionError(AssignmentError):
    """Subscription or assignment data of a version this member cannot read."""

    code = AssignorError.VERSION_PROBING

    def __init__(self, message: str, version: int = -1, latest_supported_version: int = -1) -> None:
        super().__init__(message)
        self.version = version
        self.latest_supported_version = latest_supported_version

    @classmethod
    def for_versions(
        cls, kind: str, version: int, latest_supported_version: int, our_latest: int
    ) -> UnsupportedVersionError:
        return cls(
            f"{kind} version {version} (sender supports up to {latest_supported_version}) is newer "
            f"than the latest this member supports ({our_latest}); run every member on one version",
            version,
            latest_supported_version,
        )


class MissingSourceTopicError(AssignmentError):
    """Source topics absent from the cluster metadata (not created yet, or misspelt)."""

    code = AssignorError.INCOMPLETE_SOURCE_TOPIC_METADATA

    def __init__(self, message: str, topics: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.topics = sorted(topics)

    @classmethod
    def for_topics(cls, topics: Iterable[str]) -> MissingSourceTopicError:
        names = sorted(set(topics))
        return cls(f"source topics missing from the cluster metadata: {', '.join(names)}", names)


class CopartitioningError(TopologyError, AssignmentError):
    """Topics that must be co-partitioned (joined) have different partition counts."""

    code = AssignorError.COPARTITIONING_MISMATCH

    def __init__(self, message: str, counts: Mapping[str, int] | None = None) -> None:
        super().__init__(message)
        self.counts = dict(sorted((counts or {}).items()))

    @classmethod
    def for_counts(cls, counts: Mapping[str, int]) -> CopartitioningError:
        listing = ", ".join(f"{topic}={count}" for topic, count in sorted(counts.items()))
        return cls(f"co-partitioned topics have different partition counts: {listing}", counts)


class ShutdownRequestedError(AssignmentError):
    """A member asked the whole application to shut down (StreamThreadExceptionResponse.SHUTDOWN_APPLICATION)."""

    code = AssignorError.SHUTDOWN_REQUESTED


ERROR_TYPES: dict[AssignorError, type[AssignmentError]] = {
    AssignorError.SHUTDOWN_REQUESTED: ShutdownRequestedError,
    AssignorError.INCOMPLETE_SOURCE_TOPIC_METADATA: MissingSourceTopicError,
    AssignorError.VERSION_PROBING: UnsupportedVersionError,
    AssignorError.COPARTITIONING_MISMATCH: CopartitioningError,
}
