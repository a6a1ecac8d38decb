"""A status watch that resumes from the last version it yielded."""

import threading
from typing import Dict, Iterator, Optional

import grpc

from contextd.v1 import context_service_pb2 as service
from contextd.v1 import types_pb2 as types


class StatusWatch:
    """Iterates over ContextStatus of one session (or every session of the
    tenant): a snapshot first, then one status per change.

    When the server goes away (UNAVAILABLE, e.g. a rolling restart) it
    watches again from the last version it yielded, so no change is yielded
    twice and a session's versions never go backwards; ``max_retries``
    reconnects in a row without a message end it with the last error, after
    backoffs from ``min_backoff`` doubling to ``max_backoff`` seconds.
    Heartbeats are consumed unless ``heartbeats`` is true. Iteration ends
    after the watched session's deletion, when the server ends the stream, or
    after :meth:`cancel` (safe from any thread). Memory: the last version of
    each session seen.
    """

    def __init__(self, client, session_id: str = "", from_version: int = 0, heartbeat_seconds: int = 0,
                 heartbeats: bool = False, max_retries: int = 10, min_backoff: float = 0.1, max_backoff: float = 5.0):
        self._stub = getattr(client, "stub", client)
        self._session_id = session_id
        self._heartbeat_seconds = heartbeat_seconds
        self._heartbeats = heartbeats
        self._max_retries = max_retries
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        self._seen: Dict[str, int] = {}
        if session_id and from_version:
            self._seen[session_id] = from_version
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._call = None

    def cancel(self) -> None:
        """Ends the watch; the iterating thread stops without an error."""
        with self._lock:
            self._cancelled.set()
            if self._call is not None:
                self._call.cancel()

    def __iter__(self) -> Iterator[types.ContextStatus]:
        failures = 0
        while not self._cancelled.is_set():
            request = service.WatchContextStatusRequest(
                session_id=self._session_id,
                from_version=self._seen.get(self._session_id, 0) if self._session_id else 0,
                heartbeat_seconds=self._heartbeat_seconds,
            )
            with self._lock:
                if self._cancelled.is_set():
                    return
                self._call = self._stub.WatchContextStatus(request)
            try:
                for response in self._call:
                    failures = 0
                    st = response.status
                    if st.event == types.STATUS_EVENT_HEARTBEAT:
                        if self._heartbeats:
                            yield st
                        continue
                    last = self._seen.get(st.session_id)
                    if st.event != types.STATUS_EVENT_DELETED and last is not None and st.version <= last:
                        continue
                    self._seen[st.session_id] = st.version
                    yield st
                return
            except grpc.RpcError as err:
                if self._cancelled.is_set():
                    return
                if err.code() != grpc.StatusCode.UNAVAILABLE or failures >= self._max_retries:
                    raise
            delay = min(self._max_backoff, self._min_backoff * (2 ** failures))
            failures += 1
            if self._cancelled.wait(delay):
                return
