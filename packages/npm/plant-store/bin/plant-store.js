#!/usr/bin/env node
// The `plant-store` command: runs this platform's binary with the same arguments, signals
// and exit status; on a platform without one, names those it has.
import { spawn } from "node:child_process";
import { binary } from "../index.js";

let path;
try {
  path = binary();
} catch (e) {
  process.stderr.write(`plant-store: ${e.message}\n`);
  process.exit(1);
}
const child = spawn(path, process.argv.slice(2), { stdio: "inherit" });
const forward = (signal) => child.kill(signal);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, forward);
child.on("error", (e) => {
  process.stderr.write(`plant-store: cannot run ${path}: ${e.message}\n`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code);
  }
});
