import type { components } from "./schema.js";

/** The body of a webhook delivery (docs/webhooks.md). */
export type WebhookEvent = components["schemas"]["WebhookEvent"];
type Body = string | Uint8Array | ArrayBuffer;

/** Seconds a signature's timestamp may differ from now (5 minutes). */
export const DEFAULT_TOLERANCE_SECS: number;
/** The signature is missing, stale, or does not match the body. */
export class WebhookSignatureError extends Error {}
/** The X-Strata-Signature value Strata sends for `body` at `timestamp` (unix seconds). */
export function sign(secret: string | Uint8Array, timestamp: number, body: Body): Promise<string>;
/** True when `header` holds a v1 HMAC-SHA256 of `body` under `secret` with a fresh `t`. */
export function verifySignature(secret: string | Uint8Array, header: string | null | undefined, body: Body, opts?: { toleranceSecs?: number; now?: number }): Promise<boolean>;
/** The event of a verified delivery; rejects with WebhookSignatureError otherwise. */
export function parseEvent(secret: string | Uint8Array, header: string | null | undefined, body: Body, opts?: { toleranceSecs?: number }): Promise<WebhookEvent>;
