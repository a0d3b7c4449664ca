"""llama.cpp's OpenAI-compatible server (the `xllamacpp` wheel) on 127.0.0.1, for `mcp-budget eval`.

    tests/peers/.venv-llm/bin/python scripts/eval/llm_server.py MODEL.gguf [--port 0] [--ctx 32768]

Prints one line `listening http://127.0.0.1:PORT` on stdout once it serves
`/v1/chat/completions`, then serves until stdin closes or the process is stopped. Installed by
scripts/eval-model.sh.
"""

import argparse
import json
import os
import socket
import sys
import time
import urllib.request

import xllamacpp as xlc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ctx", type=int, default=32768)
    ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    # llama.cpp's threads busy-wait for work (poll 50 of 100 by default): on a machine shared
    # with builds or a second server that starves everyone; 0 sleeps instead.
    ap.add_argument("--poll", type=int, default=0)
    ap.add_argument("--stay", action="store_true", help="serve until killed, not until stdin closes")
    args = ap.parse_args()
    params = xlc.CommonParams()
    params.model.path = args.model
    params.port = args.port or free_port()
    params.n_ctx = args.ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.cpuparams.poll = args.poll
    params.cpuparams_batch.poll = args.poll
    params.use_jinja = True
    server = xlc.Server(params)
    url = f"http://127.0.0.1:{params.port}"
    print(f"llm_server: {server.listening_address}", file=sys.stderr, flush=True)
    deadline = time.time() + 120
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    break
        except Exception:
            pass
        if time.time() > deadline:
            sys.exit("llm_server: not serving after 120 s")
        time.sleep(0.2)
    print(f"listening {url}", flush=True)
    if args.stay:
        while True:
            time.sleep(3600)
    sys.stdin.read()
    del server


if __name__ == "__main__":
    main()
