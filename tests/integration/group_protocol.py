"""The group protocol the integration tests run under: `classic` (the default), or the streams
protocol (KIP-1071) with ``STREAMS_TEST_GROUP_PROTOCOL=streams`` (`make test-streams-protocol`).

The library never reads this variable. Under it, every test process (pytest's, through
tests/conftest.py, and the test apps of tests/integration/apps, through their `main`) makes each
`StreamsConfig` that does not name `group.protocol` name the protocol under test, explicitly, so
that worker processes (which get the config's explicit keys) run it too; and `python -m app`
processes get it through the app's own environment mechanism, ``STREAMS_GROUP_PROTOCOL``. A test
that sets `group.protocol` itself keeps its choice.

Tests of classic-only behaviour are skipped under streams with `classic_only(reason)`, the reason
tied to docs/streams-groups.md ("Differences from Kafka Streams"). Under streams the standby count is
the group's on the broker: `standby_replicas_of_the_group` sets it from the test's
`num.standby.replicas` before the application's instances start (IncrementalAlterConfigs on the
group, as `kafka-configs.sh --entity-type groups --alter --add-config streams.num.standby.replicas=N`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import Array, Boolean, Int8, Int16, Int32, Schema, String

from streams_core.config import StreamsConfig

__all__ = [
    "ENV_GROUP_PROTOCOL",
    "GROUP_PROTOCOL",
    "GROUP_STANDBY_REPLICAS",
    "UNDER_STREAMS",
    "classic_only",
    "set_group_configs",
    "standby_replicas_of_the_group",
    "use_group_protocol_under_test",
]

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


ASSIGNMENT_IS_THE_BROKERS = (
    "the broker assigns the tasks: acceptable.recovery.lag, max.warmup.replicas and "
    "probing.rebalance.interval.ms decide nothing, no standby or warm-up replicas on the test broker, and "
    "without task offsets a warm-up never counts as caught up (docs/streams-groups.md, 'Differences from "
    "Kafka Streams')"
)
"""Why a test of our client-side high-availability assignor (KIP-441) is classic-only."""


GROUP_STANDBY_REPLICAS = "streams.num.standby.replicas"
"""The group config of a streams group's standby count (apache/kafka's `GroupConfig`, 4.3.1); the broker's
default for every group is `group.streams.num.standby.replicas`."""

_RESOURCE_GROUP = 32
"""`ConfigResource.Type.GROUP` (aiokafka's ConfigResourceType has no such member)."""
_OP_SET = 0
"""IncrementalAlterConfigs' `AlterConfigOp.OpType.SET`."""


class _IncrementalAlterConfigsResponse_v0(Response):  # type: ignore[misc]  # aiokafka's types are Any to mypy
    API_KEY = 44
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("responses", Array(("error_code", Int16), ("error_message", String("utf-8")), ("resource_type", Int8),
                            ("resource_name", String("utf-8")))),
    )  # fmt: skip


class _IncrementalAlterConfigsRequest_v0(RequestStruct):  # type: ignore[misc]
    """IncrementalAlterConfigs v0 (API 44), which aiokafka lacks: the fields of Kafka's message JSON."""

    API_KEY = 44
    API_VERSION = 0
    RESPONSE_TYPE = _IncrementalAlterConfigsResponse_v0
    SCHEMA = Schema(
        ("resources", Array(("resource_type", Int8), ("resource_name", String("utf-8")),
                            ("configs", Array(("name", String("utf-8")), ("config_operation", Int8),
                                              ("value", String("utf-8")))))),
        ("validate_only", Boolean),
    )  # fmt: skip


class _IncrementalAlterConfigsRequest(Request[_IncrementalAlterConfigsRequest_v0]):  # type: ignore[misc]
    API_KEY = 44

    def __init__(self, resources: list[Any]) -> None:
        self.resources = resources

    def build(self, request_struct_class: type[_IncrementalAlterConfigsRequest_v0]) -> _IncrementalAlterConfigsRequest_v0:
        return request_struct_class(self.resources, False)


async def set_group_configs(bootstrap: str, group_id: str, configs: Mapping[str, object]) -> None:
    """Set dynamic configs of a group on the broker (it need not exist yet); raises with the broker's error."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="test-group-configs")
    await admin.start()
    try:
        entries = [(name, _OP_SET, str(value)) for name, value in configs.items()]
        request = _IncrementalAlterConfigsRequest([(_RESOURCE_GROUP, group_id, entries)])
        response = await admin._send_request(request)  # no public send; any broker forwards it
    finally:
        await admin.close()
    for error_code, error_message, _, name in response.responses:
        if error_code:
            raise RuntimeError(f"IncrementalAlterConfigs of group {name!r} {dict(configs)}: error {error_code}, {error_message}")


async def standby_replicas_of_the_group(bootstrap: str, application_id: str, count: int) -> None:
    """Under the streams protocol, give the application's streams group `count` standby replicas (the
    test's `num.standby.replicas`, which the client no longer decides); under classic, nothing."""
    if UNDER_STREAMS:
        await set_group_configs(bootstrap, application_id, {GROUP_STANDBY_REPLICAS: count})
