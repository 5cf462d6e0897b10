"""Receiving Strata's webhooks: check ``X-Strata-Signature`` and read the event.

Strata signs each delivery with HMAC-SHA256 under the endpoint's secret over
``"<t>.<raw body>"`` and sends ``X-Strata-Signature: t=<unix seconds>,v1=<hex>``
(docs/webhooks.md). Verify over the raw bytes of the body, before parsing it;
a delivery may come more than once (at least once), so de-duplicate by ``id``.

    from strata_client.webhooks import parse_event
    event = parse_event(SECRET, request.headers["X-Strata-Signature"], request.body)
    if event["type"] == "session.promoted": ...
"""
from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any, Optional, Union

#: Seconds a signature's timestamp may differ from now (5 minutes, as Strata's server-side helper).
DEFAULT_TOLERANCE = 300

Bytes = Union[bytes, bytearray, str]


class WebhookSignatureError(ValueError):
    """The signature is missing, stale, or does not match the body."""


def _bytes(b: Bytes) -> bytes:
    return b.encode() if isinstance(b, str) else bytes(b)


def sign(secret: Bytes, timestamp: int, body: Bytes) -> str:
    """The ``X-Strata-Signature`` value Strata sends for ``body`` at ``timestamp`` (for tests)."""
    mac = hmac.new(_bytes(secret), f"{timestamp}.".encode() + _bytes(body), hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify_signature(secret: Bytes, header: Optional[str], body: Bytes, *,
                     tolerance: int = DEFAULT_TOLERANCE, now: Optional[float] = None) -> bool:
    """True when ``header`` holds a ``v1`` HMAC of ``body`` under ``secret``
    (constant-time compare) with a ``t`` within ``tolerance`` seconds of ``now``."""
    if not header:
        return False
    t, sigs = None, []
    for part in header.split(","):
        k, _, v = part.strip().partition("=")
        if k == "t" and v.lstrip("-").isdigit():
            t = int(v)
        elif k == "v1":
            sigs.append(v)
    if t is None or abs((time.time() if now is None else now) - t) > tolerance:
        return False
    want = sign(secret, t, body).split("v1=", 1)[1]
    return any(hmac.compare_digest(want, s) for s in sigs)


def parse_event(secret: Bytes, header: Optional[str], body: Bytes, *,
                tolerance: int = DEFAULT_TOLERANCE) -> dict[str, Any]:
    """The event of a verified delivery (``id``, ``type``, ``created_at``,
    ``user_id``, ``agent_id``, ``data``); raises :class:`WebhookSignatureError` otherwise."""
    if not verify_signature(secret, header, body, tolerance=tolerance):
        raise WebhookSignatureError("invalid or stale X-Strata-Signature")
    return json.loads(_bytes(body))
