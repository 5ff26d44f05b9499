"""An adapt log (``stats()["adapt_log"]``: one entry per action of a firing, SPEC §5) as
text lines, the same in every report: ``mplc replay``, ``mplc run`` (HuggingFace and vLLM),
``mplc demo`` and a replay report printed from Python. Standard library only: the replayer,
the CLI and the vLLM adapter all read it.
"""

from __future__ import annotations


def entry(e: dict) -> str:
    """One adapt firing as a line: ``step 3, access 412: rule 0 (line 5) set cache.eviction:
    lfu -> lru`` (a trigger: ``... fired trigger ttl``)."""
    where = f"step {e.get('step')}, access {e.get('access')}"
    rule = str(e.get("rule", "?"))
    rule = f"rule {rule[4:]}" if rule.startswith("rule") and rule[4:].isdigit() else rule
    if e.get("line"):
        rule += f" (line {e['line']})"
    if e.get("key") == "trigger":
        return f"{where}: {rule} fired trigger {e.get('new')}"
    return f"{where}: {rule} set {e.get('key')}: {e.get('old')} -> {e.get('new')}"


def lines(log: list, limit: int = 5) -> list[str]:
    """The adapt log of a run as text: how many firings, then the first ``limit`` of them,
    one per line (the rest counted)."""
    if not log:
        return []
    n = len(log)
    out = [f"adapt firings {n}:" if n > 1 else "adapt firing:"]
    out += [f"  {entry(e)}" for e in log[:limit]]
    if n > limit:
        out.append(f"  ... and {n - limit} more (--json lists every firing)")
    return out
