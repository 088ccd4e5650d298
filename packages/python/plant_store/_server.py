"""A plant-store server of the caller's own: started with test control on (a random
control token) on a free port of the loopback, stopped on exit. Its output is always read
(a pipe nobody reads can stall a process), and it ends with this process however this
process ends: its standard input is a pipe that only this process holds, and the server
stops once that closes (`--exit-on-stdin-close`)."""

import collections
import os
import queue
import secrets
import selectors
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
#: Seconds a killed server may take to end; then `stop()` gives up on it with an error.
KILL_TIMEOUT = 5.0
#: Lines of the server's standard error kept, for `log()` and for errors.
LOG_LINES = 200
#: Bytes of a line of its output kept before its end comes; a longer one is cut there.
LINE_BYTES = 65536


class ServerError(RuntimeError):
    """The server did not start, or would not end."""


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
        self._output = None  # type: Optional[_Output]
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
        # Pipes of this process's own for the output: only the reader thread reads and
        # closes them (`_Output`), so no stop waits on a read under way.
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            # Its own session: a Ctrl-C at the terminal reaches the test run, which
            # stops it.
            proc = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.PIPE,
                stdout=out_w,
                stderr=err_w,
                start_new_session=True,
            )
        except BaseException:
            for fd in (out_r, err_r):
                os.close(fd)
            raise
        finally:
            for fd in (out_w, err_w):
                os.close(fd)
        self._proc = proc
        first = queue.Queue()  # type: queue.Queue
        self._output = _Output(out_r, err_r, first, self._log)
        self._output.start()
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
        for it; kills it if it takes longer than `STOP_TIMEOUT`. Its exit status. Never
        waits longer than `STOP_TIMEOUT` and `KILL_TIMEOUT`: a server that a kill does not
        end is a `ServerError`."""
        with self._stopping:
            proc, self._proc = self._proc, None
            return None if proc is None else self._end(proc)

    def _end(self, proc: "subprocess.Popen") -> int:
        """SIGTERM, the wait, and the pipes and threads closed, whatever else holds the
        other ends of the pipes (a process the binary started, when `PLANT_STORE_BIN` is
        a wrapper)."""
        ended = True
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                try:
                    proc.wait(KILL_TIMEOUT)
                except subprocess.TimeoutExpired:
                    ended = False
        proc.stdin.close()
        if self._output is not None:
            self._output.close()
        if self.control is not None:
            self.control.close()
        if not ended:
            raise ServerError(
                "plant-store (pid %d) did not end within %g s of SIGKILL:\n%s"
                % (proc.pid, KILL_TIMEOUT, self.log())
            )
        return proc.returncode


class _Output(threading.Thread):
    """Reads the server's standard output and error (a daemon thread): hands on the first
    line of the output (`listening on …`, or what came before the end) to `first`, keeps
    the error's lines in `log`, and closes both descriptors once both ended or `close()`
    was called, whichever comes first. Only this thread uses them, so `close()` never
    waits on a read, and no descriptor is closed under a read (its number could be
    another file's by then)."""

    def __init__(self, out: int, err: int, first: "queue.Queue", log: "collections.deque"):
        super().__init__(name="plant-store-output", daemon=True)
        self._out, self._err = out, err
        self._first = first  # type: Optional[queue.Queue]
        self._log = log
        self._pending = {}  # type: dict
        self._wake_r, self._wake_w = os.pipe()
        self._closing = threading.Lock()

    def close(self) -> None:
        """Ends the reading now; returns once the descriptors are closed (at most 5 s)."""
        with self._closing:
            if self._wake_w is not None:
                os.close(self._wake_w)
                self._wake_w = None
        self.join(5)

    def run(self) -> None:
        selector = selectors.DefaultSelector()
        try:
            for fd in (self._out, self._err, self._wake_r):
                selector.register(fd, selectors.EVENT_READ)
            while len(selector.get_map()) > 1:
                ready = [key.fd for key, _ in selector.select()]
                if self._wake_r in ready:
                    break
                for fd in ready:
                    data = os.read(fd, 65536)
                    if not data:
                        selector.unregister(fd)
                    for line in self._lines(fd, data):
                        if fd == self._err:
                            self._log.append(line.decode("utf-8", "replace"))
                        else:
                            self._give_first(line)  # the rest of the output is dropped
        finally:
            selector.close()
            self._give_first(b"")
            for fd in (self._out, self._err, self._wake_r):
                os.close(fd)

    def _lines(self, fd: int, data: bytes) -> list:
        """The lines that `data` ends on `fd` (at its end, `b""`: the rest too; a line
        longer than `LINE_BYTES` is cut there)."""
        lines = (self._pending.get(fd, b"") + data).split(b"\n")
        rest = lines.pop()
        lines = [line + b"\n" for line in lines]
        if rest and (not data or len(rest) > LINE_BYTES):
            lines.append(rest)
            rest = b""
        self._pending[fd] = rest
        return lines

    def _give_first(self, line: bytes) -> None:
        if self._first is not None:
            self._first.put(line.decode("utf-8", "replace"))
            self._first = None
