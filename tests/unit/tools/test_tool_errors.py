"""The command-line tools answer an error Kafka returns with one line and exit status 1, not a traceback."""

from __future__ import annotations

from typing import Any

import pytest

from streams_core.clients import KafkaError
from streams_core.tools import application_reset, topics


class NotAuthorized(KafkaError):
    """What a broker answers a client it does not allow (a non-retriable KafkaError)."""

    message = "TOPIC_AUTHORIZATION_FAILED"


async def _refused(*_: Any, **__: Any) -> Any:
    raise NotAuthorized("not allowed to create topics")


@pytest.mark.parametrize("argv", [["create", "t", "--partitions", "2"], ["list"]])
def test_topics_tool_reports_a_kafka_error_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    monkeypatch.setattr(topics, "create_topics", _refused)
    monkeypatch.setattr(topics, "list_topics", _refused)
    assert topics.main([*argv, "--bootstrap-servers", "127.0.0.1:1"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip() == "error: Kafka refused the request: NotAuthorized: not allowed to create topics"


def test_reset_tool_reports_a_kafka_error_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(application_reset, "reset_application", _refused)
    assert application_reset.main(["--application-id", "app", "--bootstrap-servers", "127.0.0.1:1"]) == 1
    assert capsys.readouterr().err.strip() == "error: Kafka refused the request: NotAuthorized: not allowed to create topics"
