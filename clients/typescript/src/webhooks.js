// Receiving Strata's webhooks: check X-Strata-Signature and read the event.
// Strata signs each delivery with HMAC-SHA256 under the endpoint's secret over
// "<t>.<raw body>" and sends `X-Strata-Signature: t=<unix seconds>,v1=<hex>`
// (docs/webhooks.md). Verify over the raw body before parsing it; a delivery
// may come more than once (at least once), so de-duplicate by `id`.
// Web Crypto (globalThis.crypto.subtle): Node >= 20 and browsers, no dependency.

/** Seconds a signature's timestamp may differ from now (5 minutes). */
export const DEFAULT_TOLERANCE_SECS = 300;

/** The signature is missing, stale, or does not match the body. */
export class WebhookSignatureError extends Error {
  constructor(message) {
    super(message);
    this.name = "WebhookSignatureError";
  }
}

const enc = new TextEncoder();
const bytes = (b) => (typeof b === "string" ? enc.encode(b) : b instanceof Uint8Array ? b : new Uint8Array(b));
const hex = (buf) => [...new Uint8Array(buf)].map((x) => x.toString(16).padStart(2, "0")).join("");

async function mac(secret, t, body) {
  const key = await crypto.subtle.importKey("raw", bytes(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const head = enc.encode(`${t}.`);
  const b = bytes(body);
  const msg = new Uint8Array(head.length + b.length);
  msg.set(head);
  msg.set(b, head.length);
  return hex(await crypto.subtle.sign("HMAC", key, msg));
}

/** The X-Strata-Signature value Strata sends for `body` at `timestamp` (for tests). */
export async function sign(secret, timestamp, body) {
  return `t=${timestamp},v1=${await mac(secret, timestamp, body)}`;
}

function equal(a, b) {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return d === 0;
}

/** True when `header` holds a v1 HMAC of `body` under `secret` with a `t` within the tolerance of now. */
export async function verifySignature(secret, header, body, { toleranceSecs = DEFAULT_TOLERANCE_SECS, now } = {}) {
  if (!header) return false;
  let t = null;
  const sigs = [];
  for (const part of header.split(",")) {
    const [k, v] = part.trim().split("=", 2);
    if (k === "t" && /^-?\d+$/.test(v ?? "")) t = Number(v);
    else if (k === "v1" && v) sigs.push(v);
  }
  const clock = now ?? Date.now() / 1000;
  if (t === null || Math.abs(clock - t) > toleranceSecs) return false;
  const want = await mac(secret, t, body);
  return sigs.some((s) => equal(want, s));
}

/** The event of a verified delivery; throws WebhookSignatureError otherwise. */
export async function parseEvent(secret, header, body, opts = {}) {
  if (!(await verifySignature(secret, header, body, opts))) {
    throw new WebhookSignatureError("invalid or stale X-Strata-Signature");
  }
  return JSON.parse(typeof body === "string" ? body : new TextDecoder().decode(bytes(body)));
}
