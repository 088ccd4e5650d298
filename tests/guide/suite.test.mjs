// A client's test suite against plant-store with Node's own test runner and fetch
// (docs/testing.md); the same tests as suite.py:
//
//     npm install --save-dev plant-store
//     node --test suite.test.mjs
import { after, before, beforeEach, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { start } from "plant-store";

const SEED = fileURLToPath(new URL("seed.json", import.meta.url));
let server, me; // the run's server; the test's principal and its token

before(async () => {
  server = await start({ seedFile: SEED }); // alice and her Monstera
});
after(() => server.stop());
beforeEach(async () => {
  await server.control.reset();
  const principal = `test-${randomUUID().slice(0, 12)}`;
  me = { principal, token: (await server.control.mint(principal)).token };
});

const call = (method, path, token, body) =>
  fetch(server.url + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body && JSON.stringify(body),
  });

test("create, list and events", async () => {
  for (const [id, name] of [[1, "Fern"], [2, "Ivy"]]) {
    assert.equal((await call("POST", "/plants", me.token, { id, name })).status, 200);
  }
  assert.deepEqual(await (await call("GET", "/plants", me.token)).json(), [{ name: "Fern" }, { name: "Ivy" }]);
  const events = await (await call("GET", "/events", me.token)).json();
  assert.deepEqual(events.map((e) => e.seq), [1, 2]);
  const sent = await server.control.journal({ method: "POST", path: "/plants" });
  assert.deepEqual(sent.map((e) => e.status), [200, 200]);
});

test("an answer lost after the commit", async () => {
  await server.control.fault({
    match: { method: "POST", principal: me.principal }, when: "after", action: { kind: "close" }, times: 1,
  });
  await assert.rejects(call("POST", "/plants", me.token, { id: 7, name: "Fern" }), TypeError);
  assert.equal((await call("POST", "/plants", me.token, { id: 7, name: "Fern" })).status, 409);
  assert.deepEqual(await (await call("GET", "/plants", me.token)).json(), [{ name: "Fern" }]);
});

test("snapshot, then restore", async () => {
  const snap = await server.control.snapshot();
  await call("POST", "/plants", me.token, { id: 1, name: "Cactus" });
  await server.control.restore(snap);
  assert.deepEqual(await (await call("GET", "/plants", me.token)).json(), []);
  await server.control.deleteSnapshot(snap);
});

test("a reset brings back the seed", async () => {
  const alice = "alice-token-from-the-seed";
  await call("POST", "/plants", alice, { id: 2, name: "Aloe" });
  await server.control.reset(); // each test begins with one too
  assert.deepEqual(await (await call("GET", "/plants", alice)).json(), [{ name: "Monstera", tag: "tropical" }]);
});

test("the same test seed makes the same tokens", async () => {
  const own = await start({ seedFile: SEED, testSeed: 42 }); // a server of its own
  try {
    const first = (await own.control.mint("p1")).token;
    await own.control.reset();
    assert.equal((await own.control.mint("p1")).token, first);
  } finally {
    await own.stop();
  }
});
