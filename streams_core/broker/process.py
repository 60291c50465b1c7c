"""The local broker's JVM child process: free ports, dying with the parent, signals, log excerpts."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
from pathlib import Path

__all__ = ["HOST", "bindable", "first_errors", "free_port", "preexec_child", "signal_group", "tail"]

HOST = "127.0.0.1"
_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    """Ask the kernel for a free TCP port on 127.0.0.1 (released at once; tiny race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def bindable(port: int | None) -> bool:
    """True if ``port`` on 127.0.0.1 can be bound now (after the JVM died: nobody else has it)."""
    if port is None:
        return True
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def tail(path: Path, lines: int = 40) -> str:
    """The last lines of a text file, or a note that it is missing/empty."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"({path} does not exist)"
    if not text.strip():
        return f"({path} is empty)"
    return "\n".join(text.splitlines()[-lines:])


def first_errors(path: Path, limit: int = 6) -> str:
    """The first ERROR/FATAL log entries (each with its exception line): usually the cause."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    entries: list[str] = []
    for i, line in enumerate(lines):
        if "] ERROR " in line or "] FATAL " in line:
            entry = line
            if i + 1 < len(lines) and not lines[i + 1].startswith("["):
                entry += "\n    " + lines[i + 1]
            entries.append(entry)
            if len(entries) == limit:
                break
    return "\n".join(entries)


def preexec_child() -> None:
    """In the forked child: die with the parent (PDEATHSIG) and leave its process group."""
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        os._exit(127)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    os.setpgid(0, 0)


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the JVM's process group (the JVM leads it); a no-op once it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)
