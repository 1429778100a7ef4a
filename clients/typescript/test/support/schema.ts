/** The OpenAPI snapshot the types are generated from, and the live document it must equal. */

import { readFile } from "node:fs/promises";
import { join } from "node:path";

import { PACKAGE_ROOT } from "./server.js";

/** The committed snapshot, relative to the package. */
export const SNAPSHOT = "openapi.json";

/** The one command that brings the snapshot and the generated types up to date. */
export const REGENERATE = "cd clients/typescript && npm run update-schema";

/**
 * The live document as the server wrote it. Kept as text, never parsed and
 * written again: JavaScript numbers would round its 64-bit bounds
 * (9223372036854775807) and turn `1.0` into `1`. The generated types are
 * where a change reads well in a diff.
 */
export async function liveSchema(baseUrl: string): Promise<string> {
  const response = await fetch(`${baseUrl}/openapi.json`);
  if (!response.ok) throw new Error(`/openapi.json answered ${response.status}`);
  return response.text();
}

export async function snapshot(): Promise<string> {
  return readFile(join(PACKAGE_ROOT, SNAPSHOT), "utf8");
}
