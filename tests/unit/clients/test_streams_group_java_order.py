"""Java's HashSet iteration order, pinned against a Java 17 run (java.util.HashSet, String.hashCode)."""

from __future__ import annotations

from streams_core.clients.streams_group_java_order import java_hash_set_order, java_set_hash_code, java_string_hash_code

INSERTED = [
    "sg-java-in-0bb7f2abb47a", "sg-java-in-7e6c4770be24", "orders", "customers",
    "app-KSTREAM-KEY-SELECT-0000000003-repartition", "Aa", "BB", "x", "payments", "shipments",
    "t1", "t2", "t3", "t4", "t5",
]  # fmt: skip


def test_string_hash_codes_are_javas() -> None:
    assert java_string_hash_code("hello") == 99162322
    assert java_string_hash_code("payé") == 3433793  # UTF-16 code units
    assert java_string_hash_code("Aa") == java_string_hash_code("BB")  # a classic collision
    assert java_string_hash_code("") == 0


def test_a_hash_set_iterates_as_javas() -> None:
    # the order `String.join(",", set)` printed after adding INSERTED in order to a `new HashSet<>()`
    assert java_hash_set_order(INSERTED[:7], java_string_hash_code) == [
        "Aa", "BB", "sg-java-in-0bb7f2abb47a", "sg-java-in-7e6c4770be24", "orders", "customers",
        "app-KSTREAM-KEY-SELECT-0000000003-repartition",
    ]  # fmt: skip
    # 15 entries: the table has grown to 32 buckets
    assert java_hash_set_order(INSERTED, java_string_hash_code) == [
        "Aa", "BB", "t4", "t5", "payments", "sg-java-in-7e6c4770be24", "shipments",
        "app-KSTREAM-KEY-SELECT-0000000003-repartition", "sg-java-in-0bb7f2abb47a", "x", "orders", "customers",
        "t1", "t2", "t3",
    ]  # fmt: skip
    assert java_hash_set_order(["BB", "Aa", "BB"], java_string_hash_code) == ["BB", "Aa"]  # same bucket: insertion order


def test_a_set_of_sets_iterates_as_javas() -> None:
    groups = [("payments", "shipments"), ("t1", "t2", "t3"), ("orders", "customers")]
    assert java_set_hash_code(("orders", "customers")) == java_set_hash_code(("customers", "orders"))
    ordered = java_hash_set_order(groups, java_set_hash_code)
    assert [java_hash_set_order(g, java_string_hash_code) for g in ordered] == [
        ["orders", "customers"], ["payments", "shipments"], ["t1", "t2", "t3"],
    ]  # fmt: skip
