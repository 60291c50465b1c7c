"""The fused stateless chain: a run of stateless DSL processor nodes composed into one plain callable.

`compose(node, terminal)` walks a built sub-topology from `node` and returns one function
`run(key, value, timestamp, headers)` that applies every stateless DSL operator on the way
(filter, map, map_values, flat_map, flat_map_values, select_key and group_by's selector, peek,
branch/split, merge) as nested closures, with no `Record` built and no `context.forward` per
operator. Where the walk meets a node it cannot fuse (a sink, a stateful or Processor API
processor, anything reading the record context), it calls `terminal(node)` once, at compose
time, for the function that takes the records reaching that node. The Spark runner feeds it
Arrow columns; the asyncio runtime and the test driver can feed it their records the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from streams_core.kstream.internals import kstream_processors as kp
from streams_core.processor.internals.processor_node import ProcessorNode, SourceNode

__all__ = ["FUSED_OPERATORS", "Emit", "Terminal", "compose", "fusable", "fused_nodes"]

Emit = Callable[[Any, Any, int, Any], None]
"""Takes one record as (key, value, timestamp, headers)."""

Terminal = Callable[[ProcessorNode], Emit]
"""Gives the function taking the records that reach a node the chain does not fuse."""

Composer = Callable[[Any, Callable[[ProcessorNode], Emit], ProcessorNode], Emit]


def _fan_out(children: Sequence[Emit]) -> Emit:
    if len(children) == 1:
        return children[0]
    if not children:
        return _drop
    items = tuple(children)

    def fan_out(key: Any, value: Any, timestamp: int, headers: Any) -> None:
        for child in items:
            child(key, value, timestamp, headers)

    return fan_out


def _drop(key: Any, value: Any, timestamp: int, headers: Any) -> None:
    """A node without children: the record goes nowhere."""


def _filter(p: kp.KStreamFilter, sub: Callable[[ProcessorNode], Emit], node: ProcessorNode) -> Emit:
    predicate, keep, nxt = p._predicate, p._keep, _children(sub, node)
    if keep:

        def accept(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            if predicate(key, value):
                nxt(key, value, timestamp, headers)

        return accept

    def reject(key: Any, value: Any, timestamp: int, headers: Any) -> None:
        if not predicate(key, value):
            nxt(key, value, timestamp, headers)

    return reject


def _map(p: kp.KStreamMap, sub: Callable[[ProcessorNode], Emit], node: ProcessorNode) -> Emit:
    mapper, nxt = p._mapper, _children(sub, node)

    def map_(key: Any, value: Any, timestamp: int, headers: Any) -> None:
        new_key, new_value = mapper(key, value)
        nxt(new_key, new_value, timestamp, headers)

    return map_


def _select_key(p: kp.KStreamSelectKey, sub: Callable[[ProcessorNode], Emit], node: ProcessorNode) -> Emit:
    selector, nxt = p._selector, _children(sub, node)

    def select_key(key: Any, value: Any, timestamp: int, headers: Any) -> None:
        nxt(selector(key, value), value, timestamp, headers)

    return select_key


def _map_values(p: kp.KStreamMapValues, sub: Callable[[ProcessorNode], Emit], node: ProcessorNode) -> Emit:
    mapper, nxt = p._mapper, _children(sub, node)
    if p._with_key:

        def map_values_with_key(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            nxt(key, mapper(key, value), timestamp, headers)

        return map_values_with_key

    def map_values(key: Any, value: Any, timestamp: int, headers: Any) -> None:
        nxt(key, mapper(value), timestamp, headers)

    return map_values


def _flat_map(p: kp.KStreamFlatMap, sub: Callable[[ProcessorNode], Emit], node: ProcessorNode) -> Emit:
    mapper, nxt = p._mapper, _children(sub, node)

    def flat_map(key: Any, value: Any, timestamp: int, headers: Any) -> None:
        for new_key, new_value in mapper(key, value):
            nxt(new_key, new_value, timestamp, headers)

    return flat_map


def _flat_map_values(p: kp.KStreamFlatMapValues, sub: Callable[[ProcessorNode], Emit], node: ProcessorNode) -> Emit:
    mapper, nxt = p._mapper, _children(sub, node)
    if p._with_key:

        def flat_map_values_with_key(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            for new_value in mapper(key, value):
                nxt(key, new_value, timestamp, headers)

        return flat_map_values_with_key

    def flat_map_values(key: Any, value: Any, timestamp: int, headers: Any) -> None:
        for new_value in mapper(value):
            nxt(key, new_value, timestamp, headers)

    return flat_map_values


def _peek(p: kp.KStreamPeek, sub: Callable[[ProcessorNode], Emit], node: ProcessorNode) -> Emit:
    action = p._action
    nxt = _children(sub, node) if p._forward_downstream else _drop

    def peek(key: Any, value: Any, timestamp: int, headers: Any) -> None:
        action(key, value)
        nxt(key, value, timestamp, headers)

    return peek


def _pass_through(p: kp.KStreamPassThrough, sub: Callable[[ProcessorNode], Emit], node: ProcessorNode) -> Emit:
    return _children(sub, node)


def _branch(p: kp.KStreamBranch, sub: Callable[[ProcessorNode], Emit], node: ProcessorNode) -> Emit:
    predicates = tuple(p._predicates)
    targets = tuple(sub(node.children_by_name[name]) for name in p._children)
    routes = tuple(zip(predicates, targets, strict=True))
    default = sub(node.children_by_name[p._default[0]]) if p._default else _drop

    def branch(key: Any, value: Any, timestamp: int, headers: Any) -> None:
        for predicate, target in routes:
            if predicate(key, value):
                target(key, value, timestamp, headers)
                return
        default(key, value, timestamp, headers)

    return branch


def _children(sub: Callable[[ProcessorNode], Emit], node: ProcessorNode) -> Emit:
    return _fan_out([sub(child) for child in node.children])


_COMPOSERS: dict[type, Composer] = {
    kp.KStreamFilter: _filter,
    kp.KStreamMap: _map,
    kp.KStreamSelectKey: _select_key,
    kp.KStreamMapValues: _map_values,
    kp.KStreamFlatMap: _flat_map,
    kp.KStreamFlatMapValues: _flat_map_values,
    kp.KStreamPeek: _peek,
    kp.KStreamPassThrough: _pass_through,
    kp.KStreamBranch: _branch,
}

#: The processor classes the chain fuses (class name -> DSL operator), for plans and docs.
FUSED_OPERATORS: dict[str, str] = {
    "KStreamFilter": "filter/filter_not (and the repartition null-key filter)",
    "KStreamMap": "map",
    "KStreamSelectKey": "select_key/group_by selector",
    "KStreamMapValues": "map_values",
    "KStreamFlatMap": "flat_map",
    "KStreamFlatMapValues": "flat_map_values",
    "KStreamPeek": "peek/foreach",
    "KStreamPassThrough": "merge/branch child",
    "KStreamBranch": "branch/split",
}


def fusable(node: ProcessorNode) -> bool:
    """True when the chain fuses `node` (a stateless DSL processor of exactly a known class)."""
    return type(node.processor) in _COMPOSERS and type(node) is ProcessorNode


def fused_nodes(node: ProcessorNode) -> tuple[list[ProcessorNode], list[ProcessorNode]]:
    """The nodes the chain from `node` fuses and the terminal nodes it stops at, each once, in walk order."""
    fused: list[ProcessorNode] = []
    terminals: list[ProcessorNode] = []
    seen: set[str] = set()

    def walk(n: ProcessorNode) -> None:
        if n.name in seen:
            return
        seen.add(n.name)
        if not fusable(n):
            terminals.append(n)
            return
        fused.append(n)
        for child in n.children:
            walk(child)

    for child in node.children if isinstance(node, SourceNode) else (node,):
        walk(child)
    return fused, terminals


def compose(node: ProcessorNode, terminal: Terminal) -> Emit:
    """One function running a record through `node` and the fused nodes below it.

    A source node (no processor) stands for its children. Each node is composed once (a merge's
    node reached from two parents shares one function); `terminal(n)` is asked once per node
    the chain stops at.
    """
    built: dict[str, Emit] = {}

    def sub(n: ProcessorNode) -> Emit:
        done = built.get(n.name)
        if done is not None:
            return done
        if fusable(n):
            function = _COMPOSERS[type(n.processor)](n.processor, sub, n)
        else:
            function = terminal(n)
        built[n.name] = function
        return function

    if isinstance(node, SourceNode):
        return _children(sub, node)
    return sub(node)
