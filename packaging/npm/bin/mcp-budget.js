#!/usr/bin/env node
// The `mcp-budget` command of the npm package: runs the gateway binary the package carries for
// this platform with the same arguments. stdin, stdout and stderr are inherited, so MCP's stdio
// flows between the host and the gateway directly, not through node; the signals a host sends
// are passed on, and the gateway's exit code (or the signal that ended it) is this process's.
"use strict";
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

// node's platform-arch -> the Rust target whose binary the package carries.
const TARGETS = { "linux-x64": "x86_64-unknown-linux-musl" };

const key = `${process.platform}-${process.arch}`;
const target = TARGETS[key];
const binary = target && path.join(__dirname, "..", "vendor", target, "mcp-budget");
if (!binary || !fs.existsSync(binary)) {
  console.error(
    `mcp-budget: this package has no binary for ${key} (it carries ${Object.keys(TARGETS).join(", ")}); ` +
      "build from source instead: cargo install mcp-budget",
  );
  process.exit(1);
}

const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });
const forwarded = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"];
for (const signal of forwarded) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (err) => {
  console.error(`mcp-budget: cannot run ${binary}: ${err.message}`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    // Ended by a signal: end the same way, with node's own handler out of the way.
    for (const s of forwarded) process.removeAllListeners(s);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
