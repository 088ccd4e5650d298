// plant-store for a client's test suite in Node (18 or later; no dependencies): the
// binary of this platform (`binary()`), a server of the test run's own (`start()`), and
// its test control (`Control`, the Python package's methods in camelCase).

import { spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { createRequire } from "node:module";
import { randomBytes } from "node:crypto";

/** A binary of your own (a cargo build, another version) instead of the installed one. */
export const BINARY_VAR = "PLANT_STORE_BIN";
/** The platforms with a binary, and the optional dependency that holds each. */
export const PLATFORMS = {
  "linux-x64": "@plant-store/linux-x64",
  "linux-arm64": "@plant-store/linux-arm64",
  "linux-arm": "@plant-store/linux-arm",
  "linux-riscv64": "@plant-store/linux-riscv64",
};
/** How long `start()` waits for the server's `listening on` line. */
export const START_TIMEOUT_MS = 30_000;
/** How long `stop()` lets the server stop (its drain is 10 s at most by default); then it is killed. */
export const STOP_TIMEOUT_MS = 15_000;
/** Lines of the server's standard error kept, for `log()` and for errors. */
export const LOG_LINES = 200;

const require = createRequire(import.meta.url);

/** The path of the `plant-store` binary: `$PLANT_STORE_BIN` when set, else this platform's package's. */
export function binary() {
  const own = process.env[BINARY_VAR];
  if (own) {
    try {
      accessSync(own, constants.X_OK);
    } catch {
      throw new Error(`${BINARY_VAR}=${own} is no executable file`);
    }
    return own;
  }
  const platform = `${process.platform}-${process.arch}`;
  const pkg = PLATFORMS[platform];
  if (!pkg) {
    throw new Error(
      `no plant-store binary for ${platform}: there are binaries for ${Object.keys(PLATFORMS).join(", ")}; ` +
        `set ${BINARY_VAR} to a binary of your own`,
    );
  }
  try {
    return require.resolve(`${pkg}/bin/plant-store`);
  } catch {
    throw new Error(
      `${pkg}, the plant-store binary for ${platform}, is not installed ` +
        `(an install with --omit=optional or --no-optional leaves it out); set ${BINARY_VAR} to a binary of your own`,
    );
  }
}

/** A control request the server refused: its status and the server's message. */
export class ControlError extends Error {
  constructor(method, path, status, message) {
    super(`${method} ${path}: ${status} ${message}`);
    this.name = "ControlError";
    this.status = status;
    this.serverMessage = message;
  }
}

/** A DURATION as the control JSON takes it: "90s", "2h", or a number of seconds. */
function duration(value) {
  return typeof value === "number" ? `${value}s` : value;
}

/** An RFC 3339 time: a string as is, or a Date. */
function time(value) {
  return value instanceof Date ? value.toISOString() : value;
}

/** The members that were given (not undefined or null). */
function present(members) {
  return Object.fromEntries(Object.entries(members).filter(([, v]) => v !== undefined && v !== null));
}

/** The control surface of the server at `url` (http://HOST:PORT), with its control token. */
export class Control {
  #url;
  #token;

  constructor(url, token) {
    this.#url = url.replace(/\/$/, "");
    this.#token = token;
  }

  get url() {
    return this.#url;
  }

  async #call(method, path, body, query) {
    let target = `/_control${path}`;
    const params = query ? new URLSearchParams(present(query)).toString() : "";
    if (params) target += `?${params}`;
    const headers = { Authorization: `Bearer ${this.#token}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const answer = await fetch(this.#url + target, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await answer.text();
    if (!answer.ok) {
      let message = text;
      try {
        message = JSON.parse(text).message;
      } catch {}
      throw new ControlError(method, target, answer.status, message);
    }
    return text ? JSON.parse(text) : null;
  }

  /** The store as it was when the server began listening; faults, snapshots, the journal and the clock cleared. */
  async reset() {
    await this.#call("POST", "/reset");
  }

  /** A snapshot of the whole store; its id. */
  async snapshot() {
    return (await this.#call("POST", "/snapshots")).id;
  }

  async restore(id) {
    await this.#call("POST", `/snapshots/${encodeURIComponent(id)}/restore`);
  }

  async deleteSnapshot(id) {
    await this.#call("DELETE", `/snapshots/${encodeURIComponent(id)}`);
  }

  /** A token for `principal`: the 201 body ({token, principal, scope, expires_at, and id where the server gives it}). */
  async mint(principal, { scope = "read-write", expires_in, expires_at, token } = {}) {
    const body = present({
      principal,
      scope,
      expires_in: expires_in == null ? undefined : duration(expires_in),
      expires_at: expires_at == null ? undefined : time(expires_at),
      token,
    });
    return this.#call("POST", "/tokens", body);
  }

  /** Adds a fault; the fault as stored (with its id). `when` is sent only when it is not the server's default, "before". */
  async fault({ match, action, when = "before", times, probability, seed } = {}) {
    const body = present({ match, action, when: when === "before" ? undefined : when, times, probability, seed });
    return this.#call("POST", "/faults", body);
  }

  /** The faults in order, each with hits and remaining. */
  async faults() {
    return this.#call("GET", "/faults");
  }

  async removeFault(id) {
    await this.#call("DELETE", `/faults/${encodeURIComponent(id)}`);
  }

  async clearFaults() {
    await this.#call("DELETE", "/faults");
  }

  /** The requests answered, oldest first; `filters` are the query's parameters (method, path, principal, status, after, limit, wait, min). */
  async journal(filters = {}) {
    const query = { ...filters };
    if (query.wait !== undefined) query.wait = duration(query.wait);
    return this.#call("GET", "/requests", undefined, query);
  }

  async clearJournal() {
    await this.#call("DELETE", "/requests");
  }

  /** {now, frozen} */
  async clock() {
    return this.#call("GET", "/clock");
  }

  /** The server's clock reads `now` (RFC 3339, or a Date) from here on, and stays there when `frozen`. */
  async setClock(now, { frozen = false } = {}) {
    return this.#call("PUT", "/clock", { now: time(now), frozen });
  }

  /** Moves the clock on by a DURATION ("2h", or a number of seconds). */
  async advanceClock(by) {
    return this.#call("POST", "/clock/advance", { by: duration(by) });
  }

  /** The real clock again. */
  async realClock() {
    await this.#call("DELETE", "/clock");
  }
}

/** A running server of `start()`'s: url, control, pid, log(), stop(). */
class Server {
  #child;
  #log;
  #exited;

  constructor(child, url, control, log, exited) {
    this.#child = child;
    this.url = url;
    this.control = control;
    this.#log = log;
    this.#exited = exited;
  }

  get pid() {
    return this.#child.pid;
  }

  /** The last lines the server wrote on standard error. */
  log() {
    return this.#log.join("");
  }

  /** Stops the server as SIGTERM does (requests in flight are answered); its exit code. */
  async stop() {
    const child = this.#child;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const late = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
      await this.#exited;
      clearTimeout(late);
    }
    child.stdin.destroy();
    return child.exitCode;
  }

  async [Symbol.asyncDispose ?? Symbol.for("Symbol.asyncDispose")]() {
    await this.stop();
  }
}

/**
 * Starts a server with test control on (a random control token) on 127.0.0.1 and a port of
 * its own; resolves once it listens. Options: db (":memory:"), seedFile, testSeed, token
 * (PLANT_STORE_TOKEN), args (more serve flags; the log level is warn unless they say otherwise).
 * The environment's PLANT_STORE_* variables are not passed on. The server ends with this
 * process however it ends: it holds the server's standard input (--exit-on-stdin-close).
 */
export async function start({ db = ":memory:", seedFile, testSeed, token, args = [] } = {}) {
  const controlToken = randomBytes(32).toString("base64url");
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("PLANT_STORE_")));
  env.PLANT_STORE_CONTROL_TOKEN = controlToken;
  if (token != null) env.PLANT_STORE_TOKEN = token;
  const argv = ["serve", "--addr", "127.0.0.1:0", "--db", String(db)];
  argv.push("--test-control", "--exit-on-stdin-close", "--log-level", "warn");
  if (seedFile != null) argv.push("--seed", String(seedFile));
  if (testSeed != null) argv.push("--test-seed", String(testSeed));
  argv.push(...args.map(String));
  // Its own process group: a Ctrl-C at the terminal reaches the test run, which stops it.
  const child = spawn(binary(), argv, { env, stdio: ["pipe", "pipe", "pipe"], detached: true });
  const log = [];
  let partial = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk) => {
    const lines = (partial + chunk).split(/(?<=\n)/);
    partial = lines.at(-1).endsWith("\n") ? "" : lines.pop();
    log.push(...lines);
    log.splice(0, Math.max(0, log.length - LOG_LINES));
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const url = await new Promise((resolve, reject) => {
    let out = "";
    const fail = (why) => {
      clearTimeout(late);
      child.kill("SIGKILL");
      exited.then(() => reject(new Error(`${why}:\n${log.join("")}${partial}`)));
    };
    const late = setTimeout(() => fail(`plant-store printed no listening line within ${START_TIMEOUT_MS} ms`), START_TIMEOUT_MS);
    // The binary could not be run at all: no exit follows.
    child.once("error", (e) => {
      clearTimeout(late);
      reject(new Error(`cannot run plant-store: ${e.message}`));
    });
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", function first(chunk) {
      out += chunk;
      if (!out.includes("\n")) return;
      child.stdout.off("data", first);
      child.stdout.resume(); // read on, and drop what comes
      clearTimeout(late);
      const line = out.split("\n")[0];
      if (line.startsWith("listening on http://")) resolve(line.split(" ").at(-1));
      else fail(`plant-store did not start: ${line}`);
    });
    child.stdout.once("end", () => {
      if (!out.includes("\n")) {
        clearTimeout(late);
        exited.then((code) => reject(new Error(`plant-store did not start (exit code ${code}):\n${log.join("")}${partial}`)));
      }
    });
  });
  // Neither the server nor its pipes keep this process alive: when it ends, the server ends.
  child.unref();
  for (const pipe of [child.stdin, child.stdout, child.stderr]) pipe.unref?.();
  return new Server(child, url, new Control(url, controlToken), log, exited);
}
