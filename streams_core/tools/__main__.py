"""`python -m streams_core.tools <tool> ...`: the tools of streams_core (today: `reset`)."""

from __future__ import annotations

import sys

from streams_core.tools.application_reset import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m streams_core.tools reset [options]   (reset --help for the options)")
        sys.exit(0 if args else 2)
    if args[0] != "reset":
        print(f"unknown tool {args[0]!r}: the tools are: reset", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(args[1:]))
