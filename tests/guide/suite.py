"""A client's test suite against plant-store, with `requests` (docs/testing.md).

    python3 suite.py [PROGRAM ...]    # default: plant-store (on PATH)
"""
import os, subprocess, sys, uuid
from concurrent.futures import ThreadPoolExecutor
import requests

PROGRAM = sys.argv[1:] or ["plant-store"]
SEED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seed.json")
CONTROL = "control-token-for-tests-0123"


def start_server(*flags):
    """A server on port 0 with test control and the seed; its URL from its first line."""
    env = dict(os.environ, PLANT_STORE_CONTROL_TOKEN=CONTROL)
    proc = subprocess.Popen(
        PROGRAM + ["serve", "--addr", "127.0.0.1:0", "--db", ":memory:", "--test-control",
                   "--seed", SEED, "--log-level", "warn", *flags],
        env=env, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # "listening on http://127.0.0.1:PORT"
    assert line.startswith("listening on "), line
    return proc, line.split()[-1]


def control(base, method, path, **kw):
    r = requests.request(method, base + "/_control" + path,
                         headers={"Authorization": "Bearer " + CONTROL}, **kw)
    r.raise_for_status()
    return r


def principal(base, name=None):
    """A principal of the test's own (a token minted at run time): its own plants,
    ids and events, whatever other tests do at the same time."""
    name = name or "t-" + uuid.uuid4().hex[:12]
    token = control(base, "POST", "/tokens", json={"principal": name}).json()["token"]
    return {"Authorization": "Bearer " + token}


def test_create_list_and_events(base):
    who = "t-" + uuid.uuid4().hex[:12]
    me = principal(base, who)
    for i, name in [(1, "Fern"), (2, "Ivy")]:
        assert requests.post(base + "/plants", json={"id": i, "name": name},
                             headers=me).status_code == 200
    assert requests.get(base + "/plants", headers=me).json() == [{"name": "Fern"}, {"name": "Ivy"}]
    events = requests.get(base + "/events", headers=me).json()
    assert [e["seq"] for e in events] == [1, 2]
    # What this client sent, as the server read it (the journal, by its principal).
    sent = control(base, "GET", "/requests", params={"principal": who, "method": "POST"}).json()
    assert [(e["status"], e["body"]) for e in sent] == [
        (200, '{"id": 1, "name": "Fern"}'), (200, '{"id": 2, "name": "Ivy"}')]
    assert ["Content-Type", "application/json"] in sent[0]["headers"]


def test_snapshot_then_restore(base):
    me = principal(base)
    snap = control(base, "POST", "/snapshots").json()["id"]
    requests.post(base + "/plants", json={"id": 1, "name": "Cactus"}, headers=me)
    control(base, "POST", f"/snapshots/{snap}/restore")  # for everyone, as a reset
    assert requests.get(base + "/plants", headers=me).json() == []
    control(base, "DELETE", f"/snapshots/{snap}")


def test_reset_brings_back_the_seed(base):
    alice = {"Authorization": "Bearer alice-token-from-the-seed"}
    requests.post(base + "/plants", json={"id": 2, "name": "Aloe"}, headers=alice)
    control(base, "POST", "/reset")  # for every principal: run such tests alone
    assert requests.get(base + "/plants", headers=alice).json() == [
        {"name": "Monstera", "tag": "tropical"}]


def test_same_seed_same_ids(_base):
    """--test-seed, on a server of its own: minted tokens and ids repeat after a reset,
    and run after run."""
    proc, base = start_server("--test-seed", "42")
    try:
        first = principal(base, "p1")
        control(base, "POST", "/reset")
        assert principal(base, "p1") == first
    finally:
        proc.terminate(); proc.wait()


if __name__ == "__main__":
    proc, base = start_server()
    try:
        # Tests with their own principals run in parallel on one server.
        with ThreadPoolExecutor(8) as pool:
            for f in [pool.submit(test_create_list_and_events, base) for _ in range(16)]:
                f.result()
        # A restore or a reset is the whole store's: those tests run alone.
        for test in [test_snapshot_then_restore, test_reset_brings_back_the_seed,
                     test_same_seed_same_ids]:
            test(base)
        print("ok: the guide's suite passed")
    finally:
        proc.terminate(); proc.wait()
