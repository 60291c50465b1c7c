"""TopicNameExtractor and RecordContext: how a sink picks its topic per record (dynamic routing)."""

from __future__ import annotations

from typing import Any, Protocol

from streams_core.common.headers import Headers

__all__ = ["RecordContext", "TopicNameExtractor"]


class RecordContext(Protocol):
    """Metadata of the input record being processed; None where there is none (punctuations)."""

    @property
    def topic(self) -> str | None: ...

    @property
    def partition(self) -> int | None: ...

    @property
    def offset(self) -> int | None: ...

    @property
    def timestamp(self) -> int | None: ...

    @property
    def headers(self) -> Headers: ...


class TopicNameExtractor(Protocol):
    """A callable `(key, value, record_context) -> topic` given to `Topology.add_sink`."""

    def __call__(self, key: Any, value: Any, record_context: RecordContext, /) -> str: ...
