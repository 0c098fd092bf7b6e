#!/usr/bin/env python3
"""An HTTP/1.1 proxy for remote-bundle tests and benchmarks: sits between
encfs-mount and a real server (nginx) on 127.0.0.1 and injects faults.

Usage: fault-proxy.py LISTEN_PORT UPSTREAM_PORT PORT_FILE
(LISTEN_PORT 0 picks a free port, written to PORT_FILE once listening).

Control requests go to the proxy itself, never upstream:
  GET /__proxy/set?mode=M&count=N&...   faults for the next N requests
                                        (count omitted: until changed)
  GET /__proxy/stats                    {"requests", "bytes", "auth_seen",
                                        "connections", "stalled",
                                        "stall_ends"}
  GET /__proxy/reset                    counters to zero, mode pass
Modes: pass, latency (ms=), rate (bytes_per_second=), stall (after= body
bytes, then nothing), reset (after= bytes of the response, then close),
short (full Content-Length, half the body, close), status (code=,
retry_after=), full200 (drop the Range header: the server sends 200),
flip (every=N: flip one bit of every Nth body byte: damage on the way),
etag (value=V: the object looks replaced: responses carry ETag V, a request
whose If-Match is not V gets 412, unless ignore_if_match=1: a server that
ignores If-Match), noetag (responses carry no ETag),
claim (size=N: a liar: the object claims N bytes in Content-Range and in
the bundle header's payload and index lengths, unauthenticated fields;
ranges past the real object get 64 KiB of zeros, then the connection is
closed).
Parameters combine: latency_ms= and bytes_per_second= apply to any mode;
skip=N lets N requests pass before the fault starts.
require_auth=VALUE answers 401 to requests without that Authorization.
"bytes" counts response body bytes sent to clients (what a mount transfers);
"connections" the client connections that carried a request since the reset
(at most --connections of one mount's daemon, kept alive); "stalled" the
connections held in a stall now, which the client has not closed (not reset);
"stall_ends" when the client closed each stalled connection since the reset
(monotonic seconds).
Standard library only; one upstream connection per request; bodies are
relayed as they arrive (latency and bandwidth apply per piece).
"""
import asyncio
import json
import sys
import time
import urllib.parse

state = {"mode": "pass", "count": None, "params": {}, "requests": 0, "bytes": 0, "auth_seen": 0,
         "require_auth": None, "latency_ms": 0, "bytes_per_second": 0, "used": set(), "stalled": 0,
         "stall_ends": []}


def current_fault():
    """The fault for this request, consuming one of `count`."""
    mode, params = state["mode"], dict(state["params"])
    skip = int(params.get("skip", "0"))
    if skip > 0:  # this many requests pass first
        state["params"]["skip"] = str(skip - 1)
        return "pass", {}
    if state["count"] is not None:
        state["count"] -= 1
        if state["count"] <= 0:
            state["mode"], state["count"], state["params"] = "pass", None, {}
    return mode, params


async def read_head(reader):
    data = await reader.readuntil(b"\r\n\r\n")
    lines = data.decode("latin-1").split("\r\n")
    return lines[0], [l for l in lines[1:] if l]


async def send_body(writer, body, rate):
    if rate <= 0:
        writer.write(body)
        await writer.drain()
        state["bytes"] += len(body)
        return
    step = max(1, rate // 20)
    for i in range(0, len(body), step):
        piece = body[i:i + step]
        writer.write(piece)
        await writer.drain()
        state["bytes"] += len(piece)
        await asyncio.sleep(len(piece) / rate)


def claim_header(body, claimed):
    """The bundle header at the start of `body` with its payload and index
    lengths (little-endian u64 at 40 and 56, the index offset at 48)
    grown so that the bundle claims `claimed` bytes."""
    body = bytearray(body)
    header_length = int.from_bytes(body[12:16], "little")
    payload = claimed - header_length
    index_offset = int.from_bytes(body[48:56], "little")
    body[40:48] = payload.to_bytes(8, "little")
    body[56:64] = (payload - index_offset).to_bytes(8, "little")
    return bytes(body)


async def send_claimed_past_end(writer, headers, claimed):
    """206 for a range past the real object: a few zeros, then nothing."""
    wanted = next((h.split("=", 1)[1] for h in headers if h.lower().startswith("range:")), "0-0")
    first, _, last = wanted.partition("-")
    first, last = int(first), min(int(last or claimed - 1), claimed - 1)
    writer.write(("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %d-%d/%d\r\nContent-Length: %d\r\n\r\n"
                  % (first, last, claimed, last - first + 1)).encode())
    writer.write(bytes(min(1 << 16, last - first + 1)))
    await writer.drain()
    writer.transport.abort()


def control(target, writer):
    parsed = urllib.parse.urlsplit(target)
    query = dict(urllib.parse.parse_qsl(parsed.query))
    if parsed.path == "/__proxy/set":
        state["mode"] = query.pop("mode", "pass")
        count = query.pop("count", None)
        state["count"] = int(count) if count else None
        for key in ("latency_ms", "bytes_per_second"):
            if key in query:
                state[key] = int(query.pop(key))
        if "require_auth" in query:
            state["require_auth"] = query.pop("require_auth")
        state["params"] = query
    elif parsed.path == "/__proxy/reset":
        state.update(mode="pass", count=None, params={}, requests=0, bytes=0, auth_seen=0,
                     latency_ms=0, bytes_per_second=0, used=set(), stall_ends=[])
    body = json.dumps(dict({k: state[k] for k in ("requests", "bytes", "auth_seen", "mode", "stalled", "stall_ends")},
                           connections=len(state["used"]))).encode()
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


async def upstream_open(port, request_line, headers):
    """Sends the request upstream; returns its status line, headers, body
    length and the stream the body follows on."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write((request_line + "\r\n" + "".join(h + "\r\n" for h in headers) + "Connection: close\r\n\r\n").encode("latin-1"))
    await writer.drain()
    status_line, response_headers = await read_head(reader)
    length = next((int(h.split(":", 1)[1]) for h in response_headers if h.lower().startswith("content-length:")), None)
    return status_line, response_headers, length, reader, writer


async def relay_body(upstream, writer, length, limit, rate):
    """Copies up to `limit` of the `length` body bytes as they arrive."""
    sent = 0
    while sent < min(length, limit):
        piece = await upstream.read(min(1 << 16, min(length, limit) - sent))
        if not piece:
            break
        await send_body(writer, piece, rate)
        sent += len(piece)
    return sent


async def handle(reader, writer, upstream):
    try:
        while True:
            try:
                request_line, headers = await read_head(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            target = request_line.split(" ")[1]
            if target.startswith("/__proxy/"):
                control(target, writer)
                await writer.drain()
                continue
            state["requests"] += 1
            state["used"].add(id(writer))
            auth = [h.split(":", 1)[1].strip() for h in headers if h.lower().startswith("authorization:")]
            if state["require_auth"] is not None:
                if auth != [state["require_auth"]]:
                    writer.write(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
                    await writer.drain()
                    continue
                state["auth_seen"] += 1
            mode, params = current_fault()
            if state["latency_ms"]:
                await asyncio.sleep(state["latency_ms"] / 1000)
            if mode == "status":
                code = int(params.get("code", "503"))
                extra = "Retry-After: %s\r\n" % params["retry_after"] if "retry_after" in params else ""
                writer.write(("HTTP/1.1 %d Fault\r\n%sContent-Length: 0\r\n\r\n" % (code, extra)).encode())
                await writer.drain()
                continue
            if mode == "etag":
                changed = params.get("value", '"changed"')
                matched = [h.split(":", 1)[1].strip() for h in headers if h.lower().startswith("if-match:")]
                if matched and matched != [changed] and params.get("ignore_if_match") != "1":
                    writer.write(b"HTTP/1.1 412 Precondition Failed\r\nContent-Length: 0\r\n\r\n")
                    await writer.drain()
                    continue
            forwarded = [h for h in headers if not h.lower().startswith(("connection:", "keep-alive:"))]
            if mode in ("etag", "noetag"):  # the server's own ETag would not match
                forwarded = [h for h in forwarded if not h.lower().startswith("if-match:")]
            if mode == "full200":
                forwarded = [h for h in forwarded if not h.lower().startswith(("range:", "if-match:"))]
            try:
                status_line, response_headers, length, upstream_reader, upstream_writer = await upstream_open(
                    upstream, request_line, forwarded)
            except (ConnectionError, OSError, asyncio.IncompleteReadError):
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                continue
            if length is None:  # not from nginx for a GET; read to the end
                body = await upstream_reader.read()
                length, upstream_reader = len(body), asyncio.StreamReader()
                upstream_reader.feed_data(body)
                upstream_reader.feed_eof()
            if mode == "claim":
                claimed = int(params["size"])
                if " 416 " in status_line + " ":
                    upstream_writer.close()
                    await send_claimed_past_end(writer, headers, claimed)
                    return
                body = await upstream_reader.readexactly(length)
                if any(h.lower().startswith("content-range: bytes 0-") for h in response_headers):
                    body = claim_header(body, claimed)
                upstream_reader = asyncio.StreamReader()
                upstream_reader.feed_data(body)
                upstream_reader.feed_eof()
                response_headers = [("Content-Range: " + h.split(":", 1)[1].strip().rsplit("/", 1)[0] + "/%d" % claimed)
                                    if h.lower().startswith("content-range:") else h for h in response_headers]
            kept = [h for h in response_headers if not h.lower().startswith(("connection:", "keep-alive:", "content-length:"))]
            if mode in ("etag", "noetag"):
                kept = [h for h in kept if not h.lower().startswith("etag:")]
                if mode == "etag":
                    kept.append("ETag: " + params.get("value", '"changed"'))
            head = status_line + "\r\n" + "".join(h + "\r\n" for h in kept) + "Content-Length: %d\r\n\r\n" % length
            writer.write(head.encode("latin-1"))
            rate = state["bytes_per_second"]
            try:
                if mode in ("stall", "reset"):
                    await relay_body(upstream_reader, writer, length, int(params.get("after", "1024")), rate)
                    if mode == "stall":
                        state["stalled"] += 1
                        try:
                            await reader.read()  # until the client gives up
                        finally:
                            state["stalled"] -= 1
                            state["stall_ends"].append(round(time.monotonic(), 4))
                    else:
                        writer.transport.abort()
                    return
                if mode == "short":
                    await relay_body(upstream_reader, writer, length, length // 2, rate)
                    writer.close()
                    return
                if mode == "flip":
                    body = bytearray(await upstream_reader.readexactly(length))
                    for i in range(0, length, int(params.get("every", "4096"))):
                        body[i] ^= 0x01
                    await send_body(writer, bytes(body), rate)
                    continue
                if await relay_body(upstream_reader, writer, length, length, rate) < length:
                    writer.transport.abort()  # upstream died: the client sees a short body
                    return
            finally:
                upstream_writer.close()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        if not writer.is_closing():
            writer.close()


async def main():
    listen, upstream, port_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    server = await asyncio.start_server(lambda r, w: handle(r, w, upstream), "127.0.0.1", listen)
    port = server.sockets[0].getsockname()[1]
    with open(port_file + ".tmp", "w") as f:
        f.write(str(port))
    import os
    os.rename(port_file + ".tmp", port_file)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
