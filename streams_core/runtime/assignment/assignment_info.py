"""AssignmentInfo: the user data the leader returns to each member with its partitions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streams_core.common.host_info import HostInfo
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.assignment import _codec
from streams_core.runtime.assignment.errors import ERROR_TYPES, AssignmentError, AssignorError

__all__ = ["LATEST_SUPPORTED_VERSION", "AssignmentInfo"]

LATEST_SUPPORTED_VERSION = 1
_KIND = "assignment info"

TaskPartitions = Mapping[TaskId, frozenset[TopicPartition]]
HostPartitions = Mapping[HostInfo, frozenset[TopicPartition]]


@dataclass(slots=True, frozen=True)
class AssignmentInfo:
    """One member's tasks and the application-wide host map (KIP-67 discovery).

    - active_tasks: task -> its source partitions (the partitions this member consumes).
    - standby_tasks: task -> its source partitions (its changelog partition is the task's
      partition of each store's changelog topic).
    - partitions_by_host / standby_partitions_by_host: every instance with an
      `application.server`, with the source partitions of its active / standby tasks.
    - error_code / error_message: set when the leader could not assign; every member receives
      the same, and `raise_if_error()` turns it into the matching exception.
    - next_scheduled_rebalance_ms: wall-clock time (the leader's clock, ms) at which this member
      must trigger a probing rebalance so that caught-up warm-ups take over (KIP-441); 0 for
      none. The leader sets it for one member of its own process only.
    """

    active_tasks: TaskPartitions = field(default_factory=dict, hash=False)
    standby_tasks: TaskPartitions = field(default_factory=dict, hash=False)
    partitions_by_host: HostPartitions = field(default_factory=dict, hash=False)
    standby_partitions_by_host: HostPartitions = field(default_factory=dict, hash=False)
    error_code: AssignorError = AssignorError.NONE
    error_message: str = ""
    next_scheduled_rebalance_ms: int = 0
    version: int = LATEST_SUPPORTED_VERSION
    latest_supported_version: int = LATEST_SUPPORTED_VERSION

    def __post_init__(self) -> None:
        if not 1 <= self.version <= LATEST_SUPPORTED_VERSION:
            raise ValueError(f"cannot write assignment info version {self.version}")

    @classmethod
    def from_error(cls, error: AssignmentError) -> AssignmentInfo:
        """An assignment that carries only the leader's error, for every member."""
        return cls(error_code=error.code, error_message=str(error))

    def partitions(self) -> frozenset[TopicPartition]:
        """The partitions this member consumes: the source partitions of its active tasks."""
        return frozenset().union(*self.active_tasks.values())

    def raise_if_error(self) -> None:
        """Raise the leader's error (CopartitioningError, MissingSourceTopicError, ...) if any."""
        if self.error_code == AssignorError.NONE:
            return
        error_type = ERROR_TYPES.get(self.error_code, AssignmentError)
        raise error_type(f"group assignment failed ({self.error_code.name}): {self.error_message}")

    def encode(self) -> bytes:
        return _codec.encode_envelope(
            self.version,
            self.latest_supported_version,
            {
                "active_tasks": _encode_task_partitions(self.active_tasks),
                "standby_tasks": _encode_task_partitions(self.standby_tasks),
                "partitions_by_host": _encode_host_partitions(self.partitions_by_host),
                "standby_partitions_by_host": _encode_host_partitions(self.standby_partitions_by_host),
                "error_code": int(self.error_code),
                "error_message": self.error_message,
                "next_scheduled_rebalance_ms": self.next_scheduled_rebalance_ms,
            },
        )

    @classmethod
    def decode(cls, data: bytes) -> AssignmentInfo:
        """Read encoded data; UnsupportedVersionError (with both versions) for a future version."""
        version, latest, body = _codec.decode_envelope(data, _KIND, LATEST_SUPPORTED_VERSION)
        try:
            code = int(body.get("error_code", 0))
            return cls(
                active_tasks=_decode_task_partitions(body.get("active_tasks", {})),
                standby_tasks=_decode_task_partitions(body.get("standby_tasks", {})),
                partitions_by_host=_decode_host_partitions(body.get("partitions_by_host", {})),
                standby_partitions_by_host=_decode_host_partitions(body.get("standby_partitions_by_host", {})),
                error_code=_error_code(code),
                error_message=str(body.get("error_message", "")),
                next_scheduled_rebalance_ms=int(body.get("next_scheduled_rebalance_ms", 0)),
                version=version,
                latest_supported_version=latest,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise AssignmentError(f"{_KIND} version {version}: invalid content: {exc!r}") from exc


def _encode_task_partitions(tasks: TaskPartitions) -> dict[str, dict[str, list[int]]]:
    return {str(task): _codec.encode_partitions(tasks[task]) for task in sorted(tasks)}


def _decode_task_partitions(body: Mapping[str, Mapping[str, list[int]]]) -> dict[TaskId, frozenset[TopicPartition]]:
    return {TaskId.parse(task): _codec.decode_partitions(parts) for task, parts in body.items()}


def _encode_host_partitions(hosts: HostPartitions) -> dict[str, dict[str, list[int]]]:
    return {str(host): _codec.encode_partitions(hosts[host]) for host in sorted(hosts)}


def _decode_host_partitions(body: Mapping[str, Mapping[str, list[int]]]) -> dict[HostInfo, frozenset[TopicPartition]]:
    return {HostInfo.parse(host): _codec.decode_partitions(parts) for host, parts in body.items()}


def _error_code(code: int) -> AssignorError:
    """The code, or ASSIGNMENT_ERROR for a code from a newer leader."""
    try:
        return AssignorError(code)
    except ValueError:
        return AssignorError.ASSIGNMENT_ERROR
