/** caderno's TypeScript client: `CadernoClient` for the HTTP API, `CadernoAgentMemory` for the household port. */

export {
  type AgentMemory,
  CadernoAgentMemory,
  type ChatMessage,
  type Goal,
  type MaybePromise,
  type Member,
  type ToolCall,
  type WorkingMemory,
  type WorkingMemoryPatch,
} from "./agent-memory.js";
export {
  CadernoClient,
  type CadernoClientOptions,
  type Fact,
  type FactHistoryEntry,
  type Message,
  type MessageCreate,
  type Notebook,
  type NotebookEdit,
  type NotebookResult,
  type NotebookTarget,
  type RecallHit,
  type RecallRequest,
  type Thread,
  type ThreadCreate,
  type ThreadPatch,
  type WorkingMemoryLogEntry,
  type WorkingMemoryState,
} from "./client.js";
export {
  BadRequestError,
  CadernoError,
  ConflictError,
  errorFor,
  ForbiddenError,
  InvalidIdError,
  NAME_RULE,
  NotFoundError,
  PayloadTooLargeError,
  PreconditionFailedError,
  type Problem,
  ThreadBusyError,
  UnauthorizedError,
  UnprocessableEntityError,
} from "./errors.js";
export type { components, operations, paths } from "./generated/openapi.js";
