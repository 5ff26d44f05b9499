"""A quiet log in normal use: the server's stderr (which VS Code's output channel shows at
[error]) and its window/logMessage stay free of tracebacks when

* the client shuts the server down (a restart after a settings change, "Restart server")
  while checks are still pending or running: the worker thread must not hand its result to
  the closed event loop ("RuntimeError: Event loop is closed" in every pending check);
* the client closes the pipe without shutdown (the same, through the lost-connection path);
* a rename is refused (a standard-library policy, a bad new name): the user sees the
  message, the log one line at info level.

Each test speaks LSP over stdio to the real server (``python -m lsp.server``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from lsprotocol import types

from lsp_harness import REPO, client, open_doc, pos_of, server_env  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: a file that takes the checker a while (many policies, each with cross-field checks)
SLOW_TEXT = "".join(
    f"policy p{i} {{ cache {{ capacity = {i + 1} eviction = lfu frequency_decay = 0.9 }} "
    f"prefetch {{ strategy = history budget = 1 }} }}\n" for i in range(60))


def _frame(obj) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _messages(stdout: bytes) -> list[dict]:
    """The JSON-RPC messages of a server's stdout."""
    out, rest = [], stdout
    while rest:
        head, sep, rest = rest.partition(b"\r\n\r\n")
        if not sep:
            break
        n = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                 if line.lower().startswith(b"content-length"))
        out.append(json.loads(rest[:n]))
        rest = rest[n:]
    return out


def _run(msgs: list[dict], *, close_stdin_only: bool = False) -> tuple[str, list[dict], int]:
    """Send ``msgs`` at once (so the server is still checking when the last one arrives);
    return (stderr, messages from the server, exit status)."""
    init = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"processId": None, "rootUri": None, "capabilities": {}}},
            {"jsonrpc": "2.0", "method": "initialized", "params": {}}]
    tail = [] if close_stdin_only else [
        {"jsonrpc": "2.0", "id": 999, "method": "shutdown", "params": None},
        {"jsonrpc": "2.0", "method": "exit", "params": None}]
    proc = subprocess.run([sys.executable, "-m", "lsp.server", "--stdio"],
                          input=b"".join(map(_frame, init + msgs + tail)),
                          capture_output=True, env=server_env(), cwd=REPO, timeout=120)
    return proc.stderr.decode(errors="replace"), _messages(proc.stdout), proc.returncode


def _open(uri: str, text: str) -> dict:
    return {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "moe", "version": 1, "text": text}}}


def _log_lines(msgs: list[dict], kind: int | None = None) -> list[str]:
    return [m["params"]["message"] for m in msgs if m.get("method") == "window/logMessage"
            and (kind is None or m["params"]["type"] == kind)]


def _quiet(err: str, msgs: list[dict]) -> None:
    assert "Traceback" not in err and "Event loop is closed" not in err, err[-3000:]
    errors = _log_lines(msgs, types.MessageType.Error.value)
    assert not errors, errors
    assert not [line for line in _log_lines(msgs) if "Traceback" in line]


@pytest.mark.parametrize("files", [1, 7])
async def test_shutdown_with_checks_pending_logs_no_traceback(tmp_path, files):
    """7 files opened and the server shut down at once: before, 7 tracebacks
    ("exception calling callback for <Future ...> ... RuntimeError: Event loop is closed")."""
    msgs = [_open((tmp_path / f"f{i}.moe").as_uri(), SLOW_TEXT) for i in range(files)]
    err, out, rc = await asyncio.to_thread(_run, msgs)
    _quiet(err, out)
    assert rc == 0, err[-2000:]
    assert any(m.get("id") == 999 and "result" in m for m in out), "shutdown was not answered"


async def test_lost_connection_with_checks_pending_logs_no_traceback(tmp_path):
    """The client goes away without shutdown (the pipe closes) while checks run."""
    msgs = [_open((tmp_path / f"g{i}.moe").as_uri(), SLOW_TEXT) for i in range(7)]
    err, out, _rc = await asyncio.to_thread(_run, msgs, close_stdin_only=True)
    _quiet(err, out)


async def test_refused_renames_log_one_line_each_and_no_traceback(tmp_path):
    text = 'import "std/balanced"\npolicy mine extends balanced { cache { capacity = 8 } }\n'
    uri = (tmp_path / "r.moe").as_uri()
    (tmp_path / "r.moe").write_text(text)
    at = {"line": 1, "character": text.splitlines()[1].index("balanced") + 2}
    msgs = [_open(uri, text)]
    for i, new in enumerate(("renamed", "9bad")):
        msgs.append({"jsonrpc": "2.0", "id": 10 + i, "method": "textDocument/rename", "params": {
            "textDocument": {"uri": uri}, "position": at, "newName": new}})
    err, out, rc = await asyncio.to_thread(_run, msgs)
    _quiet(err, out)
    answers = {m["id"]: m for m in out if m.get("id") in (10, 11)}
    assert "standard library" in answers[10]["error"]["message"]
    assert "not a policy name" in answers[11]["error"]["message"]
    refused = [line for line in _log_lines(out) if "refused" in line]
    assert len(refused) == 2 and all("\n" not in line for line in refused), refused
    infos = _log_lines(out, types.MessageType.Info.value)
    assert all(line in infos for line in refused)
    assert rc == 0


async def test_refused_rename_through_a_client_is_one_info_line(client):
    """The same through pytest-lsp's client: the error reaches the client, the log has one
    info line for it and nothing at warning or error level."""
    text = 'import "std/lru_basic"\npolicy mine extends lru_basic { cache { capacity = 8 } }\n'
    uri = open_doc(client, "refused.moe", text)
    client.log_messages.clear()
    at = pos_of(text, "lru_basic {", client.encoding, 2)
    with pytest.raises(Exception, match="standard library"):
        await client.text_document_rename_async(types.RenameParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=at, new_name="mine2"))
    for _ in range(50):
        if any("refused" in m.message for m in client.log_messages):
            break
        await asyncio.sleep(0.05)
    lines = [m for m in client.log_messages if "refused" in m.message]
    assert len(lines) == 1 and lines[0].type == types.MessageType.Info, client.log_messages
    assert not [m for m in client.log_messages
                if m.type in (types.MessageType.Error, types.MessageType.Warning)]
