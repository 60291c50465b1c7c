"""Shipping a topology to another Python process: cloudpickle, without the processors built so far.

User code in a topology (lambdas, closures, classes in `__main__`) goes by value, as PySpark ships
its functions; modules importable in the receiver go by reference. Used by the Spark runner (to
its executors) and by an instance's stream-thread worker processes.

The processors a topology built so far stay behind (`NewProcessors` forgets them when pickled).
Serdes hold precompiled `struct.Struct`s, which pickle cannot copy: they are rebuilt from their format.
"""

from __future__ import annotations

import copyreg
import io
import pickle
import struct
from typing import Any

import cloudpickle

__all__ = ["load", "ship"]


def _reduce_struct(packer: struct.Struct) -> tuple[Any, tuple[str]]:
    return struct.Struct, (packer.format,)


copyreg.pickle(struct.Struct, _reduce_struct)


def ship(obj: Any) -> bytes:
    """`obj` (a topology, or a value holding one) as bytes another process can `load`."""
    buffer = io.BytesIO()
    cloudpickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def load(payload: bytes) -> Any:
    """What `ship` sent (cloudpickle's output is a plain pickle: cloudpickle need only be importable)."""
    return pickle.loads(payload)
