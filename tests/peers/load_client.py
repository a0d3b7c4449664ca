"""Load/fault client for tests/scaleout.rs and scripts/load-scaleout.sh: CLIENTS concurrent
2025-era sessions over raw HTTP (httpx2), each calling a tool again and again until told to stop,
and counting what became of every call.

usage: load_client.py <url>
env:   CLIENTS (default 200), TOOL (default e__get-sum, called with {"a": client, "b": n}),
       CALL_TIMEOUT seconds (default 30), PAUSE_MS between one client's calls (default 20),
       MAX_SECS (default 120: stop on its own after that long)
stdin: a line ("stop") ends the run: every client finishes its call in flight, ends its session
       with DELETE and the report is printed.
Prints {"event": "running", ...} once every session is open, then one JSON object last: calls,
answered (exactly one correct result), errored (an error answer, an HTTP error status or a
failed connection, by kind), lost (no answer and no error: a timeout, or a 2xx whose body ends
without the answer), duplicated (more than one answer for one id), wrong (an answer that is not
the sum), sessions, init_failures, latency percentiles of answered calls (ms), calls_per_sec.
"""
import asyncio
import json
import os
import sys
import time
from collections import Counter

import httpx2

ACCEPT = "application/json, text/event-stream"


def messages(response_text, content_type):
    """The JSON-RPC messages of a response body: one JSON object, or SSE `data:` events."""
    if "text/event-stream" in content_type:
        out, data = [], []
        for line in response_text.splitlines() + [""]:
            if line.startswith("data:"):
                data.append(line[5:].lstrip())
            elif line == "" and data:
                try:
                    out.append(json.loads("\n".join(data)))
                except ValueError:
                    pass
                data = []
        return out
    try:
        parsed = json.loads(response_text)
    except ValueError:
        return []
    return parsed if isinstance(parsed, list) else [parsed]


def error_kind(status, text):
    try:
        body = json.loads(text)
        kind = (body.get("error") or {}).get("data", {}).get("type")
    except (ValueError, AttributeError):
        kind = None
    return f"http {status}" + (f" {kind}" if kind else "")


class Tally:
    def __init__(self):
        self.calls = 0
        self.answered = 0
        self.errored = Counter()
        self.lost = Counter()
        self.duplicated = 0
        self.wrong = 0
        self.latencies = []
        self.sessions = 0
        self.init_failures = Counter()


async def post(http, url, body, session=None):
    headers = {"accept": ACCEPT, "content-type": "application/json"}
    if session:
        headers["mcp-session-id"] = session
    return await http.post(url, content=json.dumps(body), headers=headers)


async def open_session(http, url, n, tally):
    for attempt in range(5):
        try:
            resp = await post(http, url, {
                "jsonrpc": "2.0", "id": f"init-{n}", "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "load-client", "version": "0"}},
            })
            session = resp.headers.get("mcp-session-id")
            if resp.status_code == 200 and session:
                await post(http, url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
                return session
            tally.init_failures[error_kind(resp.status_code, resp.text)] += 1
        except httpx2.HTTPError as err:
            tally.init_failures[type(err).__name__] += 1
        await asyncio.sleep(0.2 * (attempt + 1))
    return None


async def call(http, url, session, n, i, tool, tally):
    rid = f"{n}-{i}"
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": tool, "arguments": {"a": n, "b": i}}}
    tally.calls += 1
    started = time.monotonic()
    try:
        resp = await post(http, url, body, session)
    except httpx2.TimeoutException:
        tally.lost["timeout"] += 1
        return
    except httpx2.HTTPError as err:
        tally.errored[f"connection {type(err).__name__}"] += 1
        return
    answers = [m for m in messages(resp.text, resp.headers.get("content-type", "")) if m.get("id") == rid]
    if len(answers) > 1:
        tally.duplicated += 1
    if not answers:
        if resp.status_code >= 400:
            tally.errored[error_kind(resp.status_code, resp.text)] += 1
        else:
            tally.lost[f"http {resp.status_code} without the answer"] += 1
        return
    answer = answers[0]
    if "error" in answer:
        kind = (answer["error"].get("data") or {}).get("type") or str(answer["error"].get("code"))
        tally.errored[kind] += 1
        return
    result = answer.get("result") or {}
    text = " ".join(c.get("text", "") for c in result.get("content", []))
    if result.get("isError"):
        tally.errored["tool isError"] += 1
    elif str(n + i) in text:
        tally.answered += 1
        tally.latencies.append(1000 * (time.monotonic() - started))
    else:
        tally.wrong += 1


async def one_client(url, n, tool, pause, timeout, tally, opened, stop):
    # Started over a second or two rather than all at once: a burst of connects is not the point.
    await asyncio.sleep(n * 0.01 % 2)
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(timeout)) as http:
        session = await open_session(http, url, n, tally)
        opened.release()
        if session is None:
            return
        tally.sessions += 1
        i = 0
        while not stop.is_set():
            i += 1
            await call(http, url, session, n, i, tool, tally)
            await asyncio.sleep(pause)
        try:
            await http.delete(url, headers={"mcp-session-id": session})
        except httpx2.HTTPError:
            pass


async def main():
    url = sys.argv[1]
    clients = int(os.environ.get("CLIENTS", "200"))
    tool = os.environ.get("TOOL", "e__get-sum")
    timeout = float(os.environ.get("CALL_TIMEOUT", "30"))
    pause = float(os.environ.get("PAUSE_MS", "20")) / 1000
    max_secs = float(os.environ.get("MAX_SECS", "120"))
    tally, stop, opened = Tally(), asyncio.Event(), asyncio.Semaphore(0)
    started = time.monotonic()
    tasks = [asyncio.create_task(one_client(url, n, tool, pause, timeout, tally, opened, stop))
             for n in range(1, clients + 1)]
    for _ in range(clients):
        await opened.acquire()
    print(json.dumps({"event": "running", "sessions": tally.sessions,
                      "init_failures": dict(tally.init_failures)}), flush=True)
    running = time.monotonic()
    loop = asyncio.get_running_loop()
    reader = loop.run_in_executor(None, sys.stdin.readline)
    await asyncio.wait([reader], timeout=max(1.0, max_secs - (running - started)))
    stop.set()
    await asyncio.gather(*tasks)
    elapsed = time.monotonic() - running
    lat = sorted(tally.latencies)
    pct = lambda p: round(lat[min(len(lat) - 1, int(p * len(lat)))], 1) if lat else None
    print(json.dumps({
        "clients": clients, "sessions": tally.sessions, "init_failures": dict(tally.init_failures),
        "calls": tally.calls, "answered": tally.answered, "errored": sum(tally.errored.values()),
        "errors": dict(tally.errored), "lost": sum(tally.lost.values()), "lost_kinds": dict(tally.lost),
        "duplicated": tally.duplicated, "wrong": tally.wrong,
        "p50_ms": pct(0.5), "p99_ms": pct(0.99), "secs": round(elapsed, 1),
        "calls_per_sec": round(tally.calls / elapsed, 1) if elapsed else None,
    }), flush=True)
    os._exit(0)  # the stdin reader thread may still wait for a line


asyncio.run(main())
