/**
 * caderno's refusals as typed exceptions.
 *
 * The server answers every error with an `application/problem+json` body
 * (RFC 9457): a stable `type` URI per kind of error, a `title`, the `status`
 * and the library's own message as `detail` (src/caderno/server/problems.py).
 * `errorFor` turns such an answer into one class per status the API uses, so
 * an application can `catch (e) { if (e instanceof PreconditionFailedError) … }`
 * without reading status codes:
 *
 * ```
 * CadernoError                    any refusal; 5xx and statuses without a class below
 * ├── BadRequestError             400  invalid-request: the library refused the call
 * │   └── InvalidIdError          400  refused by this client before sending: an id that is a path
 * ├── UnauthorizedError           401  missing, unknown or revoked key
 * ├── ForbiddenError              403  needs an admin key
 * ├── NotFoundError               404  also: a resource this key may not see
 * ├── ConflictError               409  already exists, or a version mismatch
 * │   └── ThreadBusyError         409  thread-busy: another turn holds the thread (safe to retry)
 * ├── PreconditionFailedError     412  If-Match does not name the stored version
 * ├── PayloadTooLargeError        413  body over the server's limit
 * └── UnprocessableEntityError    422  invalid patch, notebook refusal, invalid body or parameters
 * ```
 */

/** The body of a problem answer, as the server writes it (unknown members are kept). */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  /** Version conflicts (409, 412) only: the version the request named. */
  expected_version?: number | null;
  /** Version conflicts (409, 412) only: the stored version. */
  actual_version?: number | null;
  [member: string]: unknown;
}

/** Every error the server answered; `status`, `type`, `title` and `detail` come from its problem body. */
export class CadernoError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The problem's stable type URI, e.g. `https://caderno.dev/problems/not-found`. */
  readonly type: string;
  /** A short summary of the kind of problem. */
  readonly title: string;
  /** The library's explanation of this occurrence. */
  readonly detail: string;
  /** The whole problem body (or, for a non-problem answer, one made from the status). */
  readonly problem: Problem;

  constructor(problem: Problem) {
    super(`${problem.status} ${problem.title}: ${problem.detail}`);
    this.name = new.target.name;
    this.status = problem.status;
    this.type = problem.type;
    this.title = problem.title;
    this.detail = problem.detail;
    this.problem = problem;
  }

  /** Version conflicts (409, 412) only: the version the request named (absent for a weak `If-Match`). */
  get expectedVersion(): number | undefined {
    return this.problem.expected_version ?? undefined;
  }

  /** Version conflicts (409, 412) only: the stored version. */
  get actualVersion(): number | undefined {
    return this.problem.actual_version ?? undefined;
  }
}

export class BadRequestError extends CadernoError {}

/** The problem type of a refused call: the server's (problems.py) and this client's own refusals alike. */
const INVALID_REQUEST = "https://caderno.dev/problems/invalid-request";

/**
 * The sentence caderno refuses such an id with, everywhere (`NAME_RULE` in
 * src/caderno/core/validate.py, `RULE` in the inspector's app.js).
 */
export const NAME_RULE = "ids are names, never paths (no '/', not '.' or '..', no control or invisible characters)";

/**
 * An id that cannot travel as one URL path segment, refused by the client before any request.
 *
 * `fetch` resolves `.` and `..` segments before it sends (`encodeURIComponent("..")` is still
 * `..`), so `popMessage("r", "..")` would become `DELETE /v1/resources/r/messages/last`: another
 * thread's message. Nothing was sent. The problem is the one the server answers for such an id on
 * a write (a 400 `invalid-request`), so code that handles `BadRequestError` handles this too.
 */
export class InvalidIdError extends BadRequestError {
  /** What the id names, e.g. `thread id`. */
  readonly what: string;
  /** The refused id, as given. */
  readonly id: string;

  constructor(what: string, id: string) {
    super({
      type: INVALID_REQUEST,
      title: "Invalid request",
      status: 400,
      detail: `${what} ${JSON.stringify(id)} is not a valid name: ${NAME_RULE}`,
    });
    this.what = what;
    this.id = id;
  }
}
export class UnauthorizedError extends CadernoError {}
export class ForbiddenError extends CadernoError {}
export class NotFoundError extends CadernoError {}

/** A 409: already exists, or (with `expectedVersion` and `actualVersion`) a version mismatch. */
export class ConflictError extends CadernoError {}

/** Another turn holds the thread; nothing was stored, and the call is safe to retry. */
export class ThreadBusyError extends ConflictError {}

/** A working-memory `If-Match` that names another version (see `expectedVersion`, `actualVersion`): nothing changed. */
export class PreconditionFailedError extends CadernoError {}

export class PayloadTooLargeError extends CadernoError {}
export class UnprocessableEntityError extends CadernoError {}

const BY_STATUS: Record<number, new (problem: Problem) => CadernoError> = {
  400: BadRequestError,
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  409: ConflictError,
  412: PreconditionFailedError,
  413: PayloadTooLargeError,
  422: UnprocessableEntityError,
};

/** The problem type of a busy thread: a 409 of its own class, because its remedy is a retry. */
const THREAD_BUSY = "https://caderno.dev/problems/thread-busy";

/**
 * The exception for an error answer: its status picks the class.
 *
 * @param status the HTTP status.
 * @param statusText the reason phrase, used when the body is not a problem.
 * @param body the parsed body, or undefined when it was not JSON.
 */
export function errorFor(status: number, statusText: string, body: unknown): CadernoError {
  const problem = asProblem(status, statusText, body);
  if (status === 409 && problem.type === THREAD_BUSY) {
    return new ThreadBusyError(problem);
  }
  const kind = BY_STATUS[status] ?? CadernoError;
  return new kind(problem);
}

function asProblem(status: number, statusText: string, body: unknown): Problem {
  if (typeof body === "object" && body !== null && typeof (body as Problem).type === "string") {
    const given = body as Partial<Problem>;
    return {
      ...given,
      type: String(given.type),
      title: typeof given.title === "string" ? given.title : statusText,
      status,
      detail: typeof given.detail === "string" ? given.detail : statusText,
    };
  }
  // Not a problem body (a proxy in front of caderno, a crashed connection's page): keep what HTTP said.
  return { type: "about:blank", title: statusText, status, detail: statusText };
}
