"""A client's test suite against plant-store, with `requests` and the plugin that comes
with the plant-store wheel (docs/testing.md):

    pip install plant-store pytest requests
    pytest suite.py            # one server for the run; with pytest-xdist, -n 2: one per worker
"""
import os
import time

import pytest
import requests
from plant_store import Server

SEED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seed.json")


@pytest.fixture(scope="session")
def plant_store_options():
    """The run's server loads the seed: alice and her Monstera."""
    return {"seed_file": SEED}


def auth(token):
    return {"Authorization": "Bearer " + token}


def test_create_list_and_events(plant_store):
    url, me = plant_store.url, auth(plant_store.token)  # a principal of the test's own
    for i, name in [(1, "Fern"), (2, "Ivy")]:
        assert requests.post(url + "/plants", json={"id": i, "name": name},
                             headers=me).status_code == 200
    assert requests.get(url + "/plants", headers=me).json() == [{"name": "Fern"}, {"name": "Ivy"}]
    assert [e["seq"] for e in requests.get(url + "/events", headers=me).json()] == [1, 2]
    # What this client sent, as the server read it (the journal, by its principal).
    sent = plant_store.control.journal(principal=plant_store.principal, method="POST")
    assert [(e["status"], e["body"]) for e in sent] == [
        (200, '{"id": 1, "name": "Fern"}'), (200, '{"id": 2, "name": "Ivy"}')]
    assert ["Content-Type", "application/json"] in sent[0]["headers"]


def test_a_client_retries_through_two_503s(plant_store):
    """Two 503s, then the write goes through; the journal shows the same body sent three
    times, with the same token."""
    url, me = plant_store.url, auth(plant_store.token)
    plant_store.control.fault(match={"method": "POST", "principal": plant_store.principal},
                              action={"kind": "status", "status": 503}, times=2)
    for attempt in range(3):  # the client under test would do this
        r = requests.post(url + "/plants", json={"id": 3, "name": "Fern"}, headers=me)
        if r.status_code != 503:
            break
    assert (r.status_code, attempt) == (200, 2)
    sent = plant_store.control.journal(principal=plant_store.principal, method="POST")
    assert [e["status"] for e in sent] == [503, 503, 200]
    assert len({(e["body"], e["token"]) for e in sent}) == 1


def test_an_answer_lost_after_the_commit(plant_store):
    """The write is committed, then the connection closes unanswered: the retry is 409."""
    url, me = plant_store.url, auth(plant_store.token)
    plant_store.control.fault(match={"method": "POST", "principal": plant_store.principal},
                              when="after", action={"kind": "close"}, times=1)
    with pytest.raises(requests.ConnectionError):
        requests.post(url + "/plants", json={"id": 7, "name": "Fern"}, headers=me)
    assert requests.post(url + "/plants", json={"id": 7, "name": "Fern"},
                         headers=me).status_code == 409
    assert requests.get(url + "/plants", headers=me).json() == [{"name": "Fern"}]
    first, retry = plant_store.control.journal(principal=plant_store.principal, method="POST")
    assert (first["status"], retry["status"]) == (None, 409)  # no answer, then 409
    assert first["body"] == retry["body"]


def test_a_token_expires_on_the_test_clock(plant_store):
    """A token made to last an hour is refused once the server's clock passes it: no wait."""
    url = plant_store.url
    short = plant_store.control.mint(plant_store.principal, expires_in="1h")["token"]
    assert requests.get(url + "/plants", headers=auth(short)).status_code == 200
    plant_store.control.advance_clock("2h")  # a reset before the next test undoes it
    r = requests.get(url + "/plants", headers=auth(short))
    assert r.status_code == 401
    assert 'error="invalid_token"' in r.headers["WWW-Authenticate"]


def test_a_malformed_200_body(plant_store):
    """A well-framed 200 whose body is not the JSON it should be: the parse fails at
    once, and the next answer is whole."""
    url, me = plant_store.url, auth(plant_store.token)
    plant_store.control.fault(match={"method": "GET", "principal": plant_store.principal},
                              action={"kind": "status", "status": 200, "body": '[{"name": '},
                              times=1)
    r = requests.get(url + "/plants", headers=me)
    assert r.status_code == 200
    with pytest.raises(ValueError):
        r.json()
    assert requests.get(url + "/plants", headers=me).json() == []


def test_a_trickled_answer_outlasts_a_read_timeout(plant_store):
    """`requests`' timeout is for each read: an answer that trickles in (8 bytes every
    100 ms) never trips it, however long the whole takes. A deadline is the client's."""
    url, me = plant_store.url, auth(plant_store.token)
    plant_store.control.fault(match={"method": "GET", "principal": plant_store.principal},
                              action={"kind": "trickle", "bytes": 8, "every_ms": 100},
                              times=1)
    started = time.monotonic()
    assert requests.get(url + "/plants", headers=me, timeout=1.0).json() == []
    assert time.monotonic() - started > 1.0  # and no Timeout was raised


def test_snapshot_then_restore(plant_store):
    url, me = plant_store.url, auth(plant_store.token)
    snap = plant_store.control.snapshot()
    requests.post(url + "/plants", json={"id": 1, "name": "Cactus"}, headers=me)
    plant_store.control.restore(snap)
    assert requests.get(url + "/plants", headers=me).json() == []
    plant_store.control.delete_snapshot(snap)


def test_reset_brings_back_the_seed(plant_store):
    url, alice = plant_store.url, auth("alice-token-from-the-seed")
    requests.post(url + "/plants", json={"id": 2, "name": "Aloe"}, headers=alice)
    plant_store.control.reset()  # each test begins with one too
    assert requests.get(url + "/plants", headers=alice).json() == [
        {"name": "Monstera", "tag": "tropical"}]


def test_same_seed_same_tokens():
    """--test-seed, on a server of its own: minted tokens repeat after a reset, and run
    after run."""
    with Server(seed_file=SEED, test_seed=42) as server:
        first = server.control.mint("p1")["token"]
        server.control.reset()
        assert server.control.mint("p1")["token"] == first
