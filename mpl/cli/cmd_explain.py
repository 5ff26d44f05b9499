"""``mplc explain CODE``: the long explanation of a diagnostic code (the same text as its
section of docs/diagnostics.md). An unknown code lists the known ones and exits with 2
(a usage error)."""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    p.add_argument("code", metavar="CODE", help="a diagnostic code such as MPL102 (or 102)")


def run(args) -> int:
    from mpl.diagnostic_docs import normalize_code, section
    from mpl.rules import CODES

    code = normalize_code(args.code)
    if code not in CODES:
        print(f"mplc explain: unknown code '{args.code}'; known codes: {', '.join(CODES)}",
              file=sys.stderr)
        return 2
    print(section(code))
    return 0
