// The checkpoint thread id of a run (LG-05): `session_id:workspace_id`, or the agent's own resolver.
//
// - The default is `${sessionId}:${workspaceId}`; an execution without a session is its own thread
//   (`${executionId}:${workspaceId}`), so its resume finds its checkpoint.
// - An empty workspace gives `"sess:"`, legitimate only where no APP_ID scopes the runtime (local runs and
//   tests); the raw session id is never a key the platform writes or reads.
// - A resolver registered with `app.resolveThreadId(fn)` is used verbatim, for new and resumed runs alike,
//   with no workspace suffix. It must rebuild the same key from the request context every time.
// The fail-closed refusal (CP-04) is decided by the caller from the checkpoint settings and passed in, so
// this file stays a pure function of its inputs.

/** What a thread id is built from: the fields of the runner's request context this SDK reads. */
export interface ThreadContext {
  readonly executionId: string;
  readonly sessionId?: string | null | undefined;
  readonly workspaceId: string;
  readonly userId?: string | null | undefined;
  readonly orgId?: string | null | undefined;
}

export type ThreadIdResolver<C extends ThreadContext = ThreadContext> = (ctx: C) => string;

export const MAX_THREAD_ID_LENGTH = 1024;

/** A resolver returned something that cannot be a thread id, or the request cannot have one. */
export class ThreadIdError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ThreadIdError";
  }
}

/** The platform's key for one session in one workspace (also the only key the history reads, LG-06). */
export function scopedThreadId(sessionId: string, workspaceId: string): string {
  return `${sessionId}:${workspaceId}`;
}

export function defaultThreadId(ctx: ThreadContext, appId: string): string {
  if (appId !== "" && ctx.workspaceId !== appId) {
    // The AER refuses such a request already; a thread id must never be built from one.
    throw new ThreadIdError(
      `the execution names workspace ${JSON.stringify(ctx.workspaceId)} but this runtime's APP_ID is ${JSON.stringify(appId)}`,
    );
  }
  return scopedThreadId(ctx.sessionId || ctx.executionId, ctx.workspaceId);
}

/** The run's thread id: the resolver's value verbatim, else the default. */
export function resolveThreadId<C extends ThreadContext>(
  ctx: C,
  options: { readonly resolver: ThreadIdResolver<C> | undefined; readonly appId: string },
): string {
  const { resolver } = options;
  if (resolver === undefined) return defaultThreadId(ctx, options.appId);
  const key: unknown = resolver(ctx);
  const name = resolver.name || "the resolver";
  if (typeof key !== "string" || key === "") {
    throw new ThreadIdError(
      `app.resolveThreadId: ${name} returned ${key === "" ? "an empty string" : typeof key}; return a non-empty ` +
        "string built from the request context (for example `${ctx.sessionId}__${ctx.userId}`)",
    );
  }
  if (key.length > MAX_THREAD_ID_LENGTH) {
    throw new ThreadIdError(
      `app.resolveThreadId: ${name} returned a ${key.length}-character key; keep it within ${MAX_THREAD_ID_LENGTH}`,
    );
  }
  return key;
}
