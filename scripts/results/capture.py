"""Captures real tool results from the reference MCP servers into tests/fixtures/results/.

usage: python scripts/results/capture.py OUT_DIR
env:   ONLY (comma-separated servers to capture; default all), FS_BIN, MEMORY_BIN, EVERYTHING_BIN (npm .bin paths), GIT_BIN, TIME_BIN, SQLITE_BIN, FETCH_BIN
       (PyPI console scripts), REPO (a local git repository to read; default: this one).
Every call is one tools/call; the saved file is {"server", "tool", "arguments", "result"} with
the result exactly as the server sent it (the SDK's model dumped by alias, unset fields left out).
"""
import asyncio, http.server, json, os, shutil, socketserver, sys, tempfile, threading
from mcp import Client, StdioServerParameters

OUT = sys.argv[1]
REPO = os.environ.get("REPO", os.getcwd())


def server(cmd, *args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return StdioServerParameters(command=cmd, args=list(args), env=e)


ONLY = set(filter(None, os.environ.get("ONLY", "").split(",")))


def pod_list_yaml():
    """Eight pods as `kubectl get pods -o yaml` prints a v1 List (keys sorted, sequences not
    indented under their key, timestamps quoted), with the fields of the Kubernetes API's Pod
    reference this corpus keeps: metadata, the node, the status phase, IP and start."""
    lines = ["apiVersion: v1", "items:"]
    for i in range(8):
        app, phase = ("shop", "web")[i % 2], ("Running", "Running", "Pending", "Running")[i % 4]
        started = f'"2026-12-07T09:{10 + 3 * i:02d}:0{i}Z"'
        lines += [
            "- apiVersion: v1", "  kind: Pod", "  metadata:", f"    creationTimestamp: {started}",
            "    labels:", f"      app: {app}", f"      tier: {('frontend', 'backend')[i % 2]}",
            f"    name: {app}-7d4b9c{i}-x{i * 7 % 10}k{i}q", "    namespace: default", "  spec:",
            f"    nodeName: node-{i % 3 + 1}", "  status:", f"    phase: {phase}",
            f"    podIP: 10.244.{i % 3 + 1}.{12 + i}", f"    startTime: {started}",
        ]
    lines += ["kind: List", "metadata:", '  resourceVersion: ""']
    return "\n".join(lines) + "\n"


async def capture(name, params, calls):
    if ONLY and name not in ONLY:
        return
    async with Client(params, mode="legacy") as client:
        for tool, arguments, label in calls:
            res = await client.call_tool(tool, arguments)
            dumped = res.model_dump(by_alias=True, exclude_none=True, mode="json")
            dumped.pop("_meta", None)
            dumped.pop("resultType", None)  # the SDK model's default, not sent by these servers
            path = os.path.join(OUT, f"{name}__{label or tool}.json")
            with open(path, "w") as f:
                json.dump({"server": name, "tool": tool, "arguments": arguments, "result": dumped}, f, indent=1, ensure_ascii=False)
                f.write("\n")
            size = sum(len(c.get("text", "")) for c in dumped.get("content", []))
            print(f"{name}/{tool} ({label}): {size} chars", flush=True)


def serve_dir(directory):
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=directory, **k)
    httpd = socketserver.TCPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


async def main():
    os.makedirs(OUT, exist_ok=True)
    work = tempfile.mkdtemp()
    # filesystem: this repository's own sources, read only.
    await capture("filesystem", server(os.environ["FS_BIN"], REPO), [
        ("list_directory_with_sizes", {"path": f"{REPO}/src/layer/budget"}, None),
        ("directory_tree", {"path": f"{REPO}/src/results"}, None),
        ("search_files", {"path": f"{REPO}/src", "pattern": "*tests.rs"}, None),
        ("get_file_info", {"path": f"{REPO}/Cargo.toml"}, None),
        ("read_text_file", {"path": f"{REPO}/Cargo.toml", "head": 40}, None),
    ])
    # git: the same repository.
    await capture("git", server(os.environ["GIT_BIN"], "--repository", REPO), [
        ("git_log", {"repo_path": REPO, "max_count": 15}, None),
        ("git_status", {"repo_path": REPO}, None),
        ("git_show", {"repo_path": REPO, "revision": "HEAD~3"}, None),
        ("git_branch", {"repo_path": REPO, "branch_type": "local"}, None),
    ])
    # memory: a small graph, then reads of it.
    mem = os.path.join(work, "memory.jsonl")
    people = [("Ada Lovelace", "person", ["wrote the first program", "born 1815"]),
              ("Charles Babbage", "person", ["designed the Analytical Engine", "born 1791"]),
              ("Analytical Engine", "machine", ["mechanical general-purpose computer", "never completed"]),
              ("Grace Hopper", "person", ["wrote the first compiler", "born 1906", "rear admiral"]),
              ("COBOL", "language", ["designed 1959", "business oriented"]),
              ("Linus Torvalds", "person", ["wrote Linux", "wrote git", "born 1969"]),
              ("git", "tool", ["distributed version control", "first release 2005"])]
    entities = [{"name": n, "entityType": t, "observations": o} for n, t, o in people]
    relations = [{"from": "Ada Lovelace", "to": "Analytical Engine", "relationType": "programmed"},
                 {"from": "Charles Babbage", "to": "Analytical Engine", "relationType": "designed"},
                 {"from": "Grace Hopper", "to": "COBOL", "relationType": "influenced"},
                 {"from": "Linus Torvalds", "to": "git", "relationType": "created"}]
    await capture("memory", server(os.environ["MEMORY_BIN"], env={"MEMORY_FILE_PATH": mem}), [
        ("create_entities", {"entities": entities}, None),
        ("create_relations", {"relations": relations}, None),
        ("read_graph", {}, None),
        ("search_nodes", {"query": "born"}, None),
    ])
    # sqlite: a table of orders, queried.
    db = os.path.join(work, "shop.db")
    rows = ",".join(f"({i}, 'customer {i % 7}', '{['widget','gadget','sprocket'][i % 3]}', {i % 5 + 1}, {round(2.5 * (i % 9) + 1, 2)})" for i in range(1, 41))
    await capture("sqlite", server(os.environ["SQLITE_BIN"], "--db-path", db), [
        ("create_table", {"query": "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, product TEXT, quantity INTEGER, price REAL)"}, None),
        ("write_query", {"query": f"INSERT INTO orders VALUES {rows}"}, None),
        ("read_query", {"query": "SELECT * FROM orders"}, None),
        ("describe_table", {"table_name": "orders"}, None),
        ("list_tables", {}, None),
    ])
    # time.
    await capture("time", server(os.environ["TIME_BIN"], "--local-timezone", "UTC"), [
        ("get_current_time", {"timezone": "Europe/Paris"}, None),
        ("convert_time", {"source_timezone": "America/New_York", "time": "16:30", "target_timezone": "Asia/Tokyo"}, None),
    ])
    # everything.
    await capture("everything", server(os.environ["EVERYTHING_BIN"]), [
        ("get-structured-content", {"location": "New York"}, None),
        ("get-sum", {"a": 2, "b": 40}, None),
        ("get-resource-links", {"count": 5}, None),
        ("echo", {"message": "hello from the corpus"}, None),
    ])
    # fetch: a local HTTP server with a JSON document, a page and a YAML document.
    site = os.path.join(work, "site")
    os.makedirs(site)
    with open(os.path.join(site, "releases.json"), "w") as f:
        json.dump([{"tag": f"v0.{i}.0", "date": f"2026-{(i % 12) + 1:02d}-15", "downloads": 1000 + 37 * i, "prerelease": i % 4 == 0} for i in range(1, 26)], f, indent=2)
    shutil.copy(os.path.join(REPO, "README.md"), os.path.join(site, "README.md"))
    with open(os.path.join(site, "pods.yaml"), "w") as f:
        f.write(pod_list_yaml())
    httpd = serve_dir(site)
    port = httpd.server_address[1]
    await capture("fetch", server(os.environ["FETCH_BIN"], "--ignore-robots-txt", "--allow-private-ips"), [
        ("fetch", {"url": f"http://127.0.0.1:{port}/releases.json", "raw": True, "max_length": 20000}, "fetch_json"),
        ("fetch", {"url": f"http://127.0.0.1:{port}/README.md", "raw": True, "max_length": 6000}, "fetch_text"),
        ("fetch", {"url": f"http://127.0.0.1:{port}/pods.yaml", "raw": True, "max_length": 20000}, "fetch_yaml"),
    ])
    httpd.shutdown()
    shutil.rmtree(work)


asyncio.run(main())
