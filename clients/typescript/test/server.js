// A real `strata serve` for the tests: this checkout's binary (STRATA_BIN,
// else target/debug/strata) on a free loopback port over a fresh data
// directory, with an admin key and agent keys for alice/bot and bob/bot.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "../../..");

function freePort() {
  return new Promise((ok) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

export async function startServer(...settings) {
  const bin = process.env.STRATA_BIN || join(ROOT, "target/debug/strata");
  if (!existsSync(bin)) throw new Error(`${bin} is missing: build it with cargo build (scripts/test.sh does)`);
  const dir = mkdtempSync(join(tmpdir(), "strata-ts-"));
  const base = ["--data-dir", join(dir, "data")];
  for (const s of ["pruner.enabled=false", ...settings]) base.push("--set", s);
  const env = { ...process.env };
  delete env.STRATA_LOG;
  const key = (...a) => execFileSync(bin, [...base, "keys", "create", ...a], { env, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  const adminKey = key("--admin");
  const aliceKey = key("--user", "alice", "--agent", "bot");
  const bobKey = key("--user", "bob", "--agent", "bot");
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const proc = spawn(bin, [...base, "serve", "--listen", `127.0.0.1:${port}`], { env, stdio: "ignore" });
  const deadline = Date.now() + 120000;
  for (;;) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) break;
    } catch {}
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error("strata serve did not start");
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url, adminKey, aliceKey, bobKey,
    async stop() {
      proc.kill("SIGTERM");
      await new Promise((r) => proc.once("exit", r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
