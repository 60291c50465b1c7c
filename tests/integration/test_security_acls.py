"""Least privilege, checked from the other side: without any one of its ACLs the application stops.

Each case grants every ACL of `application_acls` but one; the client must reach ERROR within
`BOUND_S` with an error naming the principal, the operation and the resource (no retry loop, no
silent stall), and no password may show in the logs.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from app.wordcount import build_topology
from streams_core.broker import LocalKafkaBroker
from streams_core.clients import AuthorizationError
from streams_core.runtime.kafka_streams import State
from streams_core.tools.acls import application_acls
from tests.integration.security_kit import LINES, PASSWORDS, grant, make_topics, produce_lines
from tests.integration.streams_testkit import StreamsApp, wait_until
from tests.kafka_utils import unique_topic

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

BOUND_S = 30.0


_EOS_ACLS = application_acls("APP", "User:alice", input_topics=["IN"], output_topics=["OUT"], exactly_once=True)


@pytest.mark.parametrize("missing", range(len(_EOS_ACLS)), ids=[f"{a.operation}-{a.resource_type}-{a.name}" for a in _EOS_ACLS])
async def test_missing_acl_is_an_error_naming_it(
    secure_broker: LocalKafkaBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture, missing: int
) -> None:
    caplog.set_level(logging.INFO)
    app_id, source, sink = unique_topic("aclapp"), unique_topic("lines"), unique_topic("counts")
    await make_topics(secure_broker, [source, sink])
    acls = application_acls(app_id, "User:alice", input_topics=[source], output_topics=[sink], exactly_once=True)
    dropped = acls.pop(missing)
    await grant(secure_broker, acls)
    await produce_lines(secure_broker, source, LINES)
    client = secure_broker.client_config("SASL_SSL", user="alice") | {"processing.guarantee": "exactly_once_v2"}
    topology = lambda: build_topology(source, sink, windowed=False)  # noqa: E731
    async with StreamsApp(client["bootstrap.servers"], tmp_path, topology, application_id=app_id, config=client) as app:
        streams = app.create(0)
        began = time.monotonic()
        start_error: BaseException | None = None
        try:  # a missing topic ACL fails start() itself (Kafka Streams' threads would die at once)
            await streams.start()
        except Exception as exc:
            start_error = exc

        await wait_until(
            lambda: streams.state is State.ERROR, BOUND_S, message=lambda: f"state {streams.state.name}, dropped {dropped}"
        )
        assert time.monotonic() - began < BOUND_S
        errors = [*streams.errors, *([start_error] if start_error else [])]
        text = " | ".join(str(e) for e in errors)
        assert errors and all(isinstance(e, AuthorizationError) for e in errors), text
        assert "User:alice" in text, text
        assert dropped.operation in text and dropped.name in text and dropped.resource_type in text, text
    for password in PASSWORDS.values():
        assert password not in caplog.text


async def test_missing_acl_in_worker_processes(secure_broker: LocalKafkaBroker, tmp_path: Path) -> None:
    """Stream threads as worker processes: the worker's authorization error reaches the instance, explained."""
    app_id, source, sink = unique_topic("aclwork"), unique_topic("lines"), unique_topic("counts")
    await make_topics(secure_broker, [source, sink])
    acls = application_acls(app_id, "User:alice", input_topics=[source], output_topics=[sink])
    await grant(secure_broker, [a for a in acls if a.resource_type != "GROUP"])
    client = secure_broker.client_config("SASL_SSL", user="alice")
    topology = lambda: build_topology(source, sink, windowed=False)  # noqa: E731
    workers = {"num.stream.threads": 2, "stream.threads.mode": "process"}
    async with StreamsApp(client["bootstrap.servers"], tmp_path, topology, application_id=app_id, config=client) as app:
        streams = await app.start(0, **workers)
        await wait_until(lambda: streams.state is State.ERROR, BOUND_S, message=lambda: streams.state.name)
        text = " | ".join(str(e) for e in streams.errors)
        assert f"User:alice is not authorized to READ GROUP '{app_id}'" in text, text
