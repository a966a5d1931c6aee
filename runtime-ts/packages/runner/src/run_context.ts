// One run of the entrypoint as the SDK sees it: the execution's context, the OE client, the step counter and
// what has gone wrong so far. Carried by AsyncLocalStorage, so `app.callTool` works anywhere the entrypoint's
// run reaches (helpers, framework callbacks) and nowhere else.
import { AsyncLocalStorage } from "node:async_hooks";
import type { OEApi } from "./oe_client.js";
import type { SuspendReply, ToolExecuteRequest } from "./protocol.js";
import type { SuspendRequested } from "./sdk_errors.js";
import type { WorkRegistry } from "./work_registry.js";

export interface RequestContext {
  readonly executionId: string;
  readonly workspaceId: string;
  readonly sessionId: string | null;
  readonly userId: string | null;
  readonly orgId: string | null;
  readonly resume: boolean;
  readonly tools: readonly Record<string, unknown>[];
  /** The stream modes the client asked for (`values`, `updates`, `messages`, `custom`); empty: none. */
  readonly streamMode?: readonly string[];
  /** The turn's signal: aborted when the OE drains the execution. */
  readonly signal: AbortSignal;
}

export class RunState {
  private nextStep = 1;
  platformFailure: string | null = null;
  suspension: SuspendRequested | null = null;
  readonly replies: ReadonlyMap<number, SuspendReply>;
  readonly unconfirmed: [ToolExecuteRequest, SuspendReply][] = [];

  constructor(
    readonly context: RequestContext,
    readonly oe: OEApi,
    readonly work: WorkRegistry | null,
    replies: readonly SuspendReply[] = [],
  ) {
    this.replies = new Map(replies.map((reply) => [reply.step, reply]));
  }

  /** Steps are taken when a call is made, before its first await: concurrent calls number in order (Decision 4). */
  allocateStep(): number {
    const step = this.nextStep;
    this.nextStep += 1;
    return step;
  }
}

/** What the entrypoint is handed: the run's context. */
export type RunContext = RequestContext;

const storage = new AsyncLocalStorage<RunState>();

export function runScope<T>(run: RunState, fn: () => T): T {
  return storage.run(run, fn);
}

/** The current run, or null (a tool body in the Tool Pod runs outside any run). */
export function maybeRun(): RunState | null {
  return storage.getStore() ?? null;
}

/** The current run, or an error naming what was attempted outside one. */
export function currentRun(what: string): RunState {
  const run = storage.getStore();
  if (run === undefined) {
    throw new Error(`${what} outside a run: make calls inside the entrypoint (or what it calls) while it runs`);
  }
  return run;
}
