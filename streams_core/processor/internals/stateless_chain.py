"""The fused stateless chain: a run of stateless DSL processor nodes composed into one plain callable.

`compose(node, terminal)` walks a built sub-topology from `node` and returns one function
`run(key, value, timestamp, headers)` that applies every stateless DSL operator on the way
(filter, map, map_values, flat_map, flat_map_values, select_key and group_by's selector, peek,
branch/split, merge), with no `Record` built and no `context.forward` per operator. The
function is generated once as Python source: each operator becomes a statement (an `if` for a
filter, a `for` for a flat-map, an assignment for a map) calling the user's function, so a
record costs the user functions' calls and nothing per operator. Where the walk meets a node it
cannot fuse (a sink, a stateful or Processor API processor, anything reading the record
context), it calls `terminal(node)` once, at compose time, for the function that takes the
records reaching that node. A node reached from several parents (a merge) gets a function of its
own. Records are processed depth-first, one at a time, as Kafka Streams does. The Spark runner
calls it per record of an Arrow batch; the asyncio runtime and the test driver can do the same.
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Callable
from typing import Any

from streams_core.processor.internals import stateless_processors as kp
from streams_core.processor.internals.processor_node import ProcessorNode, SourceNode

__all__ = ["FUSED_OPERATORS", "Emit", "Terminal", "compose", "fusable", "fused_nodes"]

Emit = Callable[[Any, Any, int, Any], None]
"""Takes one record as (key, value, timestamp, headers)."""

Terminal = Callable[[ProcessorNode], Emit]
"""Gives the function taking the records that reach a node the chain does not fuse."""

_FUSED: tuple[type, ...] = (
    kp.KStreamFilter, kp.KStreamMap, kp.KStreamSelectKey, kp.KStreamMapValues, kp.KStreamFlatMap,
    kp.KStreamFlatMapValues, kp.KStreamPeek, kp.KStreamPassThrough, kp.KStreamBranch,
)  # fmt: skip

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
    return type(node.processor) in _FUSED and type(node) is ProcessorNode


def _starts(node: ProcessorNode) -> tuple[ProcessorNode, ...]:
    """A source node stands for its children."""
    return node.children if isinstance(node, SourceNode) else (node,)


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

    for start in _starts(node):
        walk(start)
    return fused, terminals


class _Generator:
    """Writes the source of one function per unit (the start, each node with several parents)."""

    def __init__(self, terminal: Terminal, parents: dict[str, int]) -> None:
        self._terminal = terminal
        self._parents = parents
        self._names = itertools.count()
        self.namespace: dict[str, Any] = {}
        self._units: dict[str, str] = {}
        self.source: list[str] = []
        self.tags: list[str] = []

    def _tag(self, line: str, node: ProcessorNode) -> str:
        """`line` marked as running `node` (read back into the function's `chain_nodes`)."""
        self.tags.append(node.name)
        return f"{line}  # {_label(node)} #{len(self.tags) - 1}"

    def _bind(self, value: Any, prefix: str) -> str:
        name = f"{prefix}{next(self._names)}"
        self.namespace[name] = value
        return name

    def unit(self, node: ProcessorNode) -> str:
        """The name of the function taking the records that reach `node`."""
        name = self._units.get(node.name)
        if name is not None:
            return name
        if not fusable(node):
            name = self._bind(self._terminal(node), "end")
            self._units[node.name] = name
            return name
        name = f"unit{next(self._names)}"
        self._units[node.name] = name
        body: list[str] = []
        self._node(node, "key", "value", 1, body)
        self.source += [f"def {name}(key, value, timestamp, headers):", *body, ""]
        return name

    def units(self, nodes: tuple[ProcessorNode, ...]) -> str:
        """A function handing each record to every one of `nodes` in order."""
        if len(nodes) == 1:
            return self.unit(nodes[0])
        name = f"unit{next(self._names)}"
        calls = [self._tag(f"    {self.unit(n)}(key, value, timestamp, headers)", n) for n in nodes] or ["    pass"]
        self.source += [f"def {name}(key, value, timestamp, headers):", *calls, ""]
        return name

    def _children(self, node: ProcessorNode, k: str, v: str, depth: int, out: list[str]) -> None:
        for child in node.children:
            self._reach(child, k, v, depth, out)

    def _reach(self, node: ProcessorNode, k: str, v: str, depth: int, out: list[str]) -> None:
        if fusable(node) and self._parents.get(node.name, 0) <= 1:
            self._node(node, k, v, depth, out)
        else:
            out.append(self._tag(f"{'    ' * depth}{self.unit(node)}({k}, {v}, timestamp, headers)", node))

    def _node(self, node: ProcessorNode, k: str, v: str, depth: int, out: list[str]) -> None:
        p, pad, start = node.processor, "    " * depth, len(out)
        if isinstance(p, kp.KStreamFilter):
            f = self._bind(p._predicate, "predicate")
            out.append(f"{pad}if {'' if p._keep else 'not '}{f}({k}, {v}):")
            self._block(node, k, v, depth + 1, out)
        elif isinstance(p, kp.KStreamMap):
            f, nk, nv = self._bind(p._mapper, "mapper"), f"k{next(self._names)}", f"v{next(self._names)}"
            out.append(f"{pad}{nk}, {nv} = {f}({k}, {v})")
            self._children(node, nk, nv, depth, out)
        elif isinstance(p, kp.KStreamSelectKey):
            f, nk = self._bind(p._selector, "selector"), f"k{next(self._names)}"
            out.append(f"{pad}{nk} = {f}({k}, {v})")
            self._children(node, nk, v, depth, out)
        elif isinstance(p, kp.KStreamMapValues):
            f, nv = self._bind(p._mapper, "mapper"), f"v{next(self._names)}"
            out.append(f"{pad}{nv} = {f}({k}, {v})" if p._with_key else f"{pad}{nv} = {f}({v})")
            self._children(node, k, nv, depth, out)
        elif isinstance(p, kp.KStreamFlatMap):
            f, nk, nv = self._bind(p._mapper, "mapper"), f"k{next(self._names)}", f"v{next(self._names)}"
            out.append(f"{pad}for {nk}, {nv} in {f}({k}, {v}):")
            self._block(node, nk, nv, depth + 1, out)
        elif isinstance(p, kp.KStreamFlatMapValues):
            f, nv = self._bind(p._mapper, "mapper"), f"v{next(self._names)}"
            out.append(f"{pad}for {nv} in {f}({k}, {v}):" if p._with_key else f"{pad}for {nv} in {f}({v}):")
            self._block(node, k, nv, depth + 1, out)
        elif isinstance(p, kp.KStreamPeek):
            out.append(f"{pad}{self._bind(p._action, 'action')}({k}, {v})")
            if p._forward_downstream:
                self._children(node, k, v, depth, out)
        elif isinstance(p, kp.KStreamBranch):
            self._branch(node, p, k, v, depth, out)
        else:  # KStreamPassThrough
            self._children(node, k, v, depth, out)
        for i in range(start, len(out)):
            if "  # " not in out[i] and not out[i].endswith(("pass", "else:")):
                out[i] = self._tag(out[i], node)
        if len(out) == start:
            out.append(f"{pad}pass")

    def _block(self, node: ProcessorNode, k: str, v: str, depth: int, out: list[str]) -> None:
        start = len(out)
        self._children(node, k, v, depth, out)
        if len(out) == start:
            out.append(f"{'    ' * depth}pass")

    def _branch(self, node: ProcessorNode, p: kp.KStreamBranch[Any, Any], k: str, v: str, depth: int, out: list[str]) -> None:
        pad = "    " * depth
        keyword = "if"
        for predicate, child in zip(tuple(p._predicates), tuple(p._children), strict=True):
            out.append(f"{pad}{keyword} {self._bind(predicate, 'predicate')}({k}, {v}):")
            self._reach(node.children_by_name[child], k, v, depth + 1, out)
            keyword = "elif"
        if p._default:
            if keyword == "if":
                self._reach(node.children_by_name[p._default[0]], k, v, depth, out)
            else:
                out.append(f"{pad}else:")
                self._reach(node.children_by_name[p._default[0]], k, v, depth + 1, out)


def _parent_counts(starts: tuple[ProcessorNode, ...]) -> dict[str, int]:
    """How many fused parents (or starts) reach each node."""
    counts: dict[str, int] = {}
    seen: set[str] = set()
    pending = list(starts)
    for start in starts:
        counts[start.name] = counts.get(start.name, 0) + 1
    while pending:
        node = pending.pop()
        if node.name in seen or not fusable(node):
            continue
        seen.add(node.name)
        for child in node.children:
            counts[child.name] = counts.get(child.name, 0) + 1
            pending.append(child)
    return counts


def _label(node: ProcessorNode) -> str:
    """The node's name on one line (it ends a comment of the generated source)."""
    return " ".join(node.name.splitlines())


def compose(node: ProcessorNode, terminal: Terminal) -> Emit:
    """One function running a record through `node` and the fused nodes below it.

    A source node stands for its children. `terminal(n)` is asked once per node the chain stops
    at. The generated source is the function's `chain_source` attribute; `chain_nodes` maps each
    of its lines that calls a user function or a terminal to that node's name (a failure's line in
    a traceback names the processor).
    """
    starts = _starts(node)
    generator = _Generator(terminal, _parent_counts(starts))
    entry = generator.units(starts)
    source = "\n".join(generator.source)
    filename = f"<stateless chain {hash(source) & 0xFFFFFFFF:08x} from {_label(node)}>"  # one entry per chain
    # Tracebacks show the generated line, which names its processor node in a comment.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), generator.namespace)
    function: Emit = generator.namespace[entry]
    function.chain_source = source  # type: ignore[attr-defined]
    function.chain_nodes = {  # type: ignore[attr-defined]
        number: generator.tags[int(line.rpartition(" #")[2])]
        for number, line in enumerate(source.splitlines(), 1)
        if "  # " in line
    }
    return function
