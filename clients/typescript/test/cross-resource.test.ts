/**
 * A key for resource A never reaches resource B: every call the client and
 * the agent memory make is a NotFoundError (the same 404 as for a resource
 * that does not exist), and B's data is unchanged, byte for byte.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { CadernoAgentMemory, CadernoClient, NotFoundError } from "../src/index.js";
import { startServer, type Server } from "./support/server.js";

const A = "casa-a";
const B = "casa-b";

describe("a key for one resource and another's data", () => {
  let server: Server;
  let asA: CadernoClient;
  let asB: CadernoClient;

  /** Everything of B, as its own key exports it. */
  async function exportOfB(): Promise<string> {
    const response = await fetch(`${server.baseUrl}/v1/resources/${B}/export`, {
      headers: { Authorization: `Bearer ${server.keys[B]!}` },
    });
    assert.equal(response.status, 200);
    return response.text();
  }

  before(async () => {
    server = await startServer([A, B]);
    asA = new CadernoClient({ baseUrl: server.baseUrl, apiKey: server.keys[A]! });
    asB = new CadernoClient({ baseUrl: server.baseUrl, apiKey: server.keys[B]! });
    await asB.appendMessages(B, "t1", [
      { role: "user", content: "Nossa meta é Lisboa." },
      { role: "assistant", content: "Anotado." },
    ]);
    await asB.patchWorkingMemory(B, { activeGoals: [{ name: "Lisboa", target: "EUR 3000", deadline: "2027-01-01" }] });
    await asB.putFact(B, "casa", "cidade", "Recife");
    await asB.editNotebook(B, "user", { action: "add", content: "Moram em Recife." });
  });
  after(async () => {
    await server?.stop();
  });

  test("the agent memory bound to B with A's key: NotFoundError for each of the four methods", async () => {
    const before = await exportOfB();
    const intruder = new CadernoAgentMemory(asA, B);
    await assert.rejects(intruder.getMessages({ threadId: "t1" }), NotFoundError);
    await assert.rejects(
      intruder.appendMessages({ threadId: "t1", resourceId: B, messages: [{ role: "user", content: "oi" }] }),
      NotFoundError,
    );
    await assert.rejects(intruder.getWorkingMemory({ resourceId: B }), NotFoundError);
    await assert.rejects(intruder.updateWorkingMemory({ resourceId: B, patch: { activeGoals: null } }), NotFoundError);
    assert.equal(await exportOfB(), before);
  });

  test("every client call on B with A's key: NotFoundError, as for a resource that does not exist", async () => {
    const before = await exportOfB();
    const calls: [string, () => Promise<unknown>][] = [
      ["listThreads", () => asA.listThreads(B)],
      ["createThread", () => asA.createThread(B, { thread_id: "t9" })],
      ["getThread", () => asA.getThread(B, "t1")],
      ["updateThread", () => asA.updateThread(B, "t1", { title: "invadido" })],
      ["deleteThread", () => asA.deleteThread(B, "t1")],
      ["listMessages", () => asA.listMessages(B, "t1")],
      ["appendMessages", () => asA.appendMessages(B, "t1", [{ role: "user", content: "oi" }])],
      ["popMessage", () => asA.popMessage(B, "t1")],
      ["getWorkingMemory", () => asA.getWorkingMemory(B)],
      ["patchWorkingMemory", () => asA.patchWorkingMemory(B, { activeGoals: null }, { ifMatch: 1 })],
      ["workingMemoryLog", () => asA.workingMemoryLog(B)],
      ["recall", () => asA.recall(B, { query: "Lisboa" })],
      ["listFacts", () => asA.listFacts(B)],
      ["putFact", () => asA.putFact(B, "casa", "cidade", "outra")],
      ["deleteFact", () => asA.deleteFact(B, "casa", "cidade")],
      ["factHistory", () => asA.factHistory(B, "casa", "cidade")],
      ["getNotebook", () => asA.getNotebook(B)],
      ["editNotebook", () => asA.editNotebook(B, "user", { action: "remove", old_text: "Recife" })],
    ];
    const nowhere = new CadernoClient({ baseUrl: server.baseUrl, apiKey: server.keys[A]! });
    const absent = await nowhere.listThreads("no-such-resource").catch((error: unknown) => error);
    assert.ok(absent instanceof NotFoundError);
    for (const [name, run] of calls) {
      const error = await run().catch((caught: unknown) => caught);
      assert.ok(error instanceof NotFoundError, `${name}: expected a NotFoundError, got ${String(error)}`);
      assert.equal(error.type, absent.type, name);
      assert.equal(error.detail, `resource '${B}' not found`, name);
    }
    assert.equal(await exportOfB(), before);
    assert.equal((await asB.listMessages(B, "t1")).length, 2); // and B's own key still reads it
  });
});
