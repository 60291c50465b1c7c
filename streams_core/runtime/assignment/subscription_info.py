"""SubscriptionInfo: the user data each member sends in its JoinGroup (KIP-28, KIP-67)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streams_core.common.host_info import HostInfo
from streams_core.common.task_id import TaskId
from streams_core.runtime.assignment import _codec
from streams_core.runtime.assignment.errors import AssignmentError

__all__ = ["LATEST_SUPPORTED_VERSION", "SubscriptionInfo"]

LATEST_SUPPORTED_VERSION = 1
_KIND = "subscription info"


@dataclass(slots=True, frozen=True)
class SubscriptionInfo:
    """What a member (one stream thread's consumer) tells the leader.

    - process_id: the instance (a UUID string); members with one process_id form one client.
    - user_endpoint: its `application.server` ("host:port"), or "" when not set.
    - prev_active_tasks / standby_tasks: the tasks this member ran as active before, and the
      tasks it ran as standby or whose state directory the instance has on disk.
    - task_offset_sums: per task with local state, the sum of its checkpointed changelog offsets
      (higher means more caught up); optional.
    """

    process_id: str
    user_endpoint: str = ""
    prev_active_tasks: frozenset[TaskId] = frozenset()
    standby_tasks: frozenset[TaskId] = frozenset()
    task_offset_sums: Mapping[TaskId, int] = field(default_factory=dict, hash=False)
    shutdown_requested: bool = False
    """The member asks every member of the group to shut down (SHUTDOWN_APPLICATION)."""
    version: int = LATEST_SUPPORTED_VERSION
    latest_supported_version: int = LATEST_SUPPORTED_VERSION

    def __post_init__(self) -> None:
        if not self.process_id:
            raise ValueError("process_id must not be empty")
        if self.user_endpoint:
            HostInfo.parse(self.user_endpoint)
        if not 1 <= self.version <= LATEST_SUPPORTED_VERSION:
            raise ValueError(f"cannot write subscription info version {self.version}")

    @property
    def application_server(self) -> str:
        """Alias of user_endpoint under its configuration name."""
        return self.user_endpoint

    @property
    def host_info(self) -> HostInfo | None:
        return HostInfo.parse(self.user_endpoint) if self.user_endpoint else None

    def encode(self) -> bytes:
        return _codec.encode_envelope(
            self.version,
            self.latest_supported_version,
            {
                "process_id": self.process_id,
                "user_endpoint": self.user_endpoint,
                "prev_active_tasks": _codec.encode_tasks(self.prev_active_tasks),
                "standby_tasks": _codec.encode_tasks(self.standby_tasks),
                "task_offset_sums": {str(t): s for t, s in sorted(self.task_offset_sums.items())},
                "shutdown_requested": self.shutdown_requested,
            },
        )

    @classmethod
    def decode(cls, data: bytes) -> SubscriptionInfo:
        """Read encoded data; UnsupportedVersionError (with both versions) for a future version."""
        version, latest, body = _codec.decode_envelope(data, _KIND, LATEST_SUPPORTED_VERSION)
        try:
            return cls(
                process_id=str(body["process_id"]),
                user_endpoint=str(body.get("user_endpoint", "")),
                prev_active_tasks=_codec.decode_tasks(body.get("prev_active_tasks", ())),
                standby_tasks=_codec.decode_tasks(body.get("standby_tasks", ())),
                task_offset_sums={
                    TaskId.parse(t): int(s) for t, s in body.get("task_offset_sums", {}).items()
                },
                shutdown_requested=bool(body.get("shutdown_requested", False)),
                version=version,
                latest_supported_version=latest,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise AssignmentError(f"{_KIND} version {version}: invalid content: {exc!r}") from exc
