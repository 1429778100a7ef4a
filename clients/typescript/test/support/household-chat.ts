/**
 * A small AgentChat-like loop over any `AgentMemory`, as the household
 * application would write it in TypeScript, with a scripted model standing
 * in for the LLM.
 *
 * Per turn it reads the thread's recent messages and the resource's working
 * memory, builds the prompt (instructions, a `WORKING MEMORY` block with the
 * JSON, the history, the user's words), runs the model ⇄ tool loop, then
 * stores the turn as the design counts it — the user's message and the final
 * answer; the tool steps stay in the turn — with `appendMessages`, and applies
 * the model's working-memory patches with `updateWorkingMemory`: only the four
 * methods, each awaited, so a synchronous adapter serves as well.
 * The ledger and the tool's answer mirror `BudgetTool` of
 * src/caderno/examples/household.py.
 */

import type { AgentMemory, ChatMessage, ToolCall, WorkingMemory, WorkingMemoryPatch } from "../../src/index.js";

/** The title of the working-memory block, as caderno's AgentChat writes it. */
export const WM_HEADER = "WORKING MEMORY";

/** What the model gets besides the messages: the tools' names. */
export type Model = { complete(prompt: ChatMessage[], tools: string[]): Promise<ChatMessage> };

/** A reply, or a reply made from the prompt (so the answer depends on what the model was shown). */
export type Step = ChatMessage | ((prompt: ChatMessage[]) => ChatMessage);

/** Replays its steps in order and records every prompt it receives. */
export class ScriptedModel implements Model {
  readonly requests: ChatMessage[][] = [];
  readonly #steps: Step[];

  constructor(steps: Step[]) {
    this.#steps = [...steps];
  }

  async complete(prompt: ChatMessage[]): Promise<ChatMessage> {
    this.requests.push(structuredClone(prompt));
    const step = this.#steps.shift();
    if (step === undefined) throw new Error("the scripted model has no step left");
    return typeof step === "function" ? step(prompt) : step;
  }
}

export function assistant(content: string): ChatMessage {
  return { role: "assistant", content };
}

export function call(name: string, args: Record<string, unknown>, id = "call_1"): ChatMessage {
  return { role: "assistant", content: "", toolCalls: [{ id, name, arguments: args }] };
}

/** The working memory as a prompt shows it, or undefined. */
export function readWorkingMemory(prompt: ChatMessage[]): WorkingMemory | undefined {
  const block = prompt.find((m) => m.role === "system" && m.content.startsWith(WM_HEADER));
  const json = block?.content.match(/```json\n([\s\S]*?)\n```/)?.[1];
  return json === undefined ? undefined : (JSON.parse(json) as WorkingMemory);
}

/** The couple's ledger (household.py `DEFAULT_LEDGER`). */
const LEDGER: Record<string, [string, number][]> = {
  "2026-05": [
    ["aluguel", 4200.0],
    ["mercado", 1850.4],
    ["transporte", 610.0],
  ],
  "2026-06": [
    ["aluguel", 4200.0],
    ["mercado", 1732.9],
    ["transporte", 655.5],
    ["farmácia", 189.9],
  ],
};

/** Total household spending in a month, with the amount per category (household.py `budget_total`). */
export function budgetTotal(args: Record<string, unknown>): unknown {
  const month = String(args.month);
  if (!/^\d{4}-\d{2}$/.test(month)) throw new Error(`month must look like YYYY-MM, got ${JSON.stringify(month)}`);
  const items = LEDGER[month] ?? [];
  const total = Math.round(items.reduce((sum, [, value]) => sum + value, 0) * 100) / 100;
  return { month, currency: "BRL", total, by_category: Object.fromEntries(items) };
}

export interface ToolRecord {
  name: string;
  args: Record<string, unknown> | string;
  result: unknown;
}

export interface Turn {
  reply: ChatMessage;
  toolCalls: ToolRecord[];
  /** The turn's messages, tool steps included, as the model saw them. */
  messages: ChatMessage[];
  /** What was appended: the user's message and the final answer. */
  appended: ChatMessage[];
  /** The working memory after the turn's patches (as the first read saw it when there were none). */
  workingMemory: WorkingMemory | undefined;
}

export interface HouseholdChatOptions {
  model: Model;
  memory: AgentMemory;
  tools?: Record<string, (args: Record<string, unknown>) => unknown>;
  instructions?: string;
  /** How many of the thread's newest messages the prompt shows. */
  historyLimit?: number;
  /** Most model calls in one turn. */
  maxSteps?: number;
}

/** The tool every chat offers: the model changes working memory through it (applied when the turn is stored). */
const UPDATE_WM = "updateWorkingMemory";

export class HouseholdChat {
  readonly #o: Required<HouseholdChatOptions>;

  constructor(options: HouseholdChatOptions) {
    this.#o = {
      tools: { budgetTotal },
      instructions: "Você é o assistente financeiro da casa. Responda em português.",
      historyLimit: 20,
      maxSteps: 8,
      ...options,
    };
  }

  async ask(resourceId: string, threadId: string, text: string): Promise<Turn> {
    const { memory, model, tools } = this.#o;
    const [history, wm] = await Promise.all([
      memory.getMessages({ threadId, limit: this.#o.historyLimit }),
      memory.getWorkingMemory({ resourceId }),
    ]);
    const system: ChatMessage[] = [{ role: "system", content: this.#o.instructions }];
    if (wm !== undefined) {
      system.push({ role: "system", content: `${WM_HEADER}:\n\`\`\`json\n${JSON.stringify(wm)}\n\`\`\`` });
    }
    const turn: ChatMessage[] = [{ role: "user", content: text }];
    const records: ToolRecord[] = [];
    const patches: WorkingMemoryPatch[] = [];
    for (let step = 0; step < this.#o.maxSteps; step++) {
      const reply = await model.complete([...system, ...history, ...turn], [...Object.keys(tools), UPDATE_WM]);
      turn.push(reply);
      if (!reply.toolCalls?.length) {
        const appended = [turn[0]!, reply];
        await memory.appendMessages({ threadId, resourceId, messages: appended });
        for (const patch of patches) await memory.updateWorkingMemory({ resourceId, patch });
        const state = patches.length ? await memory.getWorkingMemory({ resourceId }) : wm;
        return { reply, toolCalls: records, messages: turn, appended, workingMemory: state };
      }
      for (const toolCall of reply.toolCalls) {
        const result = this.#run(toolCall, patches);
        records.push({ name: toolCall.name, args: toolCall.arguments, result });
        turn.push({ role: "tool", toolCallId: toolCall.id, name: toolCall.name, content: JSON.stringify(result) });
      }
    }
    throw new Error(`no final answer in ${this.#o.maxSteps} model calls: nothing stored`);
  }

  /** A tool's result; an error becomes the model's to read, and the turn goes on. */
  #run(toolCall: ToolCall, patches: WorkingMemoryPatch[]): unknown {
    const args = typeof toolCall.arguments === "string" ? {} : toolCall.arguments;
    try {
      if (toolCall.name === UPDATE_WM) {
        const patch = args.patch;
        if (typeof patch !== "object" || patch === null || Array.isArray(patch)) {
          throw new Error("patch must be a JSON object");
        }
        patches.push(patch as WorkingMemoryPatch);
        return { ok: true };
      }
      const tool = this.#o.tools[toolCall.name];
      if (tool === undefined) throw new Error(`unknown tool ${toolCall.name}`);
      return tool(args);
    } catch (error) {
      return { error: error instanceof Error ? error.message : String(error) };
    }
  }
}
