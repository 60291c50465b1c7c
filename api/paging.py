"""Scans of `all` and `range` in pages, read in short time slices.

A page is the entries after a cursor key (exclusive), in serialized-key order, up to a limit;
the answer names the next cursor in `X-Next-After` when more entries follow: the key as the
`after` parameter takes it, percent-encoded (UTF-8) where it has `%`, spaces, control or
non-ASCII characters, which a header cannot carry as they are. Reading and
rendering yield the event loop every `SLICE_S`, so a large scan delays record processing and
other queries by a few milliseconds at most: the store iterators stay valid across the pause
(they snapshot or page by key), and a store closed meanwhile ends the scan with a 503.
"""

from __future__ import annotations

import asyncio
import json
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from time import perf_counter
from typing import Any
from urllib.parse import quote

from streams_core.common.store import KeyValue

__all__ = ["NEXT_AFTER_HEADER", "SLICE_S", "Page", "cursor_header", "read_page"]

NEXT_AFTER_HEADER = "X-Next-After"
SLICE_S = 0.002
"""Longest stretch a scan reads and renders before it yields the event loop."""
_HEADER_SAFE = "".join(c for c in string.punctuation if c != "%")


def cursor_header(key: Any) -> str:
    """The `X-Next-After` of a rendered key: its `after` text (JSON for a non-string key), header-safe.

    Printable ASCII other than `%` stays as it is (so `42` or `hello` read back unchanged); the
    rest is percent-encoded UTF-8, for clients to decode: a raw NUL, newline or non-Latin-1
    character would break the answer (h11 refuses it, starlette cannot encode it).
    """
    text = key if isinstance(key, str) else json.dumps(key, separators=(",", ":"), ensure_ascii=False)
    return quote(text, safe=_HEADER_SAFE)


@dataclass(slots=True)
class Page:
    """Rendered entries of one page, whether more follow, and the JSON text of the entries."""

    entries: list[dict[str, Any]]
    more: bool

    @property
    def next_after(self) -> Any:
        """The cursor of the next page (the last key of this one), or None at the end."""
        return self.entries[-1]["key"] if self.more and self.entries else None

    def json(self) -> bytes:
        return json.dumps(self.entries, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


async def read_page(
    entries: Iterator[KeyValue[Any, Any]],
    render: Callable[[KeyValue[Any, Any]], dict[str, Any]],
    *,
    limit: int | None,
    after: bytes | None = None,
    key_bytes: Callable[[Any], bytes] | None = None,
) -> Page:
    """Up to `limit` entries of `entries` whose key sorts after `after` (serialized by `key_bytes`).

    `entries` should start at the cursor (a range from it), so that only equal keys are skipped.
    """
    page: list[dict[str, Any]] = []
    skipping = after is not None and key_bytes is not None
    started = perf_counter()
    for entry in entries:
        if skipping:
            assert key_bytes is not None and after is not None
            if key_bytes(entry.key) <= after:
                continue
            skipping = False
        if limit is not None and len(page) >= limit:
            return Page(page, True)
        page.append(render(entry))
        if perf_counter() - started >= SLICE_S:
            await asyncio.sleep(0)
            started = perf_counter()
    return Page(page, False)
