/**
 * `CadernoClient`: caderno's HTTP API (`caderno serve`) for threads, messages,
 * working memory, recall, facts and the notebook.
 *
 * Its request and response types are generated from the server's
 * `/openapi.json` (the committed snapshot `openapi.json`, by the pinned
 * `openapi-typescript`; see the README), so a change to the API changes these
 * types at the next build. Every route takes the resource from the path and a
 * key (`Authorization: Bearer cad_…`) that must be allowed to see it; a
 * resource the key may not see answers 404, exactly like one that does not
 * exist. Errors are thrown as the classes of `errors.ts`.
 *
 * Every id travels as one path segment, built by `segment()`: an id that could
 * become a path (`.`, `..`, a `/`, a control or invisible character) throws
 * `InvalidIdError` before any request is made.
 */

import { errorFor, InvalidIdError } from "./errors.js";
import type { components } from "./generated/openapi.js";

type Schemas = components["schemas"];

export type Thread = Schemas["ThreadOut"];
export type ThreadCreate = Schemas["ThreadIn"];
export type ThreadPatch = Schemas["ThreadPatch"];
/** A stored message: with its `id`, `created_at` and `position` in the thread (1, 2, 3…). */
export type Message = Schemas["MessageOut"];
/** A message to append. */
export type MessageCreate = Schemas["MessageIn"];
export type WorkingMemoryLogEntry = Schemas["WorkingMemoryLogEntry"];
export type RecallRequest = Schemas["RecallIn"];
export type RecallHit = Schemas["RecallHit"];
export type Fact = Schemas["FactOut"];
export type FactHistoryEntry = Schemas["FactHistoryEntry"];
export type Notebook = Schemas["NotebookOut"];
export type NotebookEdit = Schemas["NotebookIn"];
export type NotebookResult = Schemas["NotebookResult"];
export type NotebookTarget = "memory" | "user";

/** The working memory with its version and that version's `ETag` (`"0"` when never set). */
export type WorkingMemoryState = Schemas["WorkingMemoryOut"] & {
  /** The `ETag` header: pass it back as `ifMatch` to change only this version. */
  etag: string;
};

export interface CadernoClientOptions {
  /** Where `caderno serve` listens, e.g. `http://127.0.0.1:8765`. */
  baseUrl: string;
  /** A key made by `caderno keys create --resource R` (`cad_…`). */
  apiKey: string;
  /** The `fetch` to use (default: the global one of Node 20 and browsers). */
  fetch?: typeof fetch;
}

type Query = Record<string, string | number | undefined>;

interface Call {
  query?: Query;
  /** A JSON body; sent as `contentType` (default `application/json`). */
  body?: unknown;
  contentType?: string;
  headers?: Record<string, string>;
}

const MERGE_PATCH = "application/merge-patch+json";

/**
 * What an id that travels as a path segment never holds, the inspector's rule (app.js `UNSAFE`,
 * caderno.core.validate `check_name`): a `/`, C0 and C1 control characters, and the invisible
 * characters of caderno.core.text `first_invisible` (format characters, line separators, blank
 * letters), which make an id shown to a person look like another.
 */
const UNSAFE = /[/\u0000-\u001f\u007f-\u009f\p{Cf}\u034f\u115f\u1160\u17b4\u17b5\u180e\u2028\u2029\u2800\u3164\uffa0]/u;

/** An id checked and encoded as one URL path segment: only `segment()` makes one. */
export type Segment = string & { readonly __segment: unique symbol };

/** The fixed words of the API's paths; anything else in a path must be a `Segment`. */
type Word = "threads" | "messages" | "last" | "working-memory" | "log" | "recall" | "facts" | "history" | "notebook";

/**
 * One id as one URL path segment, or an `InvalidIdError` (nothing is sent).
 *
 * `encodeURIComponent` leaves `.` and `..` as they are, and `fetch` resolves such segments before
 * it sends: `popMessage("r", "..")` would delete message `last` of the resource, whatever thread
 * holds it. A backslash is safe only because it is always sent as `%5C`.
 *
 * @param what what the id names, for the refusal's sentence (`thread id`).
 * @param id the id as the caller gave it.
 */
export function segment(what: string, id: unknown): Segment {
  const text = id === null || id === undefined ? "" : String(id);
  if (text === "" || text === "." || text === ".." || UNSAFE.test(text)) throw new InvalidIdError(what, text);
  return encodeURIComponent(text) as Segment;
}

const resourceId = (resource: string): Segment => segment("resource id", resource);
const threadId = (thread: string): Segment => segment("thread id", thread);
const fact = (category: string, key: string): Segment[] => [
  segment("fact category", category),
  segment("fact key", key),
];

export class CadernoClient {
  readonly baseUrl: string;
  readonly #apiKey: string;
  readonly #fetch: typeof fetch;

  constructor(options: CadernoClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#apiKey = options.apiKey;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  // -- threads ------------------------------------------------------------------------

  /** The resource's threads, most recently active first. */
  async listThreads(resource: string): Promise<Thread[]> {
    return (await this.#call<Thread[]>("GET", [resourceId(resource), "threads"])).data;
  }

  /** Create an empty thread (`ConflictError` when the resource already has that id). */
  async createThread(resource: string, thread: ThreadCreate = {}): Promise<Thread> {
    return (await this.#call<Thread>("POST", [resourceId(resource), "threads"], { body: thread })).data;
  }

  async getThread(resource: string, thread: string): Promise<Thread> {
    return (await this.#call<Thread>("GET", [resourceId(resource), "threads", threadId(thread)])).data;
  }

  /** Change the title and/or metadata: a field left out is kept, `null` clears it. */
  async updateThread(resource: string, thread: string, patch: ThreadPatch): Promise<Thread> {
    const path = [resourceId(resource), "threads", threadId(thread)] as const;
    return (await this.#call<Thread>("PATCH", path, { body: patch })).data;
  }

  /** Delete the thread and its messages. */
  async deleteThread(resource: string, thread: string): Promise<void> {
    await this.#call("DELETE", [resourceId(resource), "threads", threadId(thread)]);
  }

  // -- messages -----------------------------------------------------------------------

  /**
   * The thread's messages, oldest first (a thread that does not exist reads as `[]`).
   *
   * @param options.limit only the newest N.
   * @param options.before only messages before this position (paging back).
   */
  async listMessages(
    resource: string,
    thread: string,
    options: { limit?: number; before?: number } = {},
  ): Promise<Message[]> {
    const query = { limit: options.limit, before: options.before };
    const path = [resourceId(resource), "threads", threadId(thread), "messages"] as const;
    return (await this.#call<Message[]>("GET", path, { query })).data;
  }

  /**
   * Append a turn in one transaction (all or nothing); returns the stored messages.
   *
   * @param options.idempotencyKey a retry with the same key returns the stored messages, never a second copy.
   */
  async appendMessages(
    resource: string,
    thread: string,
    messages: MessageCreate[],
    options: { idempotencyKey?: string } = {},
  ): Promise<Message[]> {
    const headers: Record<string, string> =
      options.idempotencyKey === undefined ? {} : { "Idempotency-Key": options.idempotencyKey };
    const path = [resourceId(resource), "threads", threadId(thread), "messages"] as const;
    return (await this.#call<Message[]>("POST", path, { body: { messages }, headers })).data;
  }

  /** Remove and return the thread's newest message (`NotFoundError` when it has none). */
  async popMessage(resource: string, thread: string): Promise<Message> {
    const path = [resourceId(resource), "threads", threadId(thread), "messages", "last"] as const;
    return (await this.#call<Message>("DELETE", path)).data;
  }

  // -- working memory -------------------------------------------------------------------

  /** The working memory, its version and `etag` (never set: `data` null, version 0, etag `"0"`). */
  async getWorkingMemory(resource: string): Promise<WorkingMemoryState> {
    return withEtag(await this.#call<Schemas["WorkingMemoryOut"]>("GET", [resourceId(resource), "working-memory"]));
  }

  /**
   * Apply a JSON Merge Patch (RFC 7396: objects merge, `null` deletes, the rest replaces), atomically.
   *
   * @param options.ifMatch change only this version: an `etag` from `getWorkingMemory`, or the version
   *   number; another version stored throws `PreconditionFailedError` and changes nothing.
   */
  async patchWorkingMemory(
    resource: string,
    patch: Record<string, unknown>,
    options: { ifMatch?: string | number } = {},
  ): Promise<WorkingMemoryState> {
    const { ifMatch } = options;
    const headers: Record<string, string> =
      ifMatch === undefined ? {} : { "If-Match": typeof ifMatch === "number" ? `"${ifMatch}"` : ifMatch };
    const call = { body: patch, contentType: MERGE_PATCH, headers };
    const path = [resourceId(resource), "working-memory"] as const;
    return withEtag(await this.#call<Schemas["WorkingMemoryOut"]>("PATCH", path, call));
  }

  /** Every applied patch, oldest first. */
  async workingMemoryLog(resource: string): Promise<WorkingMemoryLogEntry[]> {
    return (await this.#call<WorkingMemoryLogEntry[]>("GET", [resourceId(resource), "working-memory", "log"])).data;
  }

  // -- recall and facts -------------------------------------------------------------------

  /** Past messages found by the recent, salient, relevant and lexical legs, fused, in conversation order. */
  async recall(resource: string, request: RecallRequest): Promise<RecallHit[]> {
    return (await this.#call<RecallHit[]>("POST", [resourceId(resource), "recall"], { body: request })).data;
  }

  /** The resource's facts, most recently updated first. */
  async listFacts(resource: string, options: { category?: string } = {}): Promise<Fact[]> {
    const query = { category: options.category };
    return (await this.#call<Fact[]>("GET", [resourceId(resource), "facts"], { query })).data;
  }

  /** Set a fact; its previous value goes to its history. */
  async putFact(resource: string, category: string, key: string, value: string): Promise<Fact> {
    const path = [resourceId(resource), "facts", ...fact(category, key)] as const;
    return (await this.#call<Fact>("PUT", path, { body: { value } })).data;
  }

  /** Forget a fact (its history stays). */
  async deleteFact(resource: string, category: string, key: string): Promise<void> {
    await this.#call("DELETE", [resourceId(resource), "facts", ...fact(category, key)]);
  }

  /** Earlier values of one fact, oldest first. */
  async factHistory(resource: string, category: string, key: string): Promise<FactHistoryEntry[]> {
    const path = [resourceId(resource), "facts", ...fact(category, key), "history"] as const;
    return (await this.#call<FactHistoryEntry[]>("GET", path)).data;
  }

  // -- notebook ---------------------------------------------------------------------------

  /** The snapshot a new conversation would freeze (or `threadId`'s frozen one), and the live entries. */
  async getNotebook(resource: string, options: { threadId?: string } = {}): Promise<Notebook> {
    const query = { thread_id: options.threadId };
    return (await this.#call<Notebook>("GET", [resourceId(resource), "notebook"], { query })).data;
  }

  /** add / replace / remove an entry, as the model's `memory` tool (a refusal: `UnprocessableEntityError`). */
  async editNotebook(resource: string, target: NotebookTarget, edit: NotebookEdit): Promise<NotebookResult> {
    const path = [resourceId(resource), "notebook", segment("notebook target", target)] as const;
    return (await this.#call<NotebookResult>("POST", path, { body: edit })).data;
  }

  // -- the one request path -------------------------------------------------------------------

  /**
   * One request under `/v1/resources/{resource}/…`: the path is fixed words and ids that
   * `segment()` checked and encoded (an id never spans two segments, nor moves the path),
   * and an error answer is thrown as its class.
   */
  async #call<T = unknown>(
    method: string,
    path: readonly (Segment | Word)[],
    call: Call = {},
  ): Promise<{ data: T; response: Response }> {
    const url = new URL(`${this.baseUrl}/v1/resources/${path.join("/")}`);
    for (const [name, value] of Object.entries(call.query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.#apiKey}`,
      Accept: "application/json, application/problem+json",
      ...call.headers,
    };
    let body: string | undefined;
    if (call.body !== undefined) {
      headers["Content-Type"] = call.contentType ?? "application/json";
      body = JSON.stringify(call.body);
    }
    const response = await this.#fetch(url, { method, headers, body });
    const text = await response.text();
    const parsed: unknown = text === "" ? undefined : parseJson(text);
    if (!response.ok) {
      throw errorFor(response.status, response.statusText, parsed);
    }
    return { data: parsed as T, response };
  }
}

/** The working memory with the `ETag` the server sent (the server always sends one; the version says the same). */
function withEtag({ data, response }: { data: Schemas["WorkingMemoryOut"]; response: Response }): WorkingMemoryState {
  return { ...data, etag: response.headers.get("etag") ?? `"${data.version}"` };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined; // not JSON: errorFor keeps the status line instead
  }
}
