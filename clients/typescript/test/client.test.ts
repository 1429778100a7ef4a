/** CadernoClient against a real server: threads, messages, working memory, recall, facts and the notebook. */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";

import { CadernoClient } from "../src/index.js";
import { PACKAGE_ROOT, startServer, type Server } from "./support/server.js";

const R = "casa-gabriel";

describe("CadernoClient", () => {
  let server: Server;
  let client: CadernoClient;

  before(async () => {
    server = await startServer([R]);
    client = new CadernoClient({ baseUrl: `${server.baseUrl}/`, apiKey: server.keys[R]! });
  });
  after(async () => {
    await server?.stop();
  });

  test("threads: create, read, retitle, list, delete", async () => {
    const made = await client.createThread(R, { thread_id: "planos", title: "Planos", metadata: { app: "casa" } });
    assert.deepEqual([made.id, made.resource_id, made.title, made.metadata], ["planos", R, "Planos", { app: "casa" }]);
    assert.equal((await client.updateThread(R, "planos", { title: "Viagens" })).title, "Viagens");
    assert.deepEqual((await client.getThread(R, "planos")).metadata, { app: "casa" }); // a field left out is kept
    assert.ok((await client.listThreads(R)).some((t) => t.id === "planos"));
    await client.deleteThread(R, "planos");
    assert.ok(!(await client.listThreads(R)).some((t) => t.id === "planos"));
  });

  test("messages: append with positions, page back, retry with an idempotency key, pop", async () => {
    const turn = [
      { role: "user" as const, content: "Quanto gastamos em junho?" },
      {
        role: "assistant" as const,
        content: "",
        tool_calls: [{ id: "c1", name: "budgetTotal", arguments: { month: "2026-06" } }],
      },
      { role: "tool" as const, content: '{"total": 6778.3}', tool_call_id: "c1", name: "budgetTotal" },
      { role: "assistant" as const, content: "Em junho vocês gastaram R$ 6.778,30." },
    ];
    const stored = await client.appendMessages(R, "junho", turn, { idempotencyKey: "turn-1" });
    assert.deepEqual(
      stored.map((m) => m.position),
      [1, 2, 3, 4],
    );
    assert.deepEqual(stored[1]!.tool_calls, turn[1]!.tool_calls);
    const retried = await client.appendMessages(R, "junho", turn, { idempotencyKey: "turn-1" });
    assert.deepEqual(retried, stored); // the stored turn, not a second one
    assert.equal((await client.listMessages(R, "junho")).length, 4);
    assert.deepEqual(
      (await client.listMessages(R, "junho", { limit: 2 })).map((m) => m.position),
      [3, 4],
    );
    assert.deepEqual(
      (await client.listMessages(R, "junho", { before: 3 })).map((m) => m.position),
      [1, 2],
    );
    assert.deepEqual(await client.listMessages(R, "no-such-thread"), []);

    await client.appendMessages(R, "rascunho", [{ role: "user", content: "apagar" }]);
    assert.equal((await client.popMessage(R, "rascunho")).content, "apagar");
    assert.deepEqual(await client.listMessages(R, "rascunho"), []);
  });

  test("working memory: merge patches, versions as ETags, the log", async () => {
    const start = await client.getWorkingMemory(R);
    assert.deepEqual([start.data, start.version, start.etag], [null, 0, '"0"']);
    const one = await client.patchWorkingMemory(R, { members: [{ name: "Gabriel" }], currencyPreferred: "BRL" });
    const two = await client.patchWorkingMemory(
      R,
      { currencyPreferred: null, monthlyIncomeBRL: 14000 },
      { ifMatch: one.etag },
    );
    assert.deepEqual(two.data, { members: [{ name: "Gabriel" }], monthlyIncomeBRL: 14000 }); // null deleted
    assert.deepEqual([two.version, two.etag], [one.version + 1, `"${one.version + 1}"`]);
    const three = await client.patchWorkingMemory(R, { savingsRate: 0.3 }, { ifMatch: two.version });
    assert.equal(three.version, two.version + 1);
    assert.deepEqual(
      (await client.workingMemoryLog(R)).map((e) => e.patch),
      [
        { members: [{ name: "Gabriel" }], currencyPreferred: "BRL" },
        { currencyPreferred: null, monthlyIncomeBRL: 14000 },
        { savingsRate: 0.3 },
      ],
    );
  });

  test("recall finds a past message of another thread", async () => {
    await client.appendMessages(R, "terca", [
      { role: "user", content: "Estamos juntando para Amsterdam até setembro." },
      { role: "assistant", content: "Anotado." },
    ]);
    const hits = await client.recall(R, { query: "Amsterdam", recent: 0, salient: 0 });
    const found = hits.find((h) => h.message.content.includes("Amsterdam"));
    assert.ok(found, JSON.stringify(hits));
    assert.equal(found.thread_id, "terca");
    assert.ok(found.reasons.length > 0 && found.score > 0);
  });

  test("facts: set, change, list, history, forget", async () => {
    await client.putFact(R, "casa", "cidade", "São Paulo");
    const changed = await client.putFact(R, "casa", "cidade", "Recife");
    assert.deepEqual([changed.category, changed.key, changed.value, changed.source], ["casa", "cidade", "Recife", "user"]);
    assert.deepEqual(
      (await client.listFacts(R, { category: "casa" })).map((f) => f.value),
      ["Recife"],
    );
    assert.deepEqual((await client.factHistory(R, "casa", "cidade")).map((h) => h.value), ["São Paulo"]);
    await client.deleteFact(R, "casa", "cidade");
    assert.deepEqual(await client.listFacts(R, { category: "casa" }), []);
  });

  test("notebook: add, replace, remove, and the snapshot a new conversation would freeze", async () => {
    const added = await client.editNotebook(R, "user", { action: "add", content: "Gabriel prefere respostas curtas." });
    assert.equal(added.success, true);
    assert.deepEqual(added.entries, ["Gabriel prefere respostas curtas."]);
    await client.editNotebook(R, "user", { action: "replace", old_text: "curtas", content: "Gabriel prefere listas." });
    const book = await client.getNotebook(R);
    assert.deepEqual(book.entries.user, ["Gabriel prefere listas."]);
    assert.match(book.snapshot.user ?? "", /Gabriel prefere listas\./);
    const frozen = await client.getNotebook(R, { threadId: "never-talked" });
    assert.deepEqual(frozen.snapshot, { memory: null, user: null }); // no conversation froze one yet
    await client.editNotebook(R, "user", { action: "remove", old_text: "listas" });
    assert.deepEqual((await client.getNotebook(R)).entries.user ?? [], []);
  });

  test("the README's example is examples/usage.ts, and it runs", async () => {
    const example = (await readFile(join(PACKAGE_ROOT, "examples/usage.ts"), "utf8")).trim();
    const readme = await readFile(join(PACKAGE_ROOT, "README.md"), "utf8");
    assert.ok(readme.includes("```ts\n" + example + "\n```"), "README.md must show examples/usage.ts as it is");
    const { stdout } = await promisify(execFile)(process.execPath, [join(PACKAGE_ROOT, "build/examples/usage.js")], {
      env: { ...process.env, CADERNO_URL: server.baseUrl, CADERNO_KEY: server.keys[R]! },
      timeout: 30_000,
    });
    assert.match(stdout, /^2 \[/); // two messages in "segunda", then the goals
    assert.match(stdout, /name: 'Amsterdam'/);
    assert.ok(!stdout.includes("changed meanwhile")); // nobody else wrote between the read and the patch
    assert.match(stdout, /'Ganhamos R\$ 14\.000 por mês\.'/); // recall found Monday's words
    assert.equal((await client.getWorkingMemory(R)).data?.savingsRate, 0.3);
  });
});
