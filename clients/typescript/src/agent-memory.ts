/**
 * The household design's memory port, `AgentMemory`, and `CadernoAgentMemory`,
 * its adapter over caderno's HTTP API.
 *
 * The port has exactly four methods, in the design's order and shapes
 * (docs/architecture.md, "The contract"), each taking one object:
 * `getMessages({ threadId, limit? })`, `appendMessages({ threadId, resourceId, messages })`,
 * `getWorkingMemory({ resourceId })` → `WorkingMemory | undefined`,
 * `updateWorkingMemory({ resourceId, patch })` → `void`. A method may answer
 * at once or with a promise (the design allows both; a caller awaits either).
 * `getMessages` names no resource, so the adapter is bound to one resource and
 * its key: a thread id alone names a conversation of that resource, and the
 * server's key check keeps every other resource out.
 *
 * The working-memory shape mirrors the household example's pydantic model,
 * field for field: `WorkingMemory`, `Member` and `Goal` in
 * src/caderno/examples/household.py.
 */

import { BadRequestError } from "./errors.js";
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

/** A value now, or a promise of it: the design lets an adapter be synchronous or asynchronous. */
export type MaybePromise<T> = T | Promise<T>;

/** The household design's memory port: all an agent loop needs from its memory. */
export interface AgentMemory {
  /** The thread's messages, oldest first; `limit` keeps the newest N. */
  getMessages(input: { threadId: string; limit?: number }): MaybePromise<ChatMessage[]>;
  /** Append a turn to the resource's thread, all or nothing. */
  appendMessages(input: { threadId: string; resourceId: string; messages: ChatMessage[] }): MaybePromise<void>;
  /** The resource's working memory, or `undefined` when it was never set. */
  getWorkingMemory(input: { resourceId: string }): MaybePromise<WorkingMemory | undefined>;
  /** Merge a patch (RFC 7396: `null` deletes a field) into the resource's working memory. */
  updateWorkingMemory(input: { resourceId: string; patch: WorkingMemoryPatch }): MaybePromise<void>;
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
  /** The resource whose threads `getMessages` reads and `appendMessages` writes. */
  readonly resourceId: string;

  /** @throws InvalidIdError when `resourceId` cannot be a path segment (`..`, a `/`…): at once, not at the first call. */
  constructor(client: CadernoClient, resourceId: string) {
    segment("resource id", resourceId);
    this.client = client;
    this.resourceId = resourceId;
  }

  async getMessages({ threadId, limit }: { threadId: string; limit?: number }): Promise<ChatMessage[]> {
    const stored = await this.client.listMessages(this.resourceId, threadId, { limit });
    return stored.map(fromStored);
  }

  /**
   * @throws BadRequestError, before any request, when `resourceId` is not the adapter's resource:
   * `getMessages` reads the bound resource's threads, so a turn stored elsewhere would never be read back.
   */
  async appendMessages({
    threadId,
    resourceId,
    messages,
  }: {
    threadId: string;
    resourceId: string;
    messages: ChatMessage[];
  }): Promise<void> {
    if (resourceId !== this.resourceId) {
      throw new BadRequestError({
        type: "https://caderno.dev/problems/invalid-request",
        title: "Invalid request",
        status: 400,
        detail: `this memory is bound to resource ${JSON.stringify(this.resourceId)}; it cannot append to ${JSON.stringify(resourceId)}`,
      });
    }
    await this.client.appendMessages(this.resourceId, threadId, messages.map(toStored));
  }

  async getWorkingMemory({ resourceId }: { resourceId: string }): Promise<WorkingMemory | undefined> {
    return withDefaults(await this.client.getWorkingMemory(resourceId));
  }

  async updateWorkingMemory({ resourceId, patch }: { resourceId: string; patch: WorkingMemoryPatch }): Promise<void> {
    await this.client.patchWorkingMemory(resourceId, patch);
  }
}

/**
 * The stored object with the lists the household model defaults to `[]` (as pydantic fills them in).
 * The server stores the JSON as the application wrote it; members it does not know are kept.
 */
function withDefaults(state: WorkingMemoryState): WorkingMemory | undefined {
  if (state.data === null) return undefined;
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
