/**
 * Write the live server's `/openapi.json` to `openapi.json`, byte for byte, as
 * the snapshot the build generates `src/generated/openapi.ts` from. Run
 * through `npm run update-schema`, which rebuilds afterwards.
 */

import { writeFile } from "node:fs/promises";
import { join } from "node:path";

import { PACKAGE_ROOT, startServer } from "../test/support/server.js";
import { SNAPSHOT, liveSchema } from "../test/support/schema.js";

const server = await startServer();
try {
  const schema = await liveSchema(server.baseUrl);
  await writeFile(join(PACKAGE_ROOT, SNAPSHOT), schema);
  console.log(`wrote ${SNAPSHOT} from ${server.baseUrl}/openapi.json`);
} finally {
  await server.stop();
}
