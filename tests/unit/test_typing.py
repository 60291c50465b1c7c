"""The public API is typed for users: mypy sees what `KafkaStreams.store()` hands out."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

SNIPPET = textwrap.dedent(
    """
    from streams_core import KafkaStreams, QueryableStoreTypes, StreamsBuilder

    streams = KafkaStreams(StreamsBuilder().build(), {"application.id": "a", "bootstrap.servers": "b"})
    reveal_type(streams.store("word-count", QueryableStoreTypes.key_value_store()))
    reveal_type(streams.store("windows", QueryableStoreTypes.window_store()))
    reveal_type(streams.store("sessions", QueryableStoreTypes.session_store()))
    reveal_type(streams.store("word-count"))
    reveal_type(streams.state)
    streams.store("word-count", QueryableStoreTypes.key_value_store()).get("hello")
    """
)


def test_store_views_are_typed_for_users(tmp_path: Path) -> None:
    source = tmp_path / "user_code.py"
    source.write_text(SNIPPET)
    stdout, stderr, status = mypy_api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), "--config-file", "", str(source)]
    )
    revealed = [line.split("Revealed type is ", 1)[1] for line in stdout.splitlines() if "Revealed type is" in line]
    assert revealed == [
        '"streams_core.common.store.ReadOnlyKeyValueStore[Any, Any]"',
        '"streams_core.state.window_store.ReadOnlyWindowStore[Any, Any]"',
        '"streams_core.state.session_store.ReadOnlySessionStore[Any, Any]"',
        '"streams_core.common.store.ReadOnlyKeyValueStore[Any, Any]"',
        '"streams_core.runtime.client_state.State"',
    ], stdout + stderr
    assert status == 0, stdout + stderr
