"""The offline Python workflow of docs/offload.md, run as a user runs it: the code block as a
script (a tiny model, recording, saving, replaying, printing the report)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _workflow() -> str:
    with open(os.path.join(ROOT, "docs", "offload.md"), encoding="utf-8") as f:
        doc = f.read()
    section = doc.split("## The offline Python workflow", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_documented_workflow_runs_and_prints_the_text_report(tmp_path):
    (tmp_path / "workflow.py").write_text(_workflow())
    r = subprocess.run([sys.executable, "workflow.py"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300,
                       env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("policy balanced on mixtral trace (36 dispatches, 12 steps), hardware rtx-5080\n")
    assert "  hit rate " in out and "  Belady " in out and "per-layer hit rate" in out
    assert "0.00 GB" not in out and "0.0 MiB per expert" not in out     # enough digits
    assert re.search(r"^LRU \d+\.\d\d%, Belady \d+\.\d\d%$", out, re.M)
    assert len(out) < 2000                      # the text form, not the whole data
    assert (tmp_path / "tiny.mpltrace").is_file()


def test_a_report_prints_as_text_and_its_adapt_firings_read_as_lines():
    import mpl
    from mpl.sim import synth

    trace = synth.synthesize("olmoe", steps=20, seed=1)
    policy = mpl.loads("policy p {\n  cache { capacity = 16  eviction = lfu }\n"
                       "  adapt { when hit_rate < 0.9 { eviction = lru } }\n}\n")
    report = policy.replay(trace)
    text = str(report)
    assert text == report.format_text()
    # (when the rule fires is the runtime's; how a firing reads is the report's)
    assert re.search(r"\n  adapt firing:\n    step \d+, access \d+: rule 0 \(line 3\) set "
                     r"cache.eviction: lfu -> lru(\n|$)", text), text
    assert "{'step'" not in text
    assert repr(report).startswith("<ReplayReport p on olmoe-1b-7b: hit rate ")
