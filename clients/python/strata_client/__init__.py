"""Python client of Strata, the tiered conversational memory runtime.

    from strata_client import Strata
    s = Strata("http://127.0.0.1:8750", api_key="sk_strata_...").scope("alice", "support-bot")
    ctx = s.inject("thread-42", "what did we decide about Kafka?")["section"]

Sync (:class:`Strata`) and async (:class:`AsyncStrata`) clients on httpx,
types generated from ``/openapi.json`` (:mod:`strata_client.models`), one
exception per error code (:mod:`strata_client.errors`), and the
signature check of webhook deliveries (:mod:`strata_client.webhooks`).
"""
from . import errors, models, webhooks
from .client import AsyncScope, AsyncStrata, PromotionFailed, Scope, Strata
from .errors import *  # noqa: F401,F403  (one class per error code)

__all__ = ["Strata", "AsyncStrata", "Scope", "AsyncScope", "PromotionFailed", "errors", "models", "webhooks"] + [
    c.__name__ for c in errors.ERRORS.values()
] + ["StrataError"]
__version__ = "0.1.0"
