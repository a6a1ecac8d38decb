"""Channels that carry an API key, and the client around the generated stub."""

from typing import Any, Callable, Optional, Sequence, Tuple, Union

import grpc

from contextd.v1 import context_service_pb2_grpc as service_grpc


class _BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds ``authorization: Bearer <key>`` to the metadata of every call."""

    def __init__(self, token: Union[str, Callable[[], str]]):
        if token == "":
            raise ValueError("empty API key")
        self._token = token

    def _with_token(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        token = self._token() if callable(self._token) else self._token
        metadata = list(details.metadata or []) + [("authorization", "Bearer " + token)]
        return _CallDetails(details.method, details.timeout, metadata, details.credentials,
                            getattr(details, "wait_for_ready", None), getattr(details, "compression", None))

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._with_token(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        return continuation(self._with_token(client_call_details), request)


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):
        self.method = method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = credentials
        self.wait_for_ready = wait_for_ready
        self.compression = compression


def bearer_token_interceptor(token: Union[str, Callable[[], str]]) -> Any:
    """An interceptor for grpc.intercept_channel that sends the API key; a
    callable is called per request (for keys that rotate)."""
    return _BearerToken(token)


class Client:
    """The generated ContextService stub on a channel, with a default deadline.

    ``client.CountTokens(request)`` calls the stub with ``timeout`` set to the
    client's default unless given; ``client.stub`` is the stub itself.
    WatchContextStatus has no default deadline (use :class:`StatusWatch`).
    """

    def __init__(self, channel: grpc.Channel, timeout: Optional[float] = 30.0):
        self.channel = channel
        self.stub = service_grpc.ContextServiceStub(channel)
        self.timeout = timeout

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.stub, name)
        if name == "WatchContextStatus" or self.timeout is None:
            return method

        def call(request, timeout=None, **kwargs):
            return method(request, timeout=self.timeout if timeout is None else timeout, **kwargs)

        return call

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def connect(
    target: str,
    token: Optional[Union[str, Callable[[], str]]] = None,
    *,
    tls: bool = False,
    root_certificates: Optional[bytes] = None,
    options: Sequence[Tuple[str, Any]] = (),
    timeout: Optional[float] = 30.0,
) -> Client:
    """Opens a channel to contextd at ``target`` ("localhost:50051").

    ``token`` is an API key of the server's CONTEXTD_API_KEYS or keys file
    (omit it when auth is off); ``tls`` uses TLS with the system roots or
    ``root_certificates``; ``timeout`` is the default deadline in seconds of
    every unary call (None for none).
    """
    if tls or root_certificates is not None:
        channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates), options=list(options))
    else:
        channel = grpc.insecure_channel(target, options=list(options))
    if token is not None:
        channel = grpc.intercept_channel(channel, _BearerToken(token))
    return Client(channel, timeout)
