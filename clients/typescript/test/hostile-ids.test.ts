/**
 * Ids that could become a path (`.`, `..`, a `/`, control or invisible
 * characters) are refused by the client with an `InvalidIdError` before any
 * request: `fetch` resolves `..` before it sends, so `popMessage(R, "..")` was
 * `DELETE /v1/resources/R/messages/last` and removed another thread's message
 * whose id is `last`. Every method that takes an id, in every id position, on
 * the client and the agent memory; the requests counted at the `fetch` the
 * client is given, and the resource's export unchanged, byte for byte.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  BadRequestError,
  CadernoAgentMemory,
  CadernoClient,
  CadernoError,
  InvalidIdError,
  NAME_RULE,
  type NotebookTarget,
} from "../src/index.js";
import { startServer, type Server } from "./support/server.js";

const R = "casa";

/** Each kind the rule names: dot segments, a slash, C0, DEL, C1, format and other invisible characters, nothing. */
const HOSTILE = [
  ".",
  "..",
  "../t2",
  "t1/../t2",
  "/",
  "a/b",
  "",
  "t1\u0000",
  "t1\n",
  "\u001f",
  "t1\u007f",
  "\u0085",
  "t1\u009f",
  "t\u202e1", // right-to-left override
  "t\u200b1", // zero width space
  "t\u28001", // braille pattern blank
];

/** Ids the server takes, with characters a URL would misread unless encoded: they still work. */
const ODD_BUT_FINE = ["...", ".hidden", "a b", "ação", "100%", "a\\b", "?x=1#y", "a;b", "..a"];

describe("ids that could become a path", () => {
  let server: Server;
  /** Every URL the client asked its fetch for. */
  const requested: string[] = [];
  let client: CadernoClient;

  async function exportOfR(): Promise<string> {
    const response = await fetch(`${server.baseUrl}/v1/resources/${R}/export`, {
      headers: { Authorization: `Bearer ${server.keys[R]!}` },
    });
    assert.equal(response.status, 200);
    return response.text();
  }

  /** Thread t2's messages, read without the client under test. */
  async function messagesOfT2(): Promise<{ id: string; content: string }[]> {
    const response = await fetch(`${server.baseUrl}/v1/resources/${R}/threads/t2/messages`, {
      headers: { Authorization: `Bearer ${server.keys[R]!}` },
    });
    assert.equal(response.status, 200);
    return (await response.json()) as { id: string; content: string }[];
  }

  before(async () => {
    server = await startServer([R]);
    const counting: typeof fetch = (input, init) => {
      requested.push(String(input));
      return fetch(input, init);
    };
    client = new CadernoClient({ baseUrl: server.baseUrl, apiKey: server.keys[R]!, fetch: counting });
    await client.appendMessages(R, "t1", [
      { role: "user", content: "Quanto gastamos em junho?" },
      { role: "assistant", content: "R$ 3.200." },
    ]);
    await client.appendMessages(R, "t2", [{ role: "user", content: "A senha do wifi é girassol." }]);
    await client.patchWorkingMemory(R, { monthlyIncomeBRL: 14000 });
    await client.putFact(R, "casa", "cidade", "Recife");
    await client.editNotebook(R, "user", { action: "add", content: "Moram em Recife." });
    // Give t2's newest message the id "last" (an import keeps ids): the message `..` reached.
    const dump = JSON.parse(await exportOfR()) as { threads: { id: string; messages: { id: string }[] }[] };
    const target = dump.threads.find((t) => t.id === "t2")?.messages[0];
    assert.ok(target, "the export holds t2's message");
    target.id = "last";
    const headers = { Authorization: `Bearer ${server.keys[R]!}`, "Content-Type": "application/json" };
    assert.equal((await fetch(`${server.baseUrl}/v1/resources/${R}`, { method: "DELETE", headers })).status, 204);
    const imported = await fetch(`${server.baseUrl}/v1/resources/${R}/import`, {
      method: "POST",
      headers,
      body: JSON.stringify(dump),
    });
    assert.equal(imported.status, 204, await imported.text());
    assert.deepEqual(
      (await messagesOfT2()).map((m) => m.id),
      ["last"],
    );
  });
  after(async () => {
    await server?.stop();
  });

  test('popMessage(R, "..") is refused before sending: t2\'s message "last" stays', async () => {
    requested.length = 0;
    await assert.rejects(client.popMessage(R, ".."), (error: unknown) => {
      assert.ok(error instanceof InvalidIdError);
      assert.ok(error instanceof BadRequestError && error instanceof CadernoError);
      assert.equal(error.name, "InvalidIdError");
      assert.equal(error.status, 400);
      assert.equal(error.type, "https://caderno.dev/problems/invalid-request");
      assert.equal(error.detail, `thread id ".." is not a valid name: ${NAME_RULE}`);
      assert.deepEqual([error.what, error.id], ["thread id", ".."]);
      return true;
    });
    assert.deepEqual(requested, []);
    assert.deepEqual(
      (await messagesOfT2()).map((m) => [m.id, m.content]),
      [["last", "A senha do wifi é girassol."]],
    );
  });

  test("every method, every id position, every hostile id: InvalidIdError and no request", async () => {
    const before = await exportOfR();
    requested.length = 0;
    const memory = new CadernoAgentMemory(client, R);
    const edit = { action: "remove" as const, old_text: "Recife" };
    const calls: [string, (id: string) => Promise<unknown>][] = [
      ["listThreads(resource)", (id) => client.listThreads(id)],
      ["createThread(resource)", (id) => client.createThread(id, { thread_id: "t9" })],
      ["getThread(resource)", (id) => client.getThread(id, "t1")],
      ["getThread(thread)", (id) => client.getThread(R, id)],
      ["updateThread(resource)", (id) => client.updateThread(id, "t1", { title: "x" })],
      ["updateThread(thread)", (id) => client.updateThread(R, id, { title: "x" })],
      ["deleteThread(resource)", (id) => client.deleteThread(id, "t1")],
      ["deleteThread(thread)", (id) => client.deleteThread(R, id)],
      ["listMessages(resource)", (id) => client.listMessages(id, "t1")],
      ["listMessages(thread)", (id) => client.listMessages(R, id)],
      ["appendMessages(resource)", (id) => client.appendMessages(id, "t1", [{ role: "user", content: "oi" }])],
      ["appendMessages(thread)", (id) => client.appendMessages(R, id, [{ role: "user", content: "oi" }])],
      ["popMessage(resource)", (id) => client.popMessage(id, "t1")],
      ["popMessage(thread)", (id) => client.popMessage(R, id)],
      ["getWorkingMemory", (id) => client.getWorkingMemory(id)],
      ["patchWorkingMemory", (id) => client.patchWorkingMemory(id, { monthlyIncomeBRL: null })],
      ["workingMemoryLog", (id) => client.workingMemoryLog(id)],
      ["recall", (id) => client.recall(id, { query: "Recife" })],
      ["listFacts", (id) => client.listFacts(id)],
      ["putFact(resource)", (id) => client.putFact(id, "casa", "cidade", "x")],
      ["putFact(category)", (id) => client.putFact(R, id, "cidade", "x")],
      ["putFact(key)", (id) => client.putFact(R, "casa", id, "x")],
      ["deleteFact(resource)", (id) => client.deleteFact(id, "casa", "cidade")],
      ["deleteFact(category)", (id) => client.deleteFact(R, id, "cidade")],
      ["deleteFact(key)", (id) => client.deleteFact(R, "casa", id)],
      ["factHistory(resource)", (id) => client.factHistory(id, "casa", "cidade")],
      ["factHistory(category)", (id) => client.factHistory(R, id, "cidade")],
      ["factHistory(key)", (id) => client.factHistory(R, "casa", id)],
      ["getNotebook", (id) => client.getNotebook(id)],
      ["editNotebook(resource)", (id) => client.editNotebook(id, "user", edit)],
      ["editNotebook(target)", (id) => client.editNotebook(R, id as NotebookTarget, edit)],
      ["AgentMemory.getMessages", (id) => memory.getMessages({ threadId: id })],
      [
        "AgentMemory.appendMessages",
        (id) => memory.appendMessages({ threadId: id, resourceId: R, messages: [{ role: "user", content: "oi" }] }),
      ],
      ["AgentMemory.getWorkingMemory", (id) => memory.getWorkingMemory({ resourceId: id })],
      [
        "AgentMemory.updateWorkingMemory",
        (id) => memory.updateWorkingMemory({ resourceId: id, patch: { monthlyIncomeBRL: null } }),
      ],
    ];
    let refused = 0;
    for (const id of HOSTILE) {
      for (const [name, run] of calls) {
        const error = await run(id).then(
          () => undefined,
          (caught: unknown) => caught,
        );
        const label = `${name} with ${JSON.stringify(id)}`;
        assert.ok(error instanceof InvalidIdError, `${label}: expected an InvalidIdError, got ${String(error)}`);
        assert.equal(error.id, id, label);
        refused += 1;
      }
      assert.throws(() => new CadernoAgentMemory(client, id), InvalidIdError, `new CadernoAgentMemory with ${id}`);
    }
    assert.equal(refused, HOSTILE.length * calls.length);
    assert.deepEqual(requested, [], "no request reached the server");
    assert.equal(await exportOfR(), before);
  });

  test("ids a URL would misread unless encoded still travel as one segment and work", async () => {
    for (const id of ODD_BUT_FINE) {
      const created = await client.createThread(R, { thread_id: id, title: `t ${id}` });
      assert.equal(created.id, id);
      assert.equal((await client.getThread(R, id)).title, `t ${id}`);
      await client.appendMessages(R, id, [{ role: "user", content: `em ${id}` }]);
      assert.equal((await client.popMessage(R, id)).content, `em ${id}`);
      assert.equal((await client.putFact(R, id, id, "v")).value, "v");
      await client.deleteFact(R, id, id);
      await client.deleteThread(R, id);
    }
    assert.deepEqual(
      (await messagesOfT2()).map((m) => m.id),
      ["last"],
    );
  });
});
