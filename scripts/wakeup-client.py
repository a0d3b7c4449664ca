"""Sequential HTTP POSTs of a tools/call to an MCP server (bench_echo), p50/p90 latency.

usage: wakeup-client.py PORT [CALLS]
Used by `scripts/bench-gateway.sh wakeup` to show what a machine charges for waking a task on
another CPU: the same client and server, on one CPU and on two.
"""
import socket
import sys
import time

port, calls = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3000
sock = socket.create_connection(("127.0.0.1", port))
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
reader = sock.makefile("rb")


def post(body: bytes) -> None:
    head = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    sock.sendall(head + body)
    length = 0
    while True:
        line = reader.readline()
        if line in (b"\r\n", b""):
            break
        if line.lower().startswith(b"content-length"):
            length = int(line.split(b":")[1])
    reader.read(length)


times = []
for i in range(calls):
    body = (
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",'
        b'"params":{"name":"echo","arguments":{"message":"hi"}}}' % i
    )
    start = time.perf_counter()
    post(body)
    times.append(time.perf_counter() - start)
times = sorted(times[calls // 5 :])
print(f"p50 {times[len(times) // 2] * 1e3:.4f} ms  p90 {times[int(len(times) * 0.9)] * 1e3:.4f} ms")
