// Runs every block of README.md marked `<!-- runnable -->` as written, as an
// ES module inside this package (so `@strata/client` resolves to it), against
// a real `strata serve` (test/server.js).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { startServer } from "./server.js";

const PKG = resolve(import.meta.dirname, "..");
const blocks = [...readFileSync(join(PKG, "README.md"), "utf8").matchAll(/<!-- runnable -->\s*```js\n([\s\S]*?)```/g)].map((m) => m[1]);

let server;
before(async () => { server = await startServer(); });
after(async () => { await server.stop(); });

test("the README has a runnable block", () => {
  assert.ok(blocks.length >= 1);
});

test("every runnable block runs as written", () => {
  blocks.forEach((block, n) => {
    const file = join(PKG, `.readme-block-${n}.mjs`);
    writeFileSync(file, block);
    try {
      const out = execFileSync(process.execPath, [file], {
        env: { ...process.env, STRATA_URL: server.url, STRATA_API_KEY: server.adminKey },
        encoding: "utf8",
        timeout: 120_000,
      });
      if (block.includes("waitPromoted")) assert.ok(out.includes("ep_") && out.includes("Miso"), out);
    } finally {
      rmSync(file, { force: true });
    }
  });
});
