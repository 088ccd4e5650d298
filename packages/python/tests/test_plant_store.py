"""The Python package's own tests: `Server`, `Control` and the pytest plugin against the
real binary (`plant_store.binary()`: the wheel's, or `PLANT_STORE_BIN`). Run from the
installed wheel (`.ci/run`) or from the source tree with `-p plant_store.plugin` in
`PYTEST_ADDOPTS` (tests/it/python_package.rs), which the test runs started here inherit."""

import http.client
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import pytest

import plant_store
import plant_store._server
from plant_store import Control, ControlError, Server, ServerError

SEED = {"tokens": [{"token": "alice-token-from-the-seed", "principal": "alice"}],
        "plants": {"alice": [{"id": 1, "name": "Monstera", "tag": "tropical"}]}}


def eventually(within, ready):
    """Polls `ready` every 20 ms until it holds; fails after `within` seconds."""
    deadline = time.monotonic() + within
    while not ready():
        assert time.monotonic() < deadline, "not so within %s s" % within
        time.sleep(0.02)


def alive(pid):
    """Whether `pid` runs (a zombie, ended and waiting to be reaped, does not)."""
    try:
        os.kill(pid, 0)
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def get(url, token=None):
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(request) as answer:
        return answer.status, json.loads(answer.read())


def post(url, token, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={
        "Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        return answer.status


def test_a_server_listens_on_a_free_port_and_stops_on_exit():
    with Server() as server:
        pid = server.pid
        assert server.url.startswith("http://127.0.0.1:")
        assert get(server.url + "/healthz") == (200, {"status": "ok"})
        assert alive(pid)
    assert not alive(pid)
    assert server.stop() is None  # stopped once


def test_two_servers_are_two_and_their_control_tokens_differ_and_stay_unshown():
    with Server(args=("--log-level", "debug")) as a, Server() as b:
        assert a.url != b.url
        assert a.control._token != b.control._token
        assert len(a.control._token) >= 32
        a.control.mint("someone")
        for shown in (repr(a), repr(a.control), a.log(), str(a.__dict__)):
            assert a.control._token not in shown
        # The other server's control token is no key to this one.
        with pytest.raises(ControlError) as refused:
            Control(a.url, b.control._token).reset()
        assert refused.value.status == 401


def test_a_server_that_cannot_start_says_why():
    with pytest.raises(ServerError) as failed:
        Server(seed_file="/nonexistent/seed.json").start()
    assert "exit status 2" in str(failed.value)
    assert "/nonexistent/seed.json" in str(failed.value)


def test_its_output_is_always_read():
    """Every request writes an access-log line (about 65 bytes): a pipe nobody read would
    fill up (64 KiB) and stall the server within about a thousand requests."""
    with Server(args=("--log-level", "info")) as server:
        conn = http.client.HTTPConnection(server.url[len("http://"):], timeout=10)
        for _ in range(2000):
            conn.request("GET", "/healthz")
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 200
        conn.close()
        eventually(5, lambda: "GET /healthz 200" in server.log())


def fake_binary(tmp_path, monkeypatch, body):
    """`PLANT_STORE_BIN`: a Python script that ignores SIGTERM, says it listens, then
    runs `body` (the stops below take 0.5 s, then kill it)."""
    script = tmp_path / "fake-plant-store"
    script.write_text("#!%s\n" % sys.executable + textwrap.dedent("""
        import os, signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    """) + textwrap.dedent(body) + textwrap.dedent("""
        print("listening on http://127.0.0.1:9", flush=True)
        print("a line on standard error", file=sys.stderr, flush=True)
        time.sleep(600)
    """))
    script.chmod(0o755)
    monkeypatch.setenv(plant_store.BINARY_VAR, str(script))
    monkeypatch.setattr(plant_store._server, "STOP_TIMEOUT", 0.5)


def stopped_within(seconds, server):
    """`server.stop()` on a thread of its own: what it returned or raised, or a failure
    when it has not within `seconds`."""
    ended = []

    def stop():
        try:
            ended.append(server.stop())
        except BaseException as e:
            ended.append(e)

    stopping = threading.Thread(target=stop, daemon=True)
    stopping.start()
    stopping.join(seconds)
    assert ended, "stop() has not returned within %s s" % seconds
    return ended[0]


def test_a_stop_never_waits_on_what_else_holds_the_output(tmp_path, monkeypatch):
    """A wrapper named by `PLANT_STORE_BIN` started a process of its own session, which
    holds the output's pipes after the wrapper was killed."""
    held = tmp_path / "held"
    fake_binary(tmp_path, monkeypatch, """
        held = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                start_new_session=True)
        with open(%r, "w") as f:
            f.write(str(held.pid))
    """ % str(held))
    server = Server().start()
    try:
        eventually(5, lambda: "a line on standard error" in server.log())
        assert stopped_within(10, server) == -signal.SIGKILL
        assert server.stop() is None
    finally:
        os.kill(int(held.read_text()), signal.SIGKILL)


def test_a_server_that_a_kill_does_not_end_is_an_error(tmp_path, monkeypatch):
    fake_binary(tmp_path, monkeypatch, "")
    monkeypatch.setattr(plant_store._server, "KILL_TIMEOUT", 0.5, raising=False)
    server = Server().start()
    pid = server.pid
    eventually(5, lambda: "a line on standard error" in server.log())
    # As a process the kill cannot end (one stuck in the kernel) is.
    monkeypatch.setattr(subprocess.Popen, "kill", lambda proc: None)
    try:
        failed = stopped_within(10, server)
        assert isinstance(failed, ServerError), failed
        assert "plant-store (pid %d) did not end within 0.5 s of SIGKILL" % pid in str(failed)
        assert "a line on standard error" in str(failed)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_the_binary_can_be_one_of_your_own(monkeypatch):
    monkeypatch.setenv(plant_store.BINARY_VAR, "/nonexistent/plant-store")
    with pytest.raises(FileNotFoundError) as missing:
        plant_store.binary()
    assert "PLANT_STORE_BIN=/nonexistent/plant-store" in str(missing.value)


def test_control_has_a_method_per_route(tmp_path):
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps(SEED))
    with Server(seed_file=str(seed)) as server:
        control, url = server.control, server.url
        minted = control.mint("ann", scope="read", expires_in="1h")
        assert (minted["principal"], minted["scope"]) == ("ann", "read")
        assert minted["expires_at"].endswith("Z")
        assert get(url + "/plants", minted["token"]) == (200, [])

        snap = control.snapshot()
        assert snap.startswith("snap_")
        post(url + "/plants", "alice-token-from-the-seed", {"id": 2, "name": "Aloe"})
        control.restore(snap)
        assert get(url + "/plants", "alice-token-from-the-seed") == (
            200, [{"name": "Monstera", "tag": "tropical"}])
        control.delete_snapshot(snap)
        with pytest.raises(ControlError) as unknown:
            control.restore(snap)
        assert unknown.value.status == 404

        fault = control.fault(match={"path": "/plants", "principal": "ann"},
                              action={"kind": "status", "status": 503, "retry_after": 1},
                              times=1)
        assert fault["id"].startswith("flt_") and fault["when"] == "before"
        truncate = control.fault(match={"path": "/events"}, action={"kind": "truncate"})
        assert truncate["when"] == "after"  # sent without `when`, as `before` is the default
        assert [f["id"] for f in control.faults()] == [fault["id"], truncate["id"]]
        with pytest.raises(urllib.error.HTTPError) as faulted:
            get(url + "/plants", minted["token"])
        assert faulted.value.code == 503
        control.remove_fault(truncate["id"])
        assert [f["remaining"] for f in control.faults()] == [0]
        control.clear_faults()
        assert control.faults() == []

        journal = control.journal(principal="alice", path="/plants", method="GET")
        assert [(e["status"], e["fault"]) for e in journal] == [(200, None)]
        faulted = control.journal(principal="ann")
        assert [(e["status"], e["fault"]) for e in faulted] == [(200, None), (503, fault["id"])]
        control.clear_journal()
        assert control.journal() == []

        assert control.clock()["frozen"] is False
        frozen = control.set_clock("2030-01-01T00:00:00Z", frozen=True)
        assert frozen == {"now": "2030-01-01T00:00:00.000Z", "frozen": True}
        assert control.advance_clock(90)["now"] == "2030-01-01T00:01:30.000Z"
        # The minted token expired on the moved clock.
        with pytest.raises(urllib.error.HTTPError) as expired:
            get(url + "/plants", minted["token"])
        assert expired.value.code == 401
        control.real_clock()
        assert control.clock()["frozen"] is False

        with pytest.raises(ControlError) as bad:
            control.mint("ann", scope="everything")
        assert bad.value.status == 400 and "scope" in bad.value.message


def inner_run(tmp_path, tests, *args, conftest=None):
    """A test run of its own, in a process of its own, of the test file `tests`."""
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(tests))
    if conftest:
        (tmp_path / "conftest.py").write_text(textwrap.dedent(conftest))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    # SIGINT as a terminal's Ctrl-C finds it: a suite started in the background of a
    # non-interactive shell (`scripts/test &`) inherits it ignored, and Python then
    # never raises KeyboardInterrupt.
    return subprocess.Popen(command + ["test_inner.py"], cwd=str(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


HOLD = """
    import os, time

    def test_hold(plant_store, plant_store_server):
        with open("pid.tmp", "w") as f:
            f.write(str(plant_store_server.pid))
        os.rename("pid.tmp", "pid")
        time.sleep(600)
"""


def server_pid(run_dir, run):
    """The pid of the server that the inner run's session started, once it runs."""
    eventually(30, lambda: (run_dir / "pid").exists() or run.poll() is not None)
    assert run.poll() is None, run.stdout.read().decode()
    return int((run_dir / "pid").read_text())


@pytest.mark.parametrize("workers", [None, "2"])
def test_a_killed_test_run_leaves_no_server_behind(tmp_path, workers):
    if workers:
        pytest.importorskip("xdist")
    run = inner_run(tmp_path, HOLD, *(["-n", workers] if workers else []))
    pid = server_pid(tmp_path, run)
    assert alive(pid)
    run.kill()  # SIGKILL: no teardown runs (with xdist: the controller's)
    run.wait()
    eventually(5, lambda: not alive(pid))


def test_an_interrupted_test_run_stops_its_server(tmp_path):
    run = inner_run(tmp_path, HOLD)
    pid = server_pid(tmp_path, run)
    run.send_signal(signal.SIGINT)  # Ctrl-C
    try:
        out = run.communicate(timeout=60)[0].decode()
    except subprocess.TimeoutExpired:
        # Where each thread of the run is (pytest's faulthandler prints them on SIGABRT).
        run.send_signal(signal.SIGABRT)
        pytest.fail("the interrupted run did not end within 60 s:\n"
                    + run.communicate()[0].decode(errors="replace"))
    assert "KeyboardInterrupt" in out, out
    assert not alive(pid)  # stopped by the session's teardown, before the run ended


def test_the_fixtures_reset_and_give_each_test_a_principal(tmp_path):
    (tmp_path / "seed.json").write_text(json.dumps(SEED))
    tests = """
        import json, os, urllib.request

        def plants(url, token, add=None):
            data = None if add is None else json.dumps(add).encode()
            request = urllib.request.Request(url + "/plants", data=data, headers={
                "Authorization": "Bearer " + token, "Content-Type": "application/json"})
            with urllib.request.urlopen(request) as answer:
                return json.loads(answer.read())

        def test_one(plant_store, plant_store_server):
            assert plant_store.url == plant_store_server.url
            assert plants(plant_store.url, plant_store.token) == []
            plants(plant_store.url, "alice-token-from-the-seed", {"id": 2, "name": "Aloe"})
            plants(plant_store.url, plant_store.token, {"id": 1, "name": "Ivy"})
            with open("principals", "a") as f:
                f.write(plant_store.principal + "\\n")

        def test_two(plant_store):
            # Reset first: the seed's plants only, and the other test's token is gone.
            assert plants(plant_store.url, "alice-token-from-the-seed") == [
                {"name": "Monstera", "tag": "tropical"}]
            assert [e["principal"] for e in plant_store.control.journal()] == ["alice"]
            with open("principals", "a") as f:
                f.write(plant_store.principal + "\\n")

        def test_failing(plant_store, plant_store_server):
            with open("pid", "w") as f:
                f.write(str(plant_store_server.pid))
            assert False, "this test fails"
    """
    conftest = """
        import os, pytest

        @pytest.fixture(scope="session")
        def plant_store_options():
            return {"seed_file": os.path.abspath("seed.json")}
    """
    run = inner_run(tmp_path, tests, conftest=conftest)
    out = run.communicate(timeout=120)[0].decode()
    assert "1 failed, 2 passed" in out, out
    first, second = (tmp_path / "principals").read_text().split()
    assert first != second and first.startswith("test-")
    # A failing run stopped its server too, before it ended.
    assert not alive(int((tmp_path / "pid").read_text()))


def test_noproc_takes_a_server_started_elsewhere(tmp_path, monkeypatch):
    tests = """
        def test_it(plant_store, plant_store_noproc):
            assert plant_store.url == plant_store_noproc.url
            assert plant_store.control.journal() == []
    """
    conftest = """
        import pytest

        @pytest.fixture(scope="session")
        def plant_store_server(plant_store_noproc):
            return plant_store_noproc
    """
    with Server() as server:
        monkeypatch.setenv("PLANT_STORE_URL", server.url)
        monkeypatch.setenv("PLANT_STORE_CONTROL_TOKEN", server.control._token)
        run = inner_run(tmp_path, tests, conftest=conftest)
        out = run.communicate(timeout=60)[0].decode()
        assert "1 passed" in out, out
        monkeypatch.delenv("PLANT_STORE_URL")
        run = inner_run(tmp_path, tests, conftest=conftest)
        out = run.communicate(timeout=60)[0].decode()
        assert "plant_store_noproc needs PLANT_STORE_URL (http://HOST:PORT) and PLANT_STORE_CONTROL_TOKEN" in out, out


def test_the_control_token_is_not_shown_in_a_failing_test_s_locals(tmp_path):
    tests = """
        def test_refused(plant_store):
            with open("token", "w") as f:
                f.write(plant_store.control._token)
            plant_store.control.restore("snap_nope")

        def test_unreachable(plant_store, plant_store_server):
            control = plant_store.control
            plant_store_server.stop()
            control.reset()
    """
    run = inner_run(tmp_path, tests, "-l", "--tb=long")
    out = run.communicate(timeout=60)[0].decode()
    assert "2 failed" in out, out
    assert "404 no snapshot snap_nope" in out and "ConnectionRefusedError" in out, out
    token = (tmp_path / "token").read_text()
    assert len(token) >= 32
    assert token not in out, out
