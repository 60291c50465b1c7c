"""Exception types of the library, named after Kafka Streams' `errors` package."""

from __future__ import annotations


class StreamsError(Exception):
    """Base of every error raised by streams_core."""


class ConfigError(StreamsError, ValueError):
    """A configuration key is unknown or its value is invalid; `key` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class TopologyError(StreamsError):
    """The topology is invalid (duplicate or unknown node names, bad store wiring, ...)."""


class SerializationError(StreamsError):
    """A value could not be serialized to bytes."""

    def __init__(self, message: str, *, topic: str | None = None) -> None:
        super().__init__(message if topic is None else f"{message} (topic={topic})")
        self.topic = topic


class DeserializationError(StreamsError):
    """Bytes could not be turned into a value; carries where the bytes came from when known."""

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        where = ", ".join(
            f"{name}={value}"
            for name, value in (("topic", topic), ("partition", partition), ("offset", offset))
            if value is not None
        )
        super().__init__(f"{message} ({where})" if where else message)
        self.reason = message
        self.topic = topic
        self.partition = partition
        self.offset = offset

    def at(self, topic: str, partition: int, offset: int) -> DeserializationError:
        """A copy of this error located at a record of a topic partition."""
        located = DeserializationError(self.reason, topic=topic, partition=partition, offset=offset)
        located.__cause__ = self.__cause__ or self
        return located


class ProcessorStateError(StreamsError):
    """A state store or the state directory is in a state that forbids the operation."""


class TaskCorruptedError(ProcessorStateError):
    """A task's local state is damaged (unreadable store file, checkpoint past the changelog):
    the task manager wipes the task directory and restores it from the changelogs (Java's
    TaskCorruptedException)."""


class InvalidStateStoreError(StreamsError):
    """The store exists but cannot be queried now (rebalancing, restoring, closed): retriable."""


class UnknownStateStoreError(InvalidStateStoreError):
    """No store of that name exists in the topology."""


class TaskMigratedError(StreamsError):
    """The task was moved to another instance while it was being processed."""


class StreamsNotStartedError(StreamsError):
    """The operation needs a started KafkaStreams instance."""


class MissingSinkTopicError(StreamsError):
    """Topics the topology writes to do not exist; `topics` names them."""

    def __init__(self, topics: list[str]) -> None:
        super().__init__(f"sink topics do not exist: {', '.join(topics)} (create them before starting)")
        self.topics = topics


class WorkerDiedError(StreamsError):
    """A stream thread's worker process ended without a clean stop (killed, or crashed).

    The uncaught-exception handler receives it; REPLACE_THREAD starts a new worker.
    """


class TaskDirectoryLockedError(ProcessorStateError):
    """A task's state directory is locked by another process: another instance sharing the state
    directory, or a stream thread of this instance (a worker) that has not given the task up yet."""
