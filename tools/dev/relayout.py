"""Re-lay the house (issue 38, items 1-3): shared value types at the bottom, runtime/ in rooms, the fused chain in processor/.

Run from the repository root on a clean tree, then review and commit the result on its own:

    PYTHONPATH=$PWD .venv/bin/python tools/dev/relayout.py          # moves, extracts, rewrites
    PYTHONPATH=$PWD .venv/bin/python tools/dev/relayout.py --check  # only says what is left to do

It is a script, not a patch, so that it can be re-run on whatever main has become: every step
checks what is there first (a file already moved, a name already carried out, an import
already rewritten is passed over), so a second run changes nothing. What it does, in order:

1. EXTRACTS: carries named top-level definitions (a class, an alias with its docstring) out of a
   module into a new one of the bottom package, and points every import of them at the new place.
2. MOVES: `git mv` of whole modules into their rooms (a module may get a new name), creating each
   room's `__init__.py`; untracked build products that travel with a module (the murmur2 `.so`)
   are moved with it.
3. REWRITES the old places everywhere they are named, in code and in text: dotted module names
   (imports, `python -m` launches, `monkeypatch` and `mock.patch` strings, pyproject's ext-module),
   file paths (Makefile, pyproject's package-data, docs), and the identifiers in RENAMES.
4. Sorts and prunes the imports it touched with ruff (`I001`, `F401`), so ruff's gate stays green.

The layout is the tables below; docs/layout.md explains it to a newcomer.
"""

from __future__ import annotations

import argparse
import ast
import logging
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("relayout")

PKG = "streams_core"

#: New packages (rooms) and the one line their `__init__.py` says.
PACKAGES: dict[str, str] = {
    "streams_core/common": "The bottom floor: value types and protocols every layer shares (clients, processor, state, runtime, api).",
    "streams_core/runtime/tasks": "Tasks and what runs them: StreamTask, TaskManager, PartitionGroup, RecordQueue, the collector, the guarantee.",
    "streams_core/runtime/threads": "Stream threads: the loop, its clients, polling, the rebalance listener, metrics, and how an instance drives one.",
    "streams_core/runtime/workers": "Worker processes (`stream.threads.mode=process`): the process, the instance's handle, the channel, logs, queries.",
    "streams_core/runtime/restore": "Keeping state current from changelogs: the changelog reader, standby tasks and their updater.",
    "streams_core/runtime/queries": "Answering store queries: the providers behind KafkaStreams.store() and query(), and the one store path.",
    "streams_core/runtime/autostop": "KIP-95 batch runs (`autostop.at`): how a run ends, the metadata topic, the instance and thread sides.",
}

#: Definitions carried out of a module: (from, to, names moved, names copied (left in place too), new module's docstring).
#: A copied name is a TypeVar the moved definitions need.
EXTRACTS: list[tuple[str, str, list[str], list[str], str]] = [
    (
        "streams_core/processor/processor.py",
        "streams_core/common/headers.py",
        ["Headers"],
        [],
        "Headers: a Kafka record's headers, shared by the clients, the processor API and the stores.",
    ),
    (
        "streams_core/processor/processor.py",
        "streams_core/common/record_metadata.py",
        ["RecordMetadata"],
        [],
        "RecordMetadata: where a record is (topic, partition, offset); what the processor context and the producer give.",
    ),
    (
        "streams_core/runtime/topic_partition_metadata.py",
        "streams_core/common/offset_and_metadata.py",
        ["OffsetAndMetadata"],
        [],
        "OffsetAndMetadata: an offset to commit with its metadata, as the clients and the tasks pass it.",
    ),
    (
        "streams_core/kstream/internals/change.py",
        "streams_core/common/change.py",
        ["Change"],
        ["V"],
        "Change: a table's new and old value, as the DSL forwards it and the suppression buffer keeps it.",
    ),
]

#: Whole modules moved (old path -> new path), the runtime's rooms first. Kafka Streams' module names are kept.
MOVES: dict[str, str] = {
    # bottom floor: value types and protocols shared by every layer
    "streams_core/runtime/topic_partition.py": "streams_core/common/topic_partition.py",
    "streams_core/runtime/partitioner.py": "streams_core/common/partitioner.py",
    "streams_core/runtime/_murmur2.c": "streams_core/common/_murmur2.c",
    "streams_core/runtime/_murmur2.pyi": "streams_core/common/_murmur2.pyi",
    "streams_core/state/store.py": "streams_core/common/store.py",
    "streams_core/processor/task_id.py": "streams_core/common/task_id.py",
    "streams_core/runtime/assignment/host_info.py": "streams_core/common/host_info.py",
    # the fused stateless chain and the processors it fuses: the processor layer's, used by the DSL and Spark
    "streams_core/kstream/internals/stateless_chain.py": "streams_core/processor/internals/stateless_chain.py",
    "streams_core/kstream/internals/kstream_processors.py": "streams_core/processor/internals/stateless_processors.py",
    "streams_core/kstream/internals/type_vars.py": "streams_core/processor/type_vars.py",
    # runtime/tasks
    "streams_core/runtime/flow_control.py": "streams_core/runtime/tasks/flow_control.py",
    "streams_core/runtime/processing_guarantee.py": "streams_core/runtime/tasks/processing_guarantee.py",
    "streams_core/runtime/state_directory_cleaner.py": "streams_core/runtime/tasks/state_directory_cleaner.py",
    "streams_core/runtime/stream_task.py": "streams_core/runtime/tasks/stream_task.py",
    "streams_core/runtime/task_manager.py": "streams_core/runtime/tasks/task_manager.py",
    "streams_core/runtime/partition_group.py": "streams_core/runtime/tasks/partition_group.py",
    "streams_core/runtime/record_queue.py": "streams_core/runtime/tasks/record_queue.py",
    "streams_core/runtime/record_collector_impl.py": "streams_core/runtime/tasks/record_collector_impl.py",
    "streams_core/runtime/topic_partition_metadata.py": "streams_core/runtime/tasks/topic_partition_metadata.py",
    "streams_core/runtime/dead_letter_sink.py": "streams_core/runtime/tasks/dead_letter_sink.py",
    # runtime/threads
    "streams_core/runtime/streams_rebalance_listener.py": "streams_core/runtime/threads/streams_rebalance_listener.py",
    "streams_core/runtime/stream_thread.py": "streams_core/runtime/threads/stream_thread.py",
    "streams_core/runtime/stream_thread_factory.py": "streams_core/runtime/threads/stream_thread_factory.py",
    "streams_core/runtime/stream_threads.py": "streams_core/runtime/threads/stream_threads.py",
    "streams_core/runtime/global_stream_thread.py": "streams_core/runtime/threads/global_stream_thread.py",
    "streams_core/runtime/instance_thread.py": "streams_core/runtime/threads/instance_thread.py",
    "streams_core/runtime/thread_clients.py": "streams_core/runtime/threads/thread_clients.py",
    "streams_core/runtime/thread_metadata.py": "streams_core/runtime/threads/thread_metadata.py",
    "streams_core/runtime/thread_metrics.py": "streams_core/runtime/threads/thread_metrics.py",
    "streams_core/runtime/thread_state.py": "streams_core/runtime/threads/thread_state.py",
    "streams_core/runtime/round_poll.py": "streams_core/runtime/threads/round_poll.py",
    "streams_core/runtime/gc_policy.py": "streams_core/runtime/threads/gc_policy.py",
    # runtime/workers
    "streams_core/runtime/remote_store_provider.py": "streams_core/runtime/workers/remote_store_provider.py",
    "streams_core/runtime/stream_worker.py": "streams_core/runtime/workers/stream_worker.py",
    "streams_core/runtime/worker_thread.py": "streams_core/runtime/workers/worker_thread.py",
    "streams_core/runtime/worker_channel.py": "streams_core/runtime/workers/worker_channel.py",
    "streams_core/runtime/worker_logging.py": "streams_core/runtime/workers/worker_logging.py",
    "streams_core/runtime/worker_store_queries.py": "streams_core/runtime/workers/worker_store_queries.py",
    # runtime/assignment (the room stands; the assignor, the group protocol's entry point, joins it)
    "streams_core/runtime/streams_partition_assignor.py": "streams_core/runtime/assignment/streams_partition_assignor.py",
    # KIP-1071: the topology a streams group member sends is made from the runtime's TopologyMetadata
    "streams_core/clients/streams_group_topology.py": "streams_core/runtime/assignment/streams_group_topology.py",
    # runtime/restore
    "streams_core/runtime/standby_task.py": "streams_core/runtime/restore/standby_task.py",
    "streams_core/runtime/store_changelog_reader.py": "streams_core/runtime/restore/store_changelog_reader.py",
    "streams_core/runtime/standby_updater.py": "streams_core/runtime/restore/standby_updater.py",
    # runtime/queries
    "streams_core/runtime/interactive_query.py": "streams_core/runtime/queries/interactive_query.py",
    "streams_core/runtime/state_store_providers.py": "streams_core/runtime/queries/state_store_providers.py",
    "streams_core/runtime/store_host.py": "streams_core/runtime/queries/store_host.py",
    # runtime/autostop: "mode" keeps one meaning (where threads run: thread_mode); how a run ends is a RunEnd
    "streams_core/runtime/autostop_manager.py": "streams_core/runtime/autostop/autostop_manager.py",
    "streams_core/runtime/autostop_metadata.py": "streams_core/runtime/autostop/autostop_metadata.py",
    "streams_core/runtime/autostop_tracker.py": "streams_core/runtime/autostop/autostop_tracker.py",
    "streams_core/runtime/run_mode.py": "streams_core/runtime/autostop/run_end.py",
    # Kafka Streams' internal topic configs, used by the classic path's topic preparation and the streams group topology
    "streams_core/runtime/internal_topic_config.py": "streams_core/runtime/assignment/internal_topic_config.py",
    # value parsers shared by the streams config and the client config
    "streams_core/config_parsers.py": "streams_core/common/config_parsers.py",
    # runtime/ itself keeps the instance: kafka_streams (with its client_state, kafka_streams_queries and
    # thread_failures), thread_mode (threads or worker processes), topology_metadata, topic_preparation,
    # shutdown_request, signal_runner
}

#: What may stay in runtime/ itself (the instance); any other module there is named at the end of a run, to be given a room.
RUNTIME_ROOT = {
    "__init__", "kafka_streams", "client_state", "kafka_streams_queries", "thread_failures", "thread_mode",
    "topology_metadata", "topic_preparation", "shutdown_request", "signal_runner",
}  # fmt: skip

#: Untracked build products that travel with a moved source (glob under the old folder -> new folder).
BUILT: list[tuple[str, str]] = [("streams_core/runtime/_murmur2*.so", "streams_core/common")]

#: Identifiers renamed with their module (one word per concept: "mode" is where threads run, nothing else).
RENAMES: dict[str, str] = {"ThreadRunMode": "ThreadRunEnd", "RunMode": "RunEnd", "run_mode": "run_end"}

#: Text that names several moved files at once (docs), rewritten as it stands.
TEXT_FIXES: dict[str, str] = {"runtime/autostop_*.py": "runtime/autostop/autostop_*.py"}

#: Where names are rewritten: these folders and files, never this script, never the virtualenv or caches.
SCOPE_DIRS = ["streams_core", "api", "app", "tests", "bench", "docs", "docker", "tools"]
SCOPE_FILES = ["README.md", "Makefile", "pyproject.toml", "openapi.yaml"]
TEXT_SUFFIXES = {".py", ".pyi", ".md", ".toml", ".yaml", ".yml", ".cfg", ".ini", ".txt", ".sh", ".json", ".c", ".java", ""}
SKIP_PARTS = {".venv", ".cache", "__pycache__", ".git", "node_modules"}


def dotted(path: str) -> str:
    """streams_core/runtime/stream_task.py -> streams_core.runtime.stream_task (a package's __init__ -> the package)."""
    p = Path(path)
    parts = list(p.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_moves() -> dict[str, str]:
    """Old dotted module -> new dotted module, for the moves of Python modules (the .c/.pyi ride with their module)."""
    out = {}
    for old, new in MOVES.items():
        if old.endswith((".py", ".pyi")):
            out[dotted(old)] = dotted(new)
    return out


@dataclass
class Run:
    """What one run changed, and what it would change under --check."""

    root: Path
    check: bool
    touched: set[Path] = field(default_factory=set)
    todo: list[str] = field(default_factory=list)

    def git(self, *args: str) -> None:
        subprocess.run(["git", *args], cwd=self.root, check=True)

    def write(self, path: Path, text: str) -> None:
        if path.exists() and path.read_text() == text:
            return
        if self.check:
            self.todo.append(f"rewrite {path.relative_to(self.root)}")
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.touched.add(path)


# ---------------------------------------------------------------- 1. extracts


def _statement_span(tree: ast.Module, lines: list[str], name: str) -> tuple[int, int] | None:
    """The 0-based [start, end) line span of the top-level definition of `name`, with its decorators, the
    comment lines right above it and, for an assignment, the docstring right below it."""
    body = tree.body
    for i, node in enumerate(body):
        names: list[str] = []
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        if name not in names:
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
        while first > 0 and lines[first - 1].lstrip().startswith("#"):
            first -= 1
        last = node.end_lineno or node.lineno
        nxt = body[i + 1] if i + 1 < len(body) else None
        if (
            isinstance(node, (ast.Assign, ast.AnnAssign))
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            last = nxt.end_lineno or nxt.lineno
        return first, last
    return None


def _used_names(source: str) -> set[str]:
    """Every identifier that the code names, in code or inside strings (forward references)."""
    tree = ast.parse(source)
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"[\w.\[\], |]{1,80}", node.value):
            used.update(re.findall(r"[A-Za-z_]\w*", node.value))  # a forward reference such as "StateStore"
    return used


def _imports_for(tree: ast.Module, used: set[str]) -> list[str]:
    """The source module's import statements cut down to the names `used` (TYPE_CHECKING blocks kept as such)."""
    out: list[str] = []
    checking: list[str] = []

    def keep(node: ast.stmt, into: list[str]) -> None:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            aliases = [a for a in node.names if (a.asname or a.name) in used]
            if aliases:
                names = ", ".join(a.name if a.asname is None else f"{a.name} as {a.asname}" for a in aliases)
                into.append(f"from {'.' * node.level}{node.module or ''} import {names}")
        elif isinstance(node, ast.Import):
            aliases = [a for a in node.names if (a.asname or a.name.split(".")[0]) in used]
            for a in aliases:
                into.append(f"import {a.name}" + (f" as {a.asname}" if a.asname else ""))

    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for sub in node.body:
                keep(sub, checking)
        else:
            keep(node, out)
    if checking:
        out.append("from typing import TYPE_CHECKING")
        out.append("if TYPE_CHECKING:")
        out.extend(f"    {line}" for line in checking)
    return out


def _drop_from_all(text: str, names: list[str]) -> str:
    """The module without `names` in its `__all__` list."""
    for name in names:
        text = re.sub(rf'\n(\s*)"{re.escape(name)}",', "", text, count=1)
        text = re.sub(rf'"{re.escape(name)}",\s*', "", text, count=1)
        text = re.sub(rf',\s*"{re.escape(name)}"(?=\s*\])', "", text, count=1)
    return text


def extract(run: Run, src: str, dst: str, names: list[str], copies: list[str], doc: str) -> None:
    """Carry `names` out of `src` into `dst` (a new module), leaving `src` importing what it still uses."""
    src_path, dst_path = run.root / src, run.root / dst
    if not src_path.exists():
        log.log(logging.INFO if dst_path.exists() else logging.WARNING, "extract %s: %s is not in this tree: passed over", names, src)
        return
    text = src_path.read_text()
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    spans = {n: _statement_span(tree, lines, n) for n in names}
    missing = [n for n, s in spans.items() if s is None]
    if missing:
        if len(missing) == len(names):
            log.log(logging.INFO if dst_path.exists() else logging.WARNING, "extract %s: not defined in %s: passed over", names, src)
            return
        raise SystemExit(f"extract: {missing} not defined at top level of {src}")
    copy_spans = [s for s in (_statement_span(tree, lines, c) for c in copies) if s is not None]
    blocks = ["".join(lines[a:b]).rstrip() + "\n" for a, b in sorted([*copy_spans, *(s for s in spans.values() if s)])]
    body = "\n\n".join(blocks)
    defined_here = _top_level_names(tree)
    imports = _imports_for(tree, _used_names(body))
    leaked = (_used_names(body) & defined_here) - set(names) - set(copies)
    if leaked:
        raise SystemExit(f"extract {names} from {src}: they need {sorted(leaked)}, defined there; add them to the copies")
    all_list = ", ".join(f'"{n}"' for n in sorted(names))
    new_text = f'"""{doc}"""\n\nfrom __future__ import annotations\n\n' + "\n".join(imports)
    new_text += f"\n\n__all__ = [{all_list}]\n\n\n" + body
    if dst_path.exists():
        raise SystemExit(f"extract: {dst} exists but {names} are still in {src}; resolve by hand")
    # the source without the moved blocks, importing them back where it still names them
    keep = [True] * len(lines)
    for s in spans.values():
        assert s is not None
        for i in range(*s):
            keep[i] = False
    rest = "".join(line for line, k in zip(lines, keep, strict=True) if k)
    rest = _drop_from_all(rest, names)
    rest = re.sub(r"\n{4,}", "\n\n\n", rest)
    still = sorted(n for n in names if n in _used_names(_strip_all(rest)))
    if still:
        rest = _add_import(rest, f"from {dotted(dst)} import {', '.join(still)}")
    run.write(dst_path, new_text)
    run.write(src_path, rest)
    if not run.check:
        run.git("add", dst)
    log.info("extract %s: %s -> %s", names, src, dst)


def _top_level_names(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return out


def _strip_all(text: str) -> str:
    """The module without its `__all__` assignment (so a name only listed there is not counted as used)."""
    return re.sub(r"__all__\s*=\s*\[[^\]]*\]", "", text)


def _add_import(text: str, statement: str) -> str:
    """`text` with `statement` after its last top-level import (ruff sorts it afterwards)."""
    tree = ast.parse(text)
    last = 0
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            last = node.end_lineno or node.lineno
    lines = text.splitlines(keepends=True)
    return "".join([*lines[:last], statement + "\n", *lines[last:]])


def rewrite_extracted_imports(run: Run, files: list[Path]) -> None:
    """Point `from <src> import a, Moved` at the new module for the moved names, in every Python file."""
    moved: dict[str, dict[str, str]] = {}
    for src, dst, names, _copies, _doc in EXTRACTS:
        for n in names:
            moved.setdefault(dotted(src), {})[n] = dotted(dst)
    for path in files:
        if path.suffix not in (".py", ".pyi"):
            continue
        text = path.read_text()
        if not any(mod in text for mod in moved):
            continue
        tree = ast.parse(text)
        lines = text.splitlines(keepends=True)
        edits: list[tuple[int, int, str]] = []
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in moved):
                continue
            table = moved[node.module]
            if not any(a.name in table for a in node.names):
                continue
            if path.resolve() == (run.root / _src_of(node.module)).resolve():
                continue
            pad = " " * node.col_offset
            groups: dict[str, list[str]] = {}
            for a in node.names:
                target = table.get(a.name, node.module)
                groups.setdefault(target, []).append(a.name if a.asname is None else f"{a.name} as {a.asname}")
            stmts = [f"{pad}from {mod} import {', '.join(ns)}\n" for mod, ns in groups.items()]
            edits.append((node.lineno - 1, node.end_lineno or node.lineno, "".join(stmts)))
        for start, end, new in sorted(edits, reverse=True):
            lines[start:end] = [new]
        run.write(path, "".join(lines))


def _src_of(module: str) -> str:
    for src, *_ in EXTRACTS:
        if dotted(src) == module:
            return src
    return module


# ---------------------------------------------------------------- 2. moves


def move(run: Run) -> None:
    """git mv every module into its room, creating the rooms' __init__.py first."""
    for pkg, doc in PACKAGES.items():
        init = run.root / pkg / "__init__.py"
        if not init.exists():
            run.write(init, f'"""{doc}"""\n')
            if not run.check:
                run.git("add", str(init.relative_to(run.root)))
    for old, new in MOVES.items():
        src, dst = run.root / old, run.root / new
        if dst.exists() and not src.exists():
            continue
        if not src.exists():
            log.warning("move: %s is not in this tree (removed since the table was written?): passed over", old)
            continue
        if dst.exists():
            raise SystemExit(f"move: both {old} and {new} exist; resolve by hand")
        if run.check:
            run.todo.append(f"git mv {old} {new}")
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        run.git("mv", old, new)
        run.touched.add(dst)
    for pattern, folder in BUILT:
        for built in run.root.glob(pattern):
            if run.check:
                run.todo.append(f"mv {built.relative_to(run.root)} {folder}/")
            else:
                shutil.move(str(built), str(run.root / folder / built.name))


# ---------------------------------------------------------------- 3. rewrites


def rewrite_package_imports(run: Run, files: list[Path]) -> None:
    """`from streams_core.kstream.internals import kstream_processors as kp` -> the module's new package and name."""
    table = module_moves()
    parents = {old.rsplit(".", 1)[0] for old in table}
    for path in files:
        if path.suffix not in (".py", ".pyi"):
            continue
        text = path.read_text()
        if not any(f"from {p} import" in text for p in parents):
            continue
        tree = ast.parse(text)
        lines = text.splitlines(keepends=True)
        edits: list[tuple[int, int, str]] = []
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in parents):
                continue
            if not any(f"{node.module}.{a.name}" in table for a in node.names):
                continue
            pad = " " * node.col_offset
            stmts = []
            for a in node.names:
                new = table.get(f"{node.module}.{a.name}")
                if new is None:
                    stmts.append(f"{pad}from {node.module} import {a.name}" + (f" as {a.asname}" if a.asname else "") + "\n")
                else:
                    parent, name = new.rsplit(".", 1)
                    alias = a.asname or a.name
                    stmts.append(f"{pad}from {parent} import {name}" + (f" as {alias}" if alias != name else "") + "\n")
            edits.append((node.lineno - 1, node.end_lineno or node.lineno, "".join(stmts)))
        for start, end, new_text in sorted(edits, reverse=True):
            lines[start:end] = [new_text]
        run.write(path, "".join(lines))



def scope_files(root: Path) -> list[Path]:
    """Every text file in which the old names are rewritten."""
    me = Path(__file__).resolve()
    out: list[Path] = []
    for d in SCOPE_DIRS:
        for p in sorted((root / d).rglob("*")):
            if p.is_file() and p.suffix in TEXT_SUFFIXES and not (SKIP_PARTS & set(p.parts)) and p.resolve() != me:
                out.append(p)
    out.extend(root / f for f in SCOPE_FILES if (root / f).exists())
    return out


def prose_substitutions() -> list[tuple[re.Pattern[str], str]]:
    """In Markdown only: a module named without the package (`runtime.stream_task`); in code that could be an attribute."""
    subs = []
    for old, new in module_moves().items():
        short_old, short_new = old.removeprefix(PKG + "."), new.removeprefix(PKG + ".")
        subs.append((re.compile(rf"(?<![\w.]){re.escape(short_old)}(?![\w(])"), short_new))
    return subs


def substitutions() -> list[tuple[re.Pattern[str], str]]:
    """The regular expressions that put the new names in place of the old, longest first."""
    subs: list[tuple[str, str]] = []
    for old, new in module_moves().items():
        subs.append((rf"(?<![\w.]){re.escape(old)}(?!\w)", new))
    for old, new in MOVES.items():
        subs.append((rf"(?<![\w/.]){re.escape(old)}(?!\w)", new))
        short_old, short_new = old.removeprefix(PKG + "/"), new.removeprefix(PKG + "/")
        subs.append((rf"(?<![\w/.]){re.escape(short_old)}(?!\w)", short_new))  # `runtime/stream_task.py` in docs
    # a dotted ext-module name: streams_core.runtime._murmur2
    subs.append((rf"(?<![\w.]){PKG}\.runtime\._murmur2(?!\w)", f"{PKG}.common._murmur2"))
    subs.append((r"(?<![\w.])runtime\._murmur2(?!\w)", "common._murmur2"))
    for old, new in TEXT_FIXES.items():
        subs.append((re.escape(old), new))
    subs.sort(key=lambda s: -len(s[0]))
    # identifiers last, once every path that holds one (runtime/run_mode.py) has its new name
    subs += [(rf"(?<![A-Za-z0-9]){re.escape(old)}(?![A-Za-z0-9])", new) for old, new in RENAMES.items()]
    return [(re.compile(p), r) for p, r in subs]


def rewrite_names(run: Run, files: list[Path]) -> None:
    subs = substitutions()
    for path in files:
        if not path.exists():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        new = text
        for pattern, repl in subs:
            new = pattern.sub(repl, new)
        if path.suffix == ".md":
            for pattern, repl in prose_substitutions():
                new = pattern.sub(repl, new)
        run.write(path, new)


# ---------------------------------------------------------------- 4. tidy


def tidy(run: Run) -> None:
    """Sort and prune the imports of the Python files this run touched (ruff I001 and F401, both safe fixes)."""
    py = sorted(str(p) for p in run.touched if p.suffix == ".py" and p.exists())
    if not py:
        return
    ruff = run.root / ".venv" / "bin" / "ruff"
    cmd = [str(ruff) if ruff.exists() else "ruff", "check", "--fix", "--select", "I001,F401", "--quiet", *py]
    subprocess.run(cmd, cwd=run.root, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; list what is left to do, exit 1 if anything")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root (default: the current folder)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    run = Run(root=args.root.resolve(), check=args.check)
    for src, dst, names, copies, doc in EXTRACTS:
        extract(run, src, dst, names, copies, doc)
    files = scope_files(run.root)
    rewrite_extracted_imports(run, files)
    move(run)
    files = scope_files(run.root)
    rewrite_package_imports(run, files)
    rewrite_names(run, files)
    tidy(run)
    for stray in sorted((run.root / PKG / "runtime").glob("*.py")):
        if stray.stem not in RUNTIME_ROOT:
            log.warning("runtime/%s has no room yet: add it to MOVES", stray.name)
    if run.check:
        for line in run.todo:
            print(line)
        sys.exit(1 if run.todo else 0)
    log.info("touched %d files; review with `git status`, then ruff, mypy and the tests", len(run.touched))


if __name__ == "__main__":
    main()
