"""The KIP-95 metadata log read in order: runs, markers, tombstones, claims, intermediate stops."""

from __future__ import annotations

from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.autostop.autostop_metadata import (
    COMPLETED,
    FINISHED,
    AutostopLog,
    IntermediateWriters,
    claim_key,
    done_key,
    stop_key,
)

A0, A1 = TopicPartition("A", 0), TopicPartition("A", 1)
I0, I1 = TopicPartition("I", 0), TopicPartition("I", 1)
APP = b"app"


def read(*records: tuple[bytes, bytes | None]) -> AutostopLog:
    log = AutostopLog("app")
    for key, value in records:
        log.apply(key, value)
    return log


def test_the_seed_example_a_completed_run_is_valid_and_a_finished_one_is_not() -> None:
    running = read((stop_key(A0), b"55"), (stop_key(A1), b"46"), (APP, COMPLETED)).state()
    assert running.valid and running.stop_offsets == {A0: 55, A1: 46}
    finished = read((stop_key(A0), b"55"), (stop_key(A1), b"46"), (APP, COMPLETED), (APP, FINISHED)).state()
    assert finished.finished and not finished.valid


def test_stop_offsets_without_a_completed_marker_are_not_a_run() -> None:
    partial = read((stop_key(A0), b"55")).state()
    assert not partial.valid and partial.stop_offsets == {A0: 55}


def test_a_new_run_tombstones_the_old_one_and_its_marker() -> None:
    log = read(
        (stop_key(A0), b"55"), (APP, COMPLETED), (APP, FINISHED),
        (stop_key(A0), None), (APP, None),
    )
    assert not log.state().valid and not log.state().finished and log.state().keys == frozenset()
    log.apply(stop_key(A0), b"155")
    log.apply(APP, COMPLETED)
    assert log.state().valid and log.state().stop_offsets == {A0: 155}
    assert log.state().keys == {stop_key(A0), APP}


def test_after_compaction_the_finished_marker_alone_still_says_finished() -> None:
    assert read((stop_key(A0), b"55"), (APP, FINISHED)).state().finished


def test_the_first_claim_after_the_completed_marker_wins() -> None:
    log = read((claim_key("old"), b"old"), (stop_key(A0), b"5"), (APP, COMPLETED), (claim_key("p2"), b"p2"), (claim_key("p1"), b"p1"))
    assert log.state().claimant == "p2"
    log.apply(APP, COMPLETED)
    assert log.state().claimant is None


def test_unknown_and_malformed_keys_are_ignored() -> None:
    state = read((b"stop:A:x", b"1"), (b"other", b"2"), (stop_key(A0), b"not a number"), (stop_key(A1), b"3")).state()
    assert state.stop_offsets == {A1: 3}


def test_an_intermediate_partition_stops_at_the_highest_report_once_every_writer_reported() -> None:
    """The seed's deadlock example: X#1 read A_1 and wrote I up to 24 / 56, X#2 read A_2: 34 / 12."""
    writers = IntermediateWriters({"I": [A0, A1]})
    done = {(A0, I0): 24, (A0, I1): 56}
    assert writers.stop_offset(I0, done) is None, "A1 has not reported yet"
    done |= {(A1, I0): 34, (A1, I1): 12}
    assert writers.stop_offset(I0, done) == 34 and writers.stop_offset(I1, done) == 56
    assert writers.stop_offset(TopicPartition("other", 0), done) is None
    log = read((done_key(A0, I0), b"24"), (done_key(A1, I0), b"34"))
    assert log.state().done == {(A0, I0): 24, (A1, I0): 34}
