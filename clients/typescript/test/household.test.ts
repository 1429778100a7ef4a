/**
 * The household design's three scenarios, through `CadernoAgentMemory` on a
 * real `caderno serve`, driven by a TypeScript chat loop and a scripted model
 * (the same story as `scenario_1..3` of tests/agent/test_chat.py):
 *
 * 1. Monday, thread-1: "Quanto gastamos em junho?" — a budget tool call; the
 *    turn is stored as the design counts it, `[user, final assistant]`, and
 *    there is no working memory yet (`undefined`).
 * 2. The app stores the couple's working memory; the model, which sees the
 *    previous turn and that memory, adds the Amsterdam goal with a patch;
 *    getMessages now has 4 messages.
 * 3. Wednesday, a new process (a new client) and a new thread: "e a meta de
 *    Amsterdam, lembra?" — no history, and the answer comes from the
 *    working-memory block alone.
 *
 * The chat loop is written against the package's `AgentMemory`, the design's
 * exact interface; the same scenarios also run on a synchronous in-memory
 * adapter, which the design allows.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  type AgentMemory,
  BadRequestError,
  CadernoAgentMemory,
  CadernoClient,
  type ChatMessage,
  type WorkingMemory,
  type WorkingMemoryPatch,
} from "../src/index.js";
import { HouseholdChat, ScriptedModel, assistant, call, readWorkingMemory } from "./support/household-chat.js";
import { startServer, type Server } from "./support/server.js";

const R = "casa-gabriel";
const WM0: WorkingMemory = {
  members: [{ name: "Gabriel" }, { name: "esposa" }],
  currencyPreferred: "BRL",
  monthlyIncomeBRL: 14000,
  activeGoals: [],
};
const AMSTERDAM = { name: "Amsterdam", target: "EUR 6000", deadline: "2026-09-01", savedInTarget: "EUR 500" };

// Compile-time: the adapter is the design's port (tsc fails the build otherwise).
const _implements: (memory: CadernoAgentMemory) => AgentMemory = (memory) => memory;
void _implements;

/** The design's port answered synchronously, from a map: what a test fake of the household app looks like. */
class SyncAgentMemory implements AgentMemory {
  readonly threads = new Map<string, ChatMessage[]>();
  readonly workingMemory = new Map<string, WorkingMemory>();

  getMessages({ threadId, limit }: { threadId: string; limit?: number }): ChatMessage[] {
    const all = this.threads.get(threadId) ?? [];
    return limit === undefined ? [...all] : all.slice(-limit);
  }

  appendMessages({ threadId, messages }: { threadId: string; resourceId: string; messages: ChatMessage[] }): void {
    this.threads.set(threadId, [...(this.threads.get(threadId) ?? []), ...structuredClone(messages)]);
  }

  getWorkingMemory({ resourceId }: { resourceId: string }): WorkingMemory | undefined {
    const wm = this.workingMemory.get(resourceId);
    return wm === undefined ? undefined : structuredClone(wm);
  }

  updateWorkingMemory({ resourceId, patch }: { resourceId: string; patch: WorkingMemoryPatch }): void {
    const merged: Record<string, unknown> = { members: [], activeGoals: [], ...this.workingMemory.get(resourceId) };
    for (const [key, value] of Object.entries(patch)) {
      if (value === null) delete merged[key];
      else merged[key] = structuredClone(value);
    }
    this.workingMemory.set(resourceId, { members: [], activeGoals: [], ...merged } as WorkingMemory);
  }
}

/** Messages without what the store adds (id, createdAt): what the loop sent. */
function sent(messages: ChatMessage[]): ChatMessage[] {
  return messages.map(({ id: _id, createdAt: _at, ...rest }) => rest);
}

function conversation(prompt: ChatMessage[]): [string, string][] {
  return prompt.filter((m) => m.role !== "system").map((m) => [m.role, m.content]);
}

/** The three scenarios on `open()`'s memory; `open` is called again for Wednesday's new process. */
function scenarios(name: string, setUp: () => Promise<void>, tearDown: () => Promise<void>, open: () => AgentMemory): void {
  describe(name, () => {
    const monday = open;

    before(setUp);
    after(tearDown);

    test("1: a turn with a tool call is stored as [user, final assistant]", async () => {
      const memory = monday();
      const model = new ScriptedModel([
        call("budgetTotal", { month: "2026-06" }),
        assistant("Em junho vocês gastaram R$ 6.778,30."),
      ]);
      const turn = await new HouseholdChat({ model, memory }).ask(R, "thread-1", "Quanto gastamos em junho?");

      assert.deepEqual(
        model.requests[0]!.map((m) => m.role),
        ["system", "user"],
      ); // no history, no working memory yet
      assert.equal(turn.toolCalls[0]!.name, "budgetTotal");
      assert.equal((turn.toolCalls[0]!.result as { total: number }).total, 6778.3);

      assert.deepEqual(
        turn.messages.map((m) => m.role),
        ["user", "assistant", "tool", "assistant"],
      ); // the tool steps stay in the turn…
      const stored = await memory.getMessages({ threadId: "thread-1" });
      assert.deepEqual(
        stored.map((m) => [m.role, m.content]),
        [
          ["user", "Quanto gastamos em junho?"],
          ["assistant", "Em junho vocês gastaram R$ 6.778,30."],
        ],
      ); // …and the thread keeps the user's message and the final answer
      assert.deepEqual(sent(stored), turn.appended);
      assert.equal(await memory.getWorkingMemory({ resourceId: R }), undefined);
    });

    test("2: the model sees the last turn and the working memory, and adds a goal by patch", async () => {
      const memory = monday();
      assert.equal(await memory.updateWorkingMemory({ resourceId: R, patch: WM0 }), undefined); // the app writes what the couple told it
      assert.deepEqual(await memory.getWorkingMemory({ resourceId: R }), WM0);
      const model = new ScriptedModel([
        call("updateWorkingMemory", { patch: { activeGoals: [AMSTERDAM] } }, "call_2"),
        assistant("Anotado: Amsterdam, EUR 6000 até 2026-09-01."),
      ]);
      const turn = await new HouseholdChat({ model, memory }).ask(
        R,
        "thread-1",
        "Estamos juntando EUR 6000 para Amsterdam até 2026-09-01.",
      );

      const seen = model.requests[0]!;
      assert.deepEqual(conversation(seen).slice(0, 1), [["user", "Quanto gastamos em junho?"]]);
      assert.ok(conversation(seen).some(([, text]) => text.includes("R$ 6.778,30"))); // the previous turn
      assert.deepEqual(readWorkingMemory(seen), WM0);

      const wm = await memory.getWorkingMemory({ resourceId: R });
      assert.deepEqual(wm, { ...WM0, activeGoals: [AMSTERDAM] }); // merged: members and income kept
      assert.deepEqual(turn.workingMemory, wm);
      const stored = await memory.getMessages({ threadId: "thread-1" });
      assert.equal(stored.length, 4); // getMessages now has 4 messages
      assert.deepEqual(sent(stored.slice(2)), turn.appended);
      assert.deepEqual((await memory.getMessages({ threadId: "thread-1", limit: 2 })).map((m) => m.content), [
        "Estamos juntando EUR 6000 para Amsterdam até 2026-09-01.",
        "Anotado: Amsterdam, EUR 6000 até 2026-09-01.",
      ]);
    });

    test("3: Wednesday, a new thread in a new process remembers the goal from working memory alone", async () => {
      const wednesday = monday(); // a new client: nothing carried over in this process
      const before = await wednesday.getMessages({ threadId: "thread-1" });
      // The answer is made from the prompt: take the working memory away and it changes.
      const fromPrompt = (prompt: ChatMessage[]): ChatMessage => {
        const goal = readWorkingMemory(prompt)?.activeGoals.find((g) => g.name === "Amsterdam");
        return assistant(
          goal ? `Sim: ${goal.name}, ${goal.target} até ${goal.deadline}.` : "Não tenho nenhuma meta de Amsterdam anotada.",
        );
      };
      const model = new ScriptedModel([fromPrompt]);
      const turn = await new HouseholdChat({ model, memory: wednesday }).ask(
        R,
        "thread-2",
        "e a meta de Amsterdam, lembra?",
      );

      assert.deepEqual(
        model.requests[0]!.map((m) => m.role),
        ["system", "system", "user"],
      ); // new thread: no history
      assert.equal(turn.reply.content, "Sim: Amsterdam, EUR 6000 até 2026-09-01.");
      assert.deepEqual(turn.toolCalls, []);
      assert.deepEqual(await wednesday.getMessages({ threadId: "thread-1" }), before);
      assert.deepEqual(
        (await wednesday.getMessages({ threadId: "thread-2" })).map((m) => [m.role, m.content]),
        [
          ["user", "e a meta de Amsterdam, lembra?"],
          ["assistant", "Sim: Amsterdam, EUR 6000 até 2026-09-01."],
        ],
      );

      // The same question with the goal removed (a null in a merge patch deletes) gets the other answer.
      await wednesday.updateWorkingMemory({ resourceId: R, patch: { activeGoals: null } });
      const again = await new HouseholdChat({ model: new ScriptedModel([fromPrompt]), memory: wednesday }).ask(
        R,
        "thread-3",
        "e a meta de Amsterdam, lembra?",
      );
      assert.equal(again.reply.content, "Não tenho nenhuma meta de Amsterdam anotada.");
      assert.deepEqual((await wednesday.getWorkingMemory({ resourceId: R }))?.activeGoals, []);
    });
  });
}

let server: Server;
scenarios(
  "the household scenarios through CadernoAgentMemory",
  async () => {
    server = await startServer([R]);
  },
  async () => {
    await server?.stop();
  },
  () => new CadernoAgentMemory(new CadernoClient({ baseUrl: server.baseUrl, apiKey: server.keys[R]! }), R),
);

// One store for the whole story: Wednesday's "new process" reads what Monday wrote.
const shared = new SyncAgentMemory();
scenarios(
  "the household scenarios through a synchronous AgentMemory",
  async () => {},
  async () => {},
  () => shared,
);

describe("CadernoAgentMemory's appendMessages", () => {
  let other: Server;
  before(async () => {
    other = await startServer([R]);
  });
  after(async () => {
    await other?.stop();
  });

  test("refuses a resource other than its own before any request, and stores nothing", async () => {
    const memory = new CadernoAgentMemory(new CadernoClient({ baseUrl: other.baseUrl, apiKey: other.keys[R]! }), R);
    await assert.rejects(
      memory.appendMessages({ threadId: "t", resourceId: "casa-outra", messages: [{ role: "user", content: "oi" }] }),
      (error: unknown) => error instanceof BadRequestError && /bound to resource "casa-gabriel"/.test(error.detail),
    );
    assert.deepEqual(await memory.getMessages({ threadId: "t" }), []);
  });
});
