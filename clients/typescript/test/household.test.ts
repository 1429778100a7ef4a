/**
 * The household design's three scenarios, through `CadernoAgentMemory` on a
 * real `caderno serve`, driven by a TypeScript chat loop and a scripted model
 * (the same story as `scenario_1..3` of tests/agent/test_chat.py):
 *
 * 1. Monday, thread-1: "Quanto gastamos em junho?" — a budget tool call, the
 *    whole turn stored in order, no working memory yet.
 * 2. The app stores the couple's working memory; the model, which sees the
 *    previous turn and that memory, adds the Amsterdam goal with a patch.
 * 3. Wednesday, a new process (a new client) and a new thread: "e a meta de
 *    Amsterdam, lembra?" — no history, and the answer comes from the
 *    working-memory block alone.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { CadernoAgentMemory, CadernoClient, type ChatMessage, type WorkingMemory } from "../src/index.js";
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

/** Messages without what the store adds (id, createdAt): what the loop sent. */
function sent(messages: ChatMessage[]): ChatMessage[] {
  return messages.map(({ id: _id, createdAt: _at, ...rest }) => rest);
}

function conversation(prompt: ChatMessage[]): [string, string][] {
  return prompt.filter((m) => m.role !== "system").map((m) => [m.role, m.content]);
}

describe("the household scenarios through CadernoAgentMemory", () => {
  let server: Server;
  const monday = (): CadernoAgentMemory =>
    new CadernoAgentMemory(new CadernoClient({ baseUrl: server.baseUrl, apiKey: server.keys[R]! }), R);

  before(async () => {
    server = await startServer([R]);
  });
  after(async () => {
    await server?.stop();
  });

  test("1: a tool call's turn is stored whole and in order", async () => {
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

    const stored = await memory.getMessages("thread-1");
    assert.deepEqual(
      stored.map((m) => m.role),
      ["user", "assistant", "tool", "assistant"],
    );
    assert.deepEqual(sent(stored), turn.messages); // message by message, as the loop sent them
    assert.equal(stored[2]!.toolCallId, "call_1");
    assert.equal(JSON.parse(stored[2]!.content).total, 6778.3);
    assert.ok(stored.every((m) => typeof m.id === "string" && typeof m.createdAt === "string"));
    assert.equal(await memory.getWorkingMemory(R), null);
  });

  test("2: the model sees the last turn and the working memory, and adds a goal by patch", async () => {
    const memory = monday();
    const set = await memory.updateWorkingMemory(R, WM0); // the app writes what the couple told it
    assert.deepEqual(set, WM0);
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

    const wm = await memory.getWorkingMemory(R);
    assert.deepEqual(wm, { ...WM0, activeGoals: [AMSTERDAM] }); // merged: members and income kept
    assert.deepEqual(turn.workingMemory, wm);
    const stored = await memory.getMessages("thread-1");
    assert.equal(stored.length, 8);
    assert.deepEqual(sent(stored.slice(4)), turn.messages);
    assert.deepEqual((await memory.getMessages("thread-1", 2)).map((m) => m.content), [
      '{"ok":true}',
      "Anotado: Amsterdam, EUR 6000 até 2026-09-01.",
    ]);
  });

  test("3: Wednesday, a new thread in a new process remembers the goal from working memory alone", async () => {
    const wednesday = monday(); // a new client: nothing carried over in this process
    const before = await wednesday.getMessages("thread-1");
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
    assert.deepEqual(await wednesday.getMessages("thread-1"), before);
    assert.deepEqual(
      (await wednesday.getMessages("thread-2")).map((m) => [m.role, m.content]),
      [
        ["user", "e a meta de Amsterdam, lembra?"],
        ["assistant", "Sim: Amsterdam, EUR 6000 até 2026-09-01."],
      ],
    );

    // The same question with the goal removed (a null in a merge patch deletes) gets the other answer.
    await wednesday.updateWorkingMemory(R, { activeGoals: null });
    const again = await new HouseholdChat({ model: new ScriptedModel([fromPrompt]), memory: wednesday }).ask(
      R,
      "thread-3",
      "e a meta de Amsterdam, lembra?",
    );
    assert.equal(again.reply.content, "Não tenho nenhuma meta de Amsterdam anotada.");
    assert.deepEqual((await wednesday.getWorkingMemory(R))?.activeGoals, []);
  });
});
