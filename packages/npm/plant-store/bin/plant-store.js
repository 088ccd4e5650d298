#!/usr/bin/env node
// The `plant-store` command: runs this platform's binary with the same arguments, signals
// and exit status; on a platform without one, names those it has. The binary's standard
// input is a pipe that only this process holds, with PLANT_STORE_EXIT_ON_STDIN_CLOSE=1
// (read by `serve` alone; no command reads standard input): however this process ends,
// SIGKILL included, a server it started stops with it. Asked for
// `--exit-on-stdin-close` (the flag or the variable), the binary gets this process's own
// standard input, to stop when that closes.
import { spawn } from "node:child_process";
import { binary } from "../index.js";

const STDIN_VAR = "PLANT_STORE_EXIT_ON_STDIN_CLOSE";
const STDIN_FLAG = "--exit-on-stdin-close";

let path;
try {
  path = binary();
} catch (e) {
  process.stderr.write(`plant-store: ${e.message}\n`);
  process.exit(1);
}
const args = process.argv.slice(2);
const own = process.env[STDIN_VAR] !== undefined ||
  args.some((a) => a === STDIN_FLAG || a.startsWith(`${STDIN_FLAG}=`));
const child = own
  ? spawn(path, args, { stdio: "inherit" })
  : spawn(path, args, { stdio: ["pipe", "inherit", "inherit"], env: { ...process.env, [STDIN_VAR]: "1" } });
child.stdin?.on("error", () => {}); // never written to
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
