"""``mplc explain [CODE]``: the long explanation of a diagnostic code (the same text as its
section of docs/diagnostics.md); without a code, every code with its severity, group and
title. An unknown code lists the known ones and exits with 2 (a usage error)."""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    p.add_argument("code", metavar="CODE", nargs="?",
                   help="a diagnostic code such as MPL102 (or 102); without one, list every code")


def listing() -> str:
    """Every code, one line each: code, severity, group, title (docs/diagnostics.md's table)."""
    from mpl.rules import CODES

    rows = [(c, r.severity.value, r.group, r.title) for c, r in CODES.items()]
    w = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [f"{c:<{w[0]}}  {sev:<{w[1]}}  {grp:<{w[2]}}  {title}" for c, sev, grp, title in rows]
    lines.append("")
    lines.append(f"{len(rows)} codes; 'mplc explain CODE' explains one, with a wrong and a fixed example")
    return "\n".join(lines)


def run(args) -> int:
    from mpl.diagnostic_docs import normalize_code, section
    from mpl.rules import CODES

    if args.code is None:
        print(listing())
        return 0
    code = normalize_code(args.code)
    if code not in CODES:
        print(f"mplc explain: error: unknown code '{args.code}'; known codes: {', '.join(CODES)} "
              f"('mplc explain' lists them with their titles)", file=sys.stderr)
        return 2
    print(section(code))
    return 0
