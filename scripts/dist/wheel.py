#!/usr/bin/env python3
"""The PyPI wheel `mcp-budget-gateway` around a built gateway binary (binary-only, no Python
code): BINARY becomes the console command `mcp-budget`, and `mcp-budget-gateway` (the package's
own name, what `uvx mcp-budget-gateway ...` runs) execs it. Written into OUT_DIR; its path is
printed on stdout. scripts/dist.sh --packages runs it on the static binary; tests/it/packaging.rs
on the test build.

Why not maturin: maturin builds the crate itself (another cold release build per wheel); this
packs the binary that was already built and checksummed, as maturin's `bindings = "bin"` wheels
are laid out (the binary in `.data/scripts`, nothing importable). PyPI's `mcp-budget` is an
unrelated project, hence the name.

usage: scripts/dist/wheel.py BINARY OUT_DIR
"""
import base64
import hashlib
import pathlib
import re
import sys
import zipfile

NAME = "mcp-budget-gateway"
DIST = "mcp_budget_gateway"
# A static musl binary runs on any x86_64 Linux: glibc (manylinux) and musl (Alpine) hosts.
TAGS = ["py3-none-manylinux_2_17_x86_64", "py3-none-manylinux2014_x86_64", "py3-none-musllinux_1_1_x86_64"]
# The wheel's file times (zip cannot store times before 1980): the same bytes for the same input.
EPOCH = (1980, 1, 1, 0, 0, 0)
SHIM = b'#!/bin/sh\n# The package\'s own name for the gateway: runs the mcp-budget binary beside it.\nexec "$(dirname "$(readlink -f "$0")")/mcp-budget" "$@"\n'
ROOT = pathlib.Path(__file__).resolve().parents[2]


def metadata(version: str) -> bytes:
    readme = (ROOT / "packaging/pypi/README.md").read_text()
    head = [
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {version}",
        "Summary: A token-budget gateway for the Model Context Protocol: the prebuilt mcp-budget binary (no Rust needed)",
        "License: MIT OR Apache-2.0",
        "Keywords: mcp,llm,gateway,tokens,mcp-compressor",
        "Classifier: Operating System :: POSIX :: Linux",
        "Classifier: Environment :: Console",
        "Description-Content-Type: text/markdown",
    ]
    return ("\n".join(head) + "\n\n" + readme).encode()


def wheel_file() -> bytes:
    lines = ["Wheel-Version: 1.0", "Generator: mcp-budget scripts/dist/wheel.py", "Root-Is-Purelib: false"]
    return ("\n".join(lines + [f"Tag: {t}" for t in TAGS]) + "\n").encode()


def record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def write(zf: zipfile.ZipFile, path: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(path, date_time=EPOCH)
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: scripts/dist/wheel.py BINARY OUT_DIR")
    binary = pathlib.Path(sys.argv[1]).read_bytes()
    out = pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    version = re.search(r'(?m)^version = "([^"]+)"$', (ROOT / "Cargo.toml").read_text()).group(1)
    info = f"{DIST}-{version}.dist-info"
    scripts = f"{DIST}-{version}.data/scripts"
    files = [
        (f"{scripts}/mcp-budget", binary, 0o755),
        (f"{scripts}/{NAME}", SHIM, 0o755),
        (f"{info}/METADATA", metadata(version), 0o644),
        (f"{info}/WHEEL", wheel_file(), 0o644),
    ]
    platform = ".".join(t.split("-", 2)[2] for t in TAGS)
    path = out / f"{DIST}-{version}-py3-none-{platform}.whl"
    with zipfile.ZipFile(path, "w", compresslevel=6) as zf:
        for name, data, mode in files:
            write(zf, name, data, mode)
        record = [record_line(name, data) for name, data, _ in files] + [f"{info}/RECORD,,"]
        write(zf, f"{info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644)
    print(path)


if __name__ == "__main__":
    main()
