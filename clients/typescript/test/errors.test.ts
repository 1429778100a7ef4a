/** The server's refusals arrive as typed exceptions carrying the problem's status, type, title and detail. */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  BadRequestError,
  CadernoAgentMemory,
  CadernoClient,
  CadernoError,
  ConflictError,
  NotFoundError,
  PayloadTooLargeError,
  PreconditionFailedError,
  ThreadBusyError,
  UnauthorizedError,
  UnprocessableEntityError,
  errorFor,
} from "../src/index.js";
import { startServer, type Server } from "./support/server.js";

const R = "casa";
const PROBLEMS = "https://caderno.dev/problems/";

describe("errors as typed exceptions", () => {
  let server: Server;
  let client: CadernoClient;

  before(async () => {
    server = await startServer([R]);
    client = new CadernoClient({ baseUrl: server.baseUrl, apiKey: server.keys[R]! });
  });
  after(async () => {
    await server?.stop();
  });

  test("a bad key is an UnauthorizedError, through the client and the agent memory", async () => {
    const stranger = new CadernoClient({ baseUrl: server.baseUrl, apiKey: "cad_not-a-key" });
    await assert.rejects(stranger.listThreads(R), (error: unknown) => {
      assert.ok(error instanceof UnauthorizedError && error instanceof CadernoError);
      assert.equal(error.status, 401);
      assert.equal(error.type, `${PROBLEMS}unauthorized`);
      assert.equal(error.title, "Unauthorized");
      assert.equal(error.detail, "unknown or revoked key");
      assert.equal(error.name, "UnauthorizedError");
      return true;
    });
    await assert.rejects(new CadernoAgentMemory(stranger, R).getMessages({ threadId: "t" }), UnauthorizedError);
    await assert.rejects(new CadernoAgentMemory(stranger, R).getWorkingMemory({ resourceId: R }), UnauthorizedError);
  });

  test("a stale If-Match is a PreconditionFailedError and changes nothing", async () => {
    const first = await client.getWorkingMemory(R);
    assert.deepEqual([first.data, first.version, first.etag], [null, 0, '"0"']);
    const second = await client.patchWorkingMemory(R, { monthlyIncomeBRL: 14000 }, { ifMatch: first.etag });
    assert.deepEqual([second.data, second.version, second.etag], [{ monthlyIncomeBRL: 14000 }, 1, '"1"']);

    await assert.rejects(client.patchWorkingMemory(R, { monthlyIncomeBRL: 1 }, { ifMatch: first.etag }), (error) => {
      assert.ok(error instanceof PreconditionFailedError);
      assert.equal(error.status, 412);
      assert.equal(error.type, `${PROBLEMS}precondition-failed`);
      assert.deepEqual([error.expectedVersion, error.actualVersion], [0, 1]);
      return true;
    });
    await assert.rejects(client.patchWorkingMemory(R, { monthlyIncomeBRL: 1 }, { ifMatch: 7 }), PreconditionFailedError);
    const now = await client.getWorkingMemory(R);
    assert.deepEqual([now.data, now.version], [{ monthlyIncomeBRL: 14000 }, 1]);
  });

  test("a malformed If-Match is a BadRequestError", async () => {
    await assert.rejects(client.patchWorkingMemory(R, { a: 1 }, { ifMatch: "three" }), (error) => {
      assert.ok(error instanceof BadRequestError);
      assert.equal(error.type, `${PROBLEMS}invalid-request`);
      assert.match(error.detail, /If-Match/);
      return true;
    });
  });

  test("a thread that exists already is a ConflictError (not a busy thread)", async () => {
    await client.createThread(R, { thread_id: "dup" });
    await assert.rejects(client.createThread(R, { thread_id: "dup" }), (error) => {
      assert.ok(error instanceof ConflictError && !(error instanceof ThreadBusyError));
      assert.equal(error.status, 409);
      assert.equal(error.type, `${PROBLEMS}conflict`);
      return true;
    });
  });

  test("nothing to pop is a NotFoundError", async () => {
    await assert.rejects(client.popMessage(R, "empty"), (error) => {
      assert.ok(error instanceof NotFoundError);
      assert.equal(error.type, `${PROBLEMS}not-found`);
      return true;
    });
  });

  test("a notebook refusal is an UnprocessableEntityError with the notebook's message", async () => {
    await client.editNotebook(R, "memory", { action: "add", content: "O casal prefere respostas curtas." });
    const missing = { action: "replace" as const, old_text: "não existe", content: "x" };
    await assert.rejects(client.editNotebook(R, "memory", missing), (error) => {
      assert.ok(error instanceof UnprocessableEntityError);
      assert.equal(error.status, 422);
      assert.equal(error.type, `${PROBLEMS}notebook`);
      return true;
    });
  });

  test("a working-memory patch over the size limit is a PayloadTooLargeError", async () => {
    const huge = { notes: "x".repeat(300 * 1024) }; // the server takes patches up to 256 KiB
    await assert.rejects(client.patchWorkingMemory(R, huge), (error) => {
      assert.ok(error instanceof PayloadTooLargeError);
      assert.equal(error.type, `${PROBLEMS}too-large`);
      return true;
    });
    assert.equal((await client.getWorkingMemory(R)).version, 1);
  });
});

describe("errorFor, for answers a test server does not give on demand", () => {
  test("a busy thread is a ThreadBusyError, a ConflictError too", () => {
    const body = { type: `${PROBLEMS}thread-busy`, title: "Another turn holds this thread", status: 409, detail: "busy" };
    const error = errorFor(409, "Conflict", body);
    assert.ok(error instanceof ThreadBusyError && error instanceof ConflictError);
    assert.equal(error.detail, "busy");
  });

  test("an answer that is not a problem keeps its status line", () => {
    const error = errorFor(502, "Bad Gateway", undefined);
    assert.ok(error.constructor === CadernoError);
    assert.deepEqual([error.status, error.type, error.title, error.detail], [502, "about:blank", "Bad Gateway", "Bad Gateway"]);
  });
});
