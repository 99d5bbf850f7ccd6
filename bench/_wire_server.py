"""A raw-socket SSE server for the wire benchmark, run in its own process.

    python bench/_wire_server.py        # prints the port, serves until stdin closes

Every ``POST`` streams pre-encoded ``chat.completion.chunk`` events as chunked HTTP/1.1
(keep-alive), whatever the request body says. The path chooses the stream:
``/<chunks>/<mode>/v1/chat/completions`` where ``mode`` is ``burst`` (the whole body
in 64 KiB writes, as fast as the socket takes it) or ``paced`` (one event per write,
about 100 µs apart, so the client reads one event at a time). The server does no
per-request encoding, so its cost never shows in the client's CPU time.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time

WRITE = 64 * 1024
GAP_SECONDS = 0.0001
_BASE = {
    "id": "chatcmpl-AbX7kQ2m9TzWcRvN4pLs",
    "object": "chat.completion.chunk",
    "created": 1733312000,
    "model": "bench-model",
    "system_fingerprint": "fp_0ba0d124f1",
}
_cache: dict[int, list[bytes]] = {}


def _event(delta: dict[str, object], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    body = json.dumps({**_BASE, "choices": [choice]}, separators=(",", ":"))
    return b"data: " + body.encode() + b"\n\n"


def events(chunks: int) -> list[bytes]:
    """``chunks`` provider chunks (role, words, finish) and the ``[DONE]`` marker."""
    if chunks not in _cache:
        words = [" The", " weather", " in", " Zürich", " is", " mild", " today", ","]
        body = [_event({"role": "assistant", "content": ""})]
        body += [_event({"content": words[n % len(words)]}) for n in range(chunks - 2)]
        body += [_event({}, "stop"), b"data: [DONE]\n\n"]
        _cache[chunks] = body
    return _cache[chunks]


def _http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _read_request(conn: socket.socket, buffer: bytes) -> tuple[str, bytes] | None:
    while b"\r\n\r\n" not in buffer:
        data = conn.recv(65536)
        if not data:
            return None
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    while len(rest) < length:
        data = conn.recv(65536)
        if not data:
            return None
        rest += data
    return lines[0].split(" ")[1], rest[length:]


def _respond(conn: socket.socket, path: str) -> None:
    parts = path.strip("/").split("/")
    chunks, mode = int(parts[0]), parts[1]
    conn.sendall(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n"
    )
    body = events(chunks)
    if mode == "paced":
        for event in body:
            conn.sendall(_http_chunk(event))
            time.sleep(GAP_SECONDS)
    else:
        data = b"".join(body)
        for start in range(0, len(data), WRITE):
            conn.sendall(_http_chunk(data[start : start + WRITE]))
    conn.sendall(b"0\r\n\r\n")


def _serve(conn: socket.socket) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buffer = b""
    with conn, contextlib.suppress(OSError):
        while True:
            request = _read_request(conn, buffer)
            if request is None:
                return
            path, buffer = request
            _respond(conn, path)


def main() -> None:
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    print(listener.getsockname()[1], flush=True)

    def accept() -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=_serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    sys.stdin.read()  # the parent closes our stdin to stop us


if __name__ == "__main__":
    main()
