"""A streams group member refused for a missing READ ACL on the group: the refusal is final (not retried),
explained with the principal and the ACL as under the classic protocol, and survives a worker process's pickle."""

from __future__ import annotations

import pickle
from typing import Any

from aiokafka.errors import GroupAuthorizationFailedError

from streams_core import StreamsConfig
from streams_core.clients.authorization import AuthorizationError, explain
from streams_core.clients.streams_group_channel import StreamsGroupChannel
from streams_core.clients.streams_group_membership import StreamsGroupError
from streams_core.clients.streams_group_protocol import HeartbeatRequestData


class RefusingAdmin:
    """An admin client whose FindCoordinator is refused, as the broker refuses it without READ on the group."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def find_coordinator(self, group_id: str) -> int:
        raise GroupAuthorizationFailedError(f"Unable to get coordinator id for {group_id}")

    async def _send_request(self, request: Any, node: int) -> Any:
        self.sent.append(request)
        raise AssertionError("nothing is sent without a coordinator")


async def test_a_refused_find_coordinator_is_a_group_authorization_answer() -> None:
    admin = RefusingAdmin()
    channel = StreamsGroupChannel(admin, "orders")  # type: ignore[arg-type]
    answer = await channel.heartbeat(HeartbeatRequestData("orders", "m-1", 0, endpoint_information_epoch=3))
    assert answer.error_code == 30 and "Unable to get coordinator id for orders" in (answer.error_message or "")
    assert (answer.member_id, answer.member_epoch, answer.tasks, answer.endpoints) == ("m-1", 0, None, None)
    assert admin.sent == []


def test_the_refusal_is_explained_as_the_missing_group_acl() -> None:
    config = StreamsConfig({
        "application.id": "orders", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.plain.username": "alice", "sasl.plain.password": "secret",
    })
    error = RuntimeError("the stream thread died")
    error.__cause__ = StreamsGroupError("orders", 30, "FindCoordinator: refused")
    explained = explain(error, config)
    assert isinstance(explained, AuthorizationError) and explained.__cause__ is error
    assert "User:alice is not authorized to READ GROUP 'orders'" in str(explained), str(explained)
    other = StreamsGroupError("orders", 130, "invalid topology")
    assert explain(other, config) is other, "only GROUP_AUTHORIZATION_FAILED is an ACL"


def test_a_streams_group_error_pickles_with_its_code() -> None:
    error = pickle.loads(pickle.dumps(StreamsGroupError("orders", 30, "refused")))
    assert (error.group_id, error.code, error.message, str(error)) == (
        "orders", 30, "refused", "streams group 'orders': GROUP_AUTHORIZATION_FAILED: refused",
    )
