/**
 * The household design's memory port, `AgentMemory`, and `CadernoAgentMemory`,
 * its adapter over caderno's HTTP API.
 *
 * The port has exactly four methods, in the design's order and signatures
 * (caderno calls an adapter of this form positionally; see
 * src/caderno/memory/agent_memory.py):
 * `getMessages(threadId, limit)`, `appendMessages(threadId, messages)`,
 * `getWorkingMemory(resourceId)`, `updateWorkingMemory(resourceId, patch)`.
 * The thread methods never see the resource, so the adapter is bound to one
 * resource and its key: a thread id alone names a conversation of that
 * resource, and the server's key check keeps every other resource out.
 *
 * The working-memory shape mirrors the household example's pydantic model,
 * field for field: `WorkingMemory`, `Member` and `Goal` in
 * src/caderno/examples/household.py.
 */

import { CadernoClient, type Message, type MessageCreate, segment, type WorkingMemoryState } from "./client.js";

/** A person of the household (household.py `Member`). */
export interface Member {
  name: string;
  /** This person's monthly income, if known. */
  monthlyIncomeBRL?: number | null;
}

/** A savings goal (household.py `Goal`). */
export interface Goal {
  name: string;
  /** Amount with currency, e.g. "EUR 6000" or "BRL 20000". */
  target: string;
  /** ISO date, e.g. "2026-09-01". */
  deadline: string;
  /** Saved so far, in the target's currency. */
  savedInTarget?: string | null;
}

/** What the agent keeps about the household between conversations (household.py `WorkingMemory`). */
export interface WorkingMemory {
  /** Members as `{ name }`; a bare name is still read (memories written before members became objects). */
  members: (Member | string)[];
  currencyPreferred?: string | null;
  /** The household's monthly income. */
  monthlyIncomeBRL?: number | null;
  /** Share of the income the household can save each month, e.g. 0.3. */
  savingsRate?: number | null;
  /** Reais per euro, for goals in euros, e.g. 6.2. */
  eurToBrl?: number | null;
  activeGoals: Goal[];
}

/** A JSON Merge Patch of the working memory (RFC 7396): a field set replaces, `null` deletes it. */
export type WorkingMemoryPatch = { [K in keyof WorkingMemory]?: WorkingMemory[K] | null };

/** A tool call an assistant message makes. */
export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as an object (or as the model's raw text, when it could not be read as one). */
  arguments: Record<string, unknown> | string;
}

/** One message of a conversation. */
export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  /** An assistant message's tool calls. */
  toolCalls?: ToolCall[];
  /** A tool message: the call it answers. */
  toolCallId?: string;
  /** A tool message: the tool's name. */
  name?: string;
  /** Given by the store when the message is appended. */
  id?: string;
  /** Given by the store when the message is appended (ISO 8601). */
  createdAt?: string;
}

/** The household design's memory port: all an agent loop needs from its memory. */
export interface AgentMemory {
  /** The thread's messages, oldest first; `limit` keeps the newest N. */
  getMessages(threadId: string, limit?: number): Promise<ChatMessage[]>;
  /** Append a turn to the thread, all or nothing. */
  appendMessages(threadId: string, messages: ChatMessage[]): Promise<void>;
  /** The resource's working memory, or `null` when it was never set. */
  getWorkingMemory(resourceId: string): Promise<WorkingMemory | null>;
  /** Merge a patch into the resource's working memory; returns the result. */
  updateWorkingMemory(resourceId: string, patch: WorkingMemoryPatch): Promise<WorkingMemory>;
}

/**
 * `AgentMemory` over `caderno serve`, bound to one resource and a key for it.
 *
 * ```ts
 * const memory = new CadernoAgentMemory(new CadernoClient({ baseUrl, apiKey }), "casa-gabriel");
 * ```
 */
export class CadernoAgentMemory implements AgentMemory {
  readonly client: CadernoClient;
  /** The resource whose threads `getMessages` and `appendMessages` read and write. */
  readonly resourceId: string;

  /** @throws InvalidIdError when `resourceId` cannot be a path segment (`..`, a `/`…): at once, not at the first call. */
  constructor(client: CadernoClient, resourceId: string) {
    segment("resource id", resourceId);
    this.client = client;
    this.resourceId = resourceId;
  }

  async getMessages(threadId: string, limit?: number): Promise<ChatMessage[]> {
    const stored = await this.client.listMessages(this.resourceId, threadId, { limit });
    return stored.map(fromStored);
  }

  async appendMessages(threadId: string, messages: ChatMessage[]): Promise<void> {
    await this.client.appendMessages(this.resourceId, threadId, messages.map(toStored));
  }

  async getWorkingMemory(resourceId: string): Promise<WorkingMemory | null> {
    return withDefaults(await this.client.getWorkingMemory(resourceId));
  }

  async updateWorkingMemory(resourceId: string, patch: WorkingMemoryPatch): Promise<WorkingMemory> {
    const state = await this.client.patchWorkingMemory(resourceId, patch);
    // A patch always leaves an object behind (an empty patch included), so data is never null here.
    return withDefaults(state) ?? { members: [], activeGoals: [] };
  }
}

/**
 * The stored object with the lists the household model defaults to `[]` (as pydantic fills them in).
 * The server stores the JSON as the application wrote it; members it does not know are kept.
 */
function withDefaults(state: WorkingMemoryState): WorkingMemory | null {
  if (state.data === null) return null;
  const data = state.data as Partial<WorkingMemory>;
  return { ...data, members: data.members ?? [], activeGoals: data.activeGoals ?? [] };
}

function toStored(message: ChatMessage): MessageCreate {
  return {
    role: message.role,
    content: message.content,
    tool_calls: message.toolCalls?.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })) ?? null,
    tool_call_id: message.toolCallId ?? null,
    name: message.name ?? null,
  };
}

function fromStored(message: Message): ChatMessage {
  const out: ChatMessage = { role: asRole(message.role), content: message.content };
  if (message.tool_calls) {
    out.toolCalls = message.tool_calls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments }));
  }
  if (message.tool_call_id != null) out.toolCallId = message.tool_call_id;
  if (message.name != null) out.name = message.name;
  if (message.id != null) out.id = message.id;
  if (message.created_at != null) out.createdAt = message.created_at;
  return out;
}

function asRole(role: string): ChatMessage["role"] {
  if (role === "system" || role === "user" || role === "assistant" || role === "tool") return role;
  throw new TypeError(`caderno returned a message with an unknown role ${JSON.stringify(role)}`);
}
