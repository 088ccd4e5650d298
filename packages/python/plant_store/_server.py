"""A plant-store server of the caller's own: started with test control on (a random
control token) on a free port of the loopback, stopped on exit. Its output is always read
(a pipe nobody reads can stall a process), and it ends with this process however this
process ends: its standard input is a pipe that only this process holds, and the server
stops once that closes (`--exit-on-stdin-close`)."""

import collections
import os
import queue
import secrets
import signal
import subprocess
import threading
from typing import Any, Iterable, Optional

from ._binary import binary
from ._control import Control

#: Seconds to wait for the server's `listening on` line.
START_TIMEOUT = 30.0
#: Seconds a stopping server may take (its drain is 10 s at most by default); then it
#: is killed.
STOP_TIMEOUT = 15.0
#: Lines of the server's standard error kept, for `log()` and for errors.
LOG_LINES = 200


class ServerError(RuntimeError):
    """The server did not start."""


class Server:
    """A plant-store server with test control on, on `127.0.0.1` and a port of its own.

        with plant_store.Server(seed_file="seed.json") as server:
            server.url        # http://127.0.0.1:PORT
            server.control    # plant_store.Control
    `args` are more `serve` flags (`("--rate-limit", "5/s")`); the log level is `warn`
    unless they say otherwise. The environment's `PLANT_STORE_*` variables are not passed
    on: what the server does is what these arguments say."""

    def __init__(
        self,
        db: str = ":memory:",
        seed_file: Optional[str] = None,
        test_seed: Optional[int] = None,
        token: Optional[str] = None,
        args: Iterable[Any] = (),
    ):
        self.db = db
        self.seed_file = seed_file
        self.test_seed = test_seed
        self._token = token
        self.args = tuple(str(a) for a in args)
        self.url = None  # type: Optional[str]
        self.control = None  # type: Optional[Control]
        self._proc = None  # type: Optional[subprocess.Popen]
        self._log = collections.deque(maxlen=LOG_LINES)
        self._readers = []  # type: list
        self._stopping = threading.Lock()

    def __repr__(self) -> str:
        return "Server(%r)" % (self.url,)

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def pid(self) -> Optional[int]:
        return None if self._proc is None else self._proc.pid

    def log(self) -> str:
        """The last lines the server wrote on standard error."""
        return "".join(self._log)

    def start(self) -> "Server":
        """Starts the server; returns once it listens."""
        if self._proc is not None:
            raise ServerError("this server is already started")
        control_token = secrets.token_urlsafe(32)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLANT_STORE_")}
        env["PLANT_STORE_CONTROL_TOKEN"] = control_token
        if self._token is not None:
            env["PLANT_STORE_TOKEN"] = self._token
        command = [binary(), "serve", "--addr", "127.0.0.1:0", "--db", str(self.db)]
        command += ["--test-control", "--exit-on-stdin-close", "--log-level", "warn"]
        if self.seed_file is not None:
            command += ["--seed", os.fspath(self.seed_file)]
        if self.test_seed is not None:
            command += ["--test-seed", str(self.test_seed)]
        command += self.args
        self._log.clear()
        # Its own session: a Ctrl-C at the terminal reaches the test run, which stops it.
        proc = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._proc = proc
        first = queue.Queue()  # type: queue.Queue
        self._readers = [
            threading.Thread(target=_read_stdout, args=(proc.stdout, first), daemon=True),
            threading.Thread(target=_read_stderr, args=(proc.stderr, self._log), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        try:
            line = first.get(timeout=START_TIMEOUT)
        except queue.Empty:
            self.stop()
            raise ServerError(
                "plant-store printed no `listening on` line within %g s:\n%s"
                % (START_TIMEOUT, self.log())
            )
        if not line.startswith("listening on http://"):
            status = self.stop()
            raise ServerError(
                "plant-store did not start (exit status %s):\n%s" % (status, self.log())
            )
        self.url = line.split()[-1]
        self.control = Control(self.url, control_token)
        return self

    def stop(self) -> Optional[int]:
        """Stops the server as SIGTERM does (requests in flight are answered) and waits
        for it; kills it if it takes longer than `STOP_TIMEOUT`. Its exit status."""
        with self._stopping:
            proc, self._proc = self._proc, None
            return None if proc is None else self._end(proc)

    def _end(self, proc: "subprocess.Popen") -> int:
        """SIGTERM, the wait, and the pipes and threads closed."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdin.close()
        for reader in self._readers:
            reader.join(5)
        proc.stdout.close()
        proc.stderr.close()
        if self.control is not None:
            self.control.close()
        return proc.returncode


def _read_stdout(pipe: Any, first: "queue.Queue") -> None:
    """Hands on the first line (`listening on …`, or "" at the end), then reads on."""
    first.put(pipe.readline().decode("utf-8", "replace"))
    while pipe.read(65536):
        pass


def _read_stderr(pipe: Any, log: "collections.deque") -> None:
    for line in iter(pipe.readline, b""):
        log.append(line.decode("utf-8", "replace"))
