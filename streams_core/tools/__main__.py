"""`python -m streams_core.tools <tool> ...`: the tools of streams_core: `reset`, `topics`, `acls`, `produce`, `consume`."""

from __future__ import annotations

import sys

from streams_core.tools import acls, application_reset, console, topics

TOOLS = {"reset": application_reset.main, "topics": topics.main, "acls": acls.main, "produce": console.main_produce,
         "consume": console.main_consume}  # fmt: skip

if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m streams_core.tools {reset,topics,acls,produce,consume} [options]   (<tool> --help for its options)")
        sys.exit(0 if args else 2)
    if args[0] not in TOOLS:
        print(f"unknown tool {args[0]!r}: the tools are: {', '.join(TOOLS)}", file=sys.stderr)
        sys.exit(2)
    sys.exit(TOOLS[args[0]](args[1:]))
