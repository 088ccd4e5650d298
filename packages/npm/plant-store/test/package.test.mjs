// The npm package's own tests: start(), Control and the launcher against the real binary
// (this platform's package's, or PLANT_STORE_BIN). Run where `plant-store` resolves: the
// package installed from its tarballs (.ci/run), or the source tree (tests/it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, readdirSync, writeFileSync, mkdtempSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { inspect } from "node:util";
import { Control, ControlError, PLATFORMS, start } from "plant-store";

const require = createRequire(import.meta.url);
const launcher = join(dirname(require.resolve("plant-store/package.json")), "bin", "plant-store.js");
const SEED = { tokens: [{ token: "alice-token-from-the-seed", principal: "alice" }],
  plants: { alice: [{ id: 1, name: "Monstera", tag: "tropical" }] } };

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(")").at(-1).trim()[0] !== "Z";
  } catch {
    return false;
  }
};
async function eventually(ms, ready) {
  const deadline = Date.now() + ms;
  while (!(await ready())) {
    assert.ok(Date.now() < deadline, `not so within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
/** The server's control token, read from its environment as the kernel shows it. */
const controlTokenOf = (pid) =>
  readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")
    .find((v) => v.startsWith("PLANT_STORE_CONTROL_TOKEN=")).split("=")[1];
const get = async (url, token) => {
  const answer = await fetch(url, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  return [answer.status, await answer.json()];
};

test("a server listens on a free port and stops", async () => {
  const server = await start();
  assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.deepEqual(await get(server.url + "/healthz"), [200, { status: "ok" }]);
  assert.ok(alive(server.pid));
  assert.equal(await server.stop(), 0);
  assert.ok(!alive(server.pid));
  assert.equal(await server.stop(), 0); // stopped once
});

test("control tokens are random per server and never shown", async () => {
  const [a, b] = await Promise.all([start({ args: ["--log-level", "debug"] }), start()]);
  try {
    const [ta, tb] = [controlTokenOf(a.pid), controlTokenOf(b.pid)];
    assert.notEqual(ta, tb);
    assert.ok(ta.length >= 32);
    await a.control.mint("someone");
    for (const shown of [inspect(a, { showHidden: true }), JSON.stringify(a), inspect(a.control), a.log()]) {
      assert.ok(!shown.includes(ta), shown);
    }
    await assert.rejects(new Control(a.url, tb).reset(), (e) => e instanceof ControlError && e.status === 401);
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
});

test("a server that cannot start says why", async () => {
  await assert.rejects(start({ seedFile: "/nonexistent/seed.json" }), /exit code 2[\s\S]*\/nonexistent\/seed\.json/);
});

test("control has a method per route", async () => {
  const dir = mkdtempSync(join(tmpdir(), "plant-store-npm-"));
  writeFileSync(join(dir, "seed.json"), JSON.stringify(SEED));
  const server = await start({ seedFile: join(dir, "seed.json") });
  const { control, url } = server;
  const alice = "alice-token-from-the-seed";
  try {
    const minted = await control.mint("ann", { scope: "read", expires_in: "1h" });
    assert.deepEqual([minted.principal, minted.scope], ["ann", "read"]);
    assert.deepEqual(await get(url + "/plants", minted.token), [200, []]);

    const snap = await control.snapshot();
    await fetch(url + "/plants", { method: "POST", headers: { Authorization: `Bearer ${alice}` },
      body: JSON.stringify({ id: 2, name: "Aloe" }) });
    await control.restore(snap);
    assert.deepEqual(await get(url + "/plants", alice), [200, [{ name: "Monstera", tag: "tropical" }]]);
    await control.deleteSnapshot(snap);
    await assert.rejects(control.restore(snap), (e) => e.status === 404);

    const fault = await control.fault({ match: { path: "/plants", principal: "ann" },
      action: { kind: "status", status: 503, retry_after: 1 }, times: 1 });
    assert.equal(fault.when, "before");
    const truncate = await control.fault({ match: { path: "/events" }, action: { kind: "truncate" } });
    assert.equal(truncate.when, "after"); // sent without `when`, as "before" is the default
    assert.deepEqual((await control.faults()).map((f) => f.id), [fault.id, truncate.id]);
    assert.equal((await fetch(url + "/plants", { headers: { Authorization: `Bearer ${minted.token}` } })).status, 503);
    await control.removeFault(truncate.id);
    assert.deepEqual((await control.faults()).map((f) => f.remaining), [0]);
    await control.clearFaults();
    assert.deepEqual(await control.faults(), []);

    const journal = await control.journal({ principal: "alice", path: "/plants", method: "GET" });
    assert.deepEqual(journal.map((e) => [e.status, e.fault]), [[200, null]]);
    const ann = await control.journal({ principal: "ann" });
    assert.deepEqual(ann.map((e) => [e.status, e.fault]), [[200, null], [503, fault.id]]);
    await control.clearJournal();
    assert.deepEqual(await control.journal(), []);

    assert.equal((await control.clock()).frozen, false);
    assert.deepEqual(await control.setClock(new Date("2030-01-01T00:00:00Z"), { frozen: true }),
      { now: "2030-01-01T00:00:00.000Z", frozen: true });
    assert.equal((await control.advanceClock(90)).now, "2030-01-01T00:01:30.000Z");
    assert.equal((await fetch(url + "/plants", { headers: { Authorization: `Bearer ${minted.token}` } })).status, 401);
    await control.realClock();
    assert.equal((await control.clock()).frozen, false);

    await assert.rejects(control.mint("ann", { scope: "everything" }),
      (e) => e.status === 400 && e.serverMessage.includes("scope"));
  } finally {
    await server.stop();
  }
});

/** Runs node with `code` (an ES module); resolves with its child process once it printed a line. */
function script(code) {
  const child = spawn(process.execPath, ["--input-type=module", "-e", code], {
    cwd: dirname(launcher), stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) resolve([child, out.trim()]);
    });
  });
}

test("a killed process leaves no server behind", async () => {
  const [child, pid] = await script(
    `import { start } from "plant-store"; const s = await start(); console.log(s.pid); setInterval(() => {}, 1000);`);
  assert.ok(alive(Number(pid)));
  child.kill("SIGKILL");
  await eventually(5000, () => !alive(Number(pid)));
});

test("a process that forgets stop() ends, and its server with it", async () => {
  const [child, pid] = await script(`import { start } from "plant-store"; console.log((await start()).pid);`);
  await new Promise((r) => child.once("exit", r));
  await eventually(5000, () => !alive(Number(pid)));
});

/** The processes whose parent is `pid`. */
const childrenOf = (pid) => readdirSync("/proc").filter((d) => /^\d+$/.test(d)).filter((d) => {
  try {
    return readFileSync(`/proc/${d}/stat`, "utf8").split(")").at(-1).trim().split(" ")[1] === String(pid);
  } catch {
    return false;
  }
}).map(Number);

/** `plant-store serve` through the launcher; resolves with it once the server listens. */
function launch(stdio, ...more) {
  const launched = spawn(process.execPath, [launcher, "serve", "--addr", "127.0.0.1:0", "--db", ":memory:", ...more],
    { stdio: [stdio, "pipe", "ignore"] });
  return new Promise((resolve, reject) => {
    let out = "";
    launched.stdout.on("data", (d) => {
      out += d;
      if (out.includes("listening on")) resolve(launched);
    });
    launched.on("exit", (code) => reject(new Error(`the launcher exited (${code}): ${out}`)));
  });
}

test("a launcher killed with SIGKILL leaves no server behind", async () => {
  // Its own standard input is /dev/null: that ends nothing.
  const launched = await launch("ignore");
  const [server] = childrenOf(launched.pid);
  try {
    assert.ok(alive(server));
    launched.kill("SIGKILL");
    await eventually(5000, () => !alive(server));
  } finally {
    if (alive(server)) process.kill(server, "SIGKILL");
  }
});

test("the launcher hands its standard input on when asked for --exit-on-stdin-close", async () => {
  const launched = await launch("pipe", "--exit-on-stdin-close");
  const exited = new Promise((resolve) => launched.once("exit", (code) => resolve(code)));
  launched.stdin.end();
  assert.equal(await exited, 0);
});

test("the launcher runs the binary, and names the platforms it has when none fits", () => {
  const version = spawnSync(process.execPath, [launcher, "--version"], { encoding: "utf8" });
  assert.equal(version.status, 0, version.stderr);
  assert.match(version.stdout, /^plant-store \d+\.\d+\.\d+ \(schema \d+; features: [a-z, -]+\)\n$/);
  const unhealthy = spawnSync(process.execPath, [launcher, "healthcheck", "--addr", "127.0.0.1:1"], { encoding: "utf8" });
  assert.equal(unhealthy.status, 1);
  const env = { ...process.env };
  delete env.PLANT_STORE_BIN;
  const elsewhere = spawnSync(process.execPath, ["--input-type=module", "-e",
    `Object.defineProperty(process, "arch", { value: "mips" }); await import(${JSON.stringify(launcher)});`],
  { encoding: "utf8", env });
  assert.equal(elsewhere.status, 1);
  assert.equal(elsewhere.stderr,
    `plant-store: no plant-store binary for linux-mips: there are binaries for ${Object.keys(PLATFORMS).join(", ")}; ` +
    "set PLANT_STORE_BIN to a binary of your own\n");
});
