"""One exception class per error ``code`` of Strata's HTTP API.

Every error body is ``{"error": {"code", "message"}}`` (docs/server.md,
"Errors"); the client raises the class of its code, a subclass of
:class:`StrataError`, with the HTTP status, the message and, for 429 and
503, the ``Retry-After`` seconds.
"""
from typing import Dict, Optional, Type


class StrataError(Exception):
    """An error answer of Strata (or a transport failure, ``code="transport"``)."""

    code = "error"

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[float] = None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


def _error(name: str, code: str, doc: str) -> Type[StrataError]:
    cls = type(name, (StrataError,), {"code": code, "__doc__": doc})
    return cls


InvalidInputError = _error("InvalidInputError", "invalid_input", "400: a field is missing, empty, too long or of the wrong kind.")
MalformedJsonError = _error("MalformedJsonError", "malformed_json", "400: the body is not JSON.")
InvalidBodyError = _error("InvalidBodyError", "invalid_body", "422: JSON of the wrong shape.")
UnsupportedMediaTypeError = _error("UnsupportedMediaTypeError", "unsupported_media_type", "415: the body is not application/json.")
PayloadTooLargeError = _error("PayloadTooLargeError", "payload_too_large", "413: over server.max_body_bytes.")
NotAcceptableError = _error("NotAcceptableError", "not_acceptable", "406: the Accept header refuses JSON.")
UnauthenticatedError = _error("UnauthenticatedError", "unauthenticated", "401: no key, or a key that is unknown or revoked.")
ForbiddenError = _error("ForbiddenError", "forbidden", "403: the key does not cover this scope or operation.")
NotFoundError = _error("NotFoundError", "not_found", "404: no such session, episode, memory or job in this scope.")
NoRouteError = _error("NoRouteError", "no_route", "404: no such route.")
MethodNotAllowedError = _error("MethodNotAllowedError", "method_not_allowed", "405: the route does not take that method.")
ConflictError = _error("ConflictError", "conflict", "409: e.g. recording into a session that was ended.")
RateLimitedError = _error("RateLimitedError", "rate_limited", "429: over the key's rate limit (retried by the client).")
OverloadedError = _error("OverloadedError", "overloaded", "503: too many requests in flight (retried by the client).")
RequestTimeoutError = _error("RequestTimeoutError", "timeout", "503: the request ran past server.request_timeout_ms (retried).")
ShuttingDownError = _error("ShuttingDownError", "shutting_down", "503: the server is draining (retried).")
UnavailableError = _error("UnavailableError", "unavailable", "503: a dependency (the embedder, a store) is down (retried).")
InternalError = _error("InternalError", "internal", "500: a bug or a store failure; the server logged it.")
TransportError = _error("TransportError", "transport", "No HTTP answer: connection refused, reset, or a client timeout.")

#: Error code → exception class.
ERRORS: Dict[str, Type[StrataError]] = {
    cls.code: cls
    for cls in [
        InvalidInputError, MalformedJsonError, InvalidBodyError, UnsupportedMediaTypeError,
        PayloadTooLargeError, NotAcceptableError, UnauthenticatedError, ForbiddenError,
        NotFoundError, NoRouteError, MethodNotAllowedError, ConflictError, RateLimitedError,
        OverloadedError, RequestTimeoutError, ShuttingDownError, UnavailableError, InternalError,
        TransportError,
    ]
}


def from_response(status: int, body: object, retry_after: Optional[float]) -> StrataError:
    """The exception for an error answer (an unknown code gives :class:`StrataError`)."""
    err = body.get("error", {}) if isinstance(body, dict) else {}
    code = err.get("code") or f"http_{status}"
    message = err.get("message") or str(body)[:300]
    return ERRORS.get(code, StrataError)(status, code, message, retry_after)
