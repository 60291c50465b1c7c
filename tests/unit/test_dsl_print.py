"""KStream.print with Printed.to_sys_out() / to_file(...), a label and a key-value mapper.

Translated from Kafka Streams' KStreamPrintTest (apache/kafka
streams/src/test/java/org/apache/kafka/streams/kstream/internals/KStreamPrintTest.java): the same
records and the same expected lines, through the DSL and the TopologyTestDriver.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from streams_core import Printed, Serdes, StreamsBuilder, TopologyError, TopologyTestDriver

RECORDS = [(0, "zero"), (1, "one"), (2, "two"), (3, "three")]
EXPECTED = ["[test-stream]: 0, zero", "[test-stream]: 1, one", "[test-stream]: 2, two", "[test-stream]: 3, three"]


def _run(printed: Printed) -> StreamsBuilder:
    builder = StreamsBuilder()
    builder.stream("in", key_serde=Serdes.Integer(), value_serde=Serdes.String()).print(printed)
    with TopologyTestDriver(builder.build(), {"application.id": "print"}) as driver:
        source = driver.create_input_topic("in", Serdes.Integer(), Serdes.String())
        for key, value in RECORDS:
            source.pipe_input(key, value, 0)
    return builder


def test_print_to_file_with_provided_key_value_mapper(tmp_path: Path) -> None:
    """testPrintStreamWithProvidedKeyValueMapper: `"%d, %s"` under the label "test-stream"."""
    path = tmp_path / "out.txt"
    _run(Printed.to_file(path).with_label("test-stream").with_key_value_mapper(lambda k, v: f"{k:d}, {v}"))
    assert path.read_text(encoding="utf-8").splitlines() == EXPECTED


def test_print_to_sys_out_with_default_label_and_mapper() -> None:
    """Printed.toSysOut(): the label is the node's name (`KSTREAM-PRINTER-<n>`), the text `key, value`."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        builder = _run(Printed.to_sys_out())
    assert out.getvalue().splitlines() == [f"[KSTREAM-PRINTER-0000000001]: {k}, {v}" for k, v in RECORDS]
    assert [n.name for n in builder.build().describe().subtopologies[0].nodes] == [
        "KSTREAM-SOURCE-0000000000", "KSTREAM-PRINTER-0000000001",
    ]  # fmt: skip


def test_print_named_node(tmp_path: Path) -> None:
    """Printed.processorName names the node (and labels the lines when no label is given)."""
    path = tmp_path / "named.txt"
    builder = _run(Printed.to_file(path).with_name("printer"))
    assert path.read_text(encoding="utf-8").splitlines()[0] == "[printer]: 0, zero"
    assert "Processor: printer (stores: [])" in str(builder.build().describe())


def test_to_file_empties_the_file_and_refuses_an_unwritable_path(tmp_path: Path) -> None:
    """Java's Printed.toFile opens (truncates) the file at once and throws a TopologyException if it cannot."""
    path = tmp_path / "old.txt"
    path.write_text("old line\n", encoding="utf-8")
    Printed.to_file(path)
    assert path.read_text(encoding="utf-8") == ""
    with pytest.raises(TopologyError, match="Unable to write stream to file"):
        Printed.to_file(tmp_path / "missing-dir" / "out.txt")
