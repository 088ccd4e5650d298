"""Test control of a running plant-store server (docs/control.md): one method per
`/_control/` route, JSON in and out, on one kept-alive connection per thread. The
control token is sent in each request's `Authorization` header and shown nowhere else."""

import datetime
import http.client
import json
import threading
import urllib.parse
from typing import Any, Dict, List, Optional

#: Seconds a control request may take: more than the longest journal `wait` (30 s).
CONTROL_TIMEOUT = 60.0


class ControlError(Exception):
    """A control request the server refused: its method and path, status and message."""

    def __init__(self, method: str, path: str, status: int, message: str):
        super().__init__("%s %s: %d %s" % (method, path, status, message))
        self.status = status
        self.message = message


def _duration(value: Any) -> str:
    """A DURATION as the control JSON takes it: `"90s"`, `"2h"`, or seconds (an int or a
    `timedelta` of whole seconds)."""
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
        if seconds != int(seconds):
            raise ValueError("a duration is whole seconds, not %r" % (value,))
        return "%ds" % int(seconds)
    if isinstance(value, int) and not isinstance(value, bool):
        return "%ds" % value
    return value


def _time(value: Any) -> str:
    """An RFC 3339 time: a string as is, or a `datetime` (naive: UTC)."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        text = value.astimezone(datetime.timezone.utc).isoformat(timespec="milliseconds")
        return text.replace("+00:00", "Z")
    return value


def _present(**members: Any) -> Dict[str, Any]:
    """The members that were given (not None)."""
    return {k: v for k, v in members.items() if v is not None}


class Control:
    """The control surface of the server at `url` (`http://HOST:PORT`), with its control
    token. Thread-safe: each thread has its own connection."""

    def __init__(self, url: str, token: str, timeout: float = CONTROL_TIMEOUT):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError("the server's URL is http://HOST:PORT, not %r" % (url,))
        self.url = url
        self._address = (parts.hostname, parts.port)
        self._token = token
        self._timeout = timeout
        self._local = threading.local()

    def __repr__(self) -> str:
        return "Control(%r)" % (self.url,)

    def close(self) -> None:
        """Closes this thread's connection (the next call opens another)."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def _call(self, method: str, path: str, body: Any = None, query: Any = None) -> Any:
        # This frame holds the control token (the Authorization header): hidden from
        # pytest's tracebacks, whose `-l` shows each frame's locals; an error from below
        # is raised from here without the frames of http.client, which hold the request
        # as sent.
        __tracebackhide__ = True
        target = "/_control" + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        headers = {"Authorization": "Bearer " + self._token}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            conn = getattr(self._local, "conn", None)
            reused = conn is not None
            if conn is None:
                conn = http.client.HTTPConnection(*self._address, timeout=self._timeout)
                self._local.conn = conn
            try:
                conn.request(method, target, payload, headers)
                answer = conn.getresponse()
                data = answer.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                self.close()
                # A kept-alive connection the server had closed: nothing was carried out.
                if reused and attempt == 1:
                    continue
                raise e.with_traceback(None)
            except BaseException as e:
                self.close()
                raise e.with_traceback(None)
            if answer.will_close:
                self.close()
            break
        if answer.status >= 400:
            try:
                message = json.loads(data)["message"]
            except (ValueError, KeyError, TypeError):
                message = data.decode("utf-8", "replace")
            raise ControlError(method, target, answer.status, message)
        return json.loads(data) if data else None

    # The store as a whole.

    def reset(self) -> None:
        """The store as it was when the server began listening; faults, snapshots, the
        journal and the clock cleared."""
        self._call("POST", "/reset")

    def snapshot(self) -> str:
        """A snapshot of the whole store; its id."""
        return self._call("POST", "/snapshots")["id"]

    def restore(self, id: str) -> None:
        self._call("POST", "/snapshots/%s/restore" % urllib.parse.quote(id, safe=""))

    def delete_snapshot(self, id: str) -> None:
        self._call("DELETE", "/snapshots/%s" % urllib.parse.quote(id, safe=""))

    # Tokens.

    def mint(
        self,
        principal: str,
        scope: str = "read-write",
        expires_in: Any = None,
        expires_at: Any = None,
        token: Optional[str] = None,
    ) -> Dict[str, Any]:
        """A token for `principal`: the 201 body (`token`, `principal`, `scope`,
        `expires_at`, and `id` where the server gives it)."""
        __tracebackhide__ = True  # its locals hold a chosen token
        body = _present(
            principal=principal,
            scope=scope,
            expires_in=None if expires_in is None else _duration(expires_in),
            expires_at=None if expires_at is None else _time(expires_at),
            token=token,
        )
        return self._call("POST", "/tokens", body)

    # Faults.

    def fault(
        self,
        match: Optional[Dict[str, Any]] = None,
        action: Optional[Dict[str, Any]] = None,
        when: str = "before",
        times: Optional[int] = None,
        probability: Optional[float] = None,
        seed: Optional[int] = None,
    ) -> Dict[str, Any]:
        """Adds a fault; the fault as stored (with its `id`). `when` is sent only when
        it is not the server's default, `before` (an answer's faults, such as
        `truncate`, are always `after`)."""
        body = _present(
            match=match,
            action=action,
            when=None if when == "before" else when,
            times=times,
            probability=probability,
            seed=seed,
        )
        return self._call("POST", "/faults", body)

    def faults(self) -> List[Dict[str, Any]]:
        """The faults in order, each with `hits` and `remaining`."""
        return self._call("GET", "/faults")

    def remove_fault(self, id: str) -> None:
        self._call("DELETE", "/faults/%s" % urllib.parse.quote(id, safe=""))

    def clear_faults(self) -> None:
        self._call("DELETE", "/faults")

    # The journal.

    def journal(self, **filters: Any) -> List[Dict[str, Any]]:
        """The requests answered, oldest first; the keywords are the query's parameters
        (`method`, `path`, `principal`, and those the server adds: `status`, `after`,
        `limit`, `wait`, `min`)."""
        query = {k: _duration(v) if k == "wait" else v for k, v in filters.items()}
        return self._call("GET", "/requests", query=query)

    def clear_journal(self) -> None:
        self._call("DELETE", "/requests")

    # The clock.

    def clock(self) -> Dict[str, Any]:
        """`{"now": …, "frozen": …}`."""
        return self._call("GET", "/clock")

    def set_clock(self, now: Any, frozen: bool = False) -> Dict[str, Any]:
        """The server's clock reads `now` (RFC 3339, or a `datetime`) from here on, and
        stays there when `frozen`."""
        return self._call("PUT", "/clock", {"now": _time(now), "frozen": frozen})

    def advance_clock(self, by: Any) -> Dict[str, Any]:
        """Moves the clock on by a DURATION (`"2h"`, seconds, or a `timedelta`)."""
        return self._call("POST", "/clock/advance", {"by": _duration(by)})

    def real_clock(self) -> None:
        """The real clock again."""
        self._call("DELETE", "/clock")
