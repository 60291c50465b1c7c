"""The group protocol the integration tests run under: `classic` (the default), or the streams
protocol (KIP-1071) with ``STREAMS_TEST_GROUP_PROTOCOL=streams`` (`make test-streams-protocol`).

The library never reads this variable. Under it, every test process (pytest's, through
tests/conftest.py, and the test apps of tests/integration/apps, through their `main`) makes each
`StreamsConfig` that does not name `group.protocol` name the protocol under test, explicitly, so
that worker processes (which get the config's explicit keys) run it too; and `python -m app`
processes get it through the app's own environment mechanism, ``STREAMS_GROUP_PROTOCOL``. A test
that sets `group.protocol` itself keeps its choice.

Tests of classic-only behaviour are skipped under streams with `classic_only(reason)`, the reason
tied to docs/streams-groups.md ("Differences from Kafka Streams").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pytest

from streams_core.config import StreamsConfig

__all__ = ["ENV_GROUP_PROTOCOL", "GROUP_PROTOCOL", "UNDER_STREAMS", "classic_only", "use_group_protocol_under_test"]

ENV_GROUP_PROTOCOL = "STREAMS_TEST_GROUP_PROTOCOL"
APP_ENV_GROUP_PROTOCOL = "STREAMS_GROUP_PROTOCOL"
"""The app's variable for `group.protocol` (app/settings.py: every property is STREAMS_<NAME>)."""


def _group_protocol() -> str:
    value = os.environ.get(ENV_GROUP_PROTOCOL, "").strip().lower() or "classic"
    if value not in ("classic", "streams"):
        raise ValueError(f"{ENV_GROUP_PROTOCOL}={value!r}: expected 'classic' or 'streams'")
    return value


GROUP_PROTOCOL = _group_protocol()
UNDER_STREAMS = GROUP_PROTOCOL == "streams"


def classic_only(reason: str) -> pytest.MarkDecorator:
    """Skip a test (or, as `pytestmark`, a module) under the streams protocol, saying why."""
    return pytest.mark.skipif(UNDER_STREAMS, reason=f"classic protocol only: {reason}")


def use_group_protocol_under_test() -> None:
    """Under ``STREAMS_TEST_GROUP_PROTOCOL=streams``, make every `StreamsConfig` of this process (and
    the app processes it starts) default to the streams protocol, explicitly; otherwise nothing."""
    if not UNDER_STREAMS or getattr(StreamsConfig.__init__, "group_protocol_under_test", False):
        return
    os.environ[APP_ENV_GROUP_PROTOCOL] = GROUP_PROTOCOL
    original = StreamsConfig.__init__

    def __init__(
        self: StreamsConfig,
        props: Mapping[str, Any] | None = None,
        *,
        required: tuple[str, ...] = ("application.id",),
    ) -> None:
        given = props.explicit() if isinstance(props, StreamsConfig) else dict(props or {})
        given.setdefault("group.protocol", GROUP_PROTOCOL)
        original(self, given, required=required)

    __init__.group_protocol_under_test = True  # type: ignore[attr-defined]
    StreamsConfig.__init__ = __init__  # type: ignore[method-assign]


STANDBYS_ARE_THE_GROUPS = (
    "the standby count is the streams group's, on the broker (group.streams.num.standby.replicas, 0 on the "
    "test broker): StreamsConfig's num.standby.replicas decides nothing (docs/streams-groups.md, "
    "'Differences from Kafka Streams')"
)
"""Why a test of standby replicas the client asks for is classic-only."""

ASSIGNMENT_IS_THE_BROKERS = (
    "the broker assigns the tasks: acceptable.recovery.lag, max.warmup.replicas and "
    "probing.rebalance.interval.ms decide nothing, no standby or warm-up replicas on the test broker, and "
    "without task offsets a warm-up never counts as caught up (docs/streams-groups.md, 'Differences from "
    "Kafka Streams')"
)
"""Why a test of our client-side high-availability assignor (KIP-441) is classic-only."""
