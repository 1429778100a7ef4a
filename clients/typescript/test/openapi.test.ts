/**
 * The committed `openapi.json` is the live server's, byte for byte: the
 * generated types (and so the client) describe the API this checkout serves.
 * A change to the API fails here until the snapshot and the types are
 * regenerated.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { REGENERATE, liveSchema, snapshot } from "./support/schema.js";
import { startServer, type Server } from "./support/server.js";

/** Where two texts first differ, with a little of each around it. */
function firstDifference(a: string, b: string): string {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  const around = (text: string): string => JSON.stringify(text.slice(Math.max(0, i - 80), i + 80));
  return `at character ${i}:\n  committed: ${around(a)}\n  live:      ${around(b)}`;
}

describe("the OpenAPI snapshot", () => {
  let server: Server;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.stop();
  });

  test("equals the live server's /openapi.json", async () => {
    const [committed, live] = [await snapshot(), await liveSchema(server.baseUrl)];
    assert.ok(
      committed === live,
      `openapi.json is not the server's /openapi.json (${firstDifference(committed, live)});\n` +
        `run \`${REGENERATE}\` and commit openapi.json and src/generated/openapi.ts`,
    );
  });
});
