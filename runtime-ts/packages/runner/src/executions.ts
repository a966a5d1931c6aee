// Runs of the entrypoint in the AER (B-01, B-02, B-15), free of HTTP: each run is a tracked turn (its
// AbortController is what a drain aborts), ends in exactly one callback to the OE, and can fail any way it
// likes without stopping the AER.
import type { App } from "./app.js";
import { ExecutionDraining } from "./call_errors.js";
import { getLogger, withLogContext } from "./logging.js";
import type { OEApi } from "./oe_client.js";
import { confirmReplies, ask } from "./oe_exchange.js";
import { PendingSuspend } from "./agent_suspend.js";
import {
  ENTRYPOINT_ERROR,
  INVALID_RESULT,
  PLATFORM_FAILURE,
  type AERExecuteRequest,
  type ExecutorCallback,
} from "./protocol.js";
import { RunState, runScope } from "./run_context.js";
import { PlatformFailure, SuspendRequested } from "./sdk_errors.js";
import type { WorkRegistry } from "./work_registry.js";

const logger = getLogger("agent_runtime_ts.executions");
const MESSAGE_LIMIT = 500;

export class ExecutionConflictError extends Error {}
export class WorkspaceMismatchError extends Error {}

function failed(executionId: string, category: string, explanation: string): ExecutorCallback {
  return { execution_id: executionId, status: "FAILED", error: { category, explanation: explanation.slice(0, 16_384) } };
}

function suspended(executionId: string, signal: SuspendRequested): ExecutorCallback {
  try {
    return { execution_id: executionId, status: "SUSPENDED", metadata: JSON.parse(JSON.stringify(signal.metadata())) as Record<string, unknown> };
  } catch {
    return failed(executionId, ENTRYPOINT_ERROR, "app.suspend was given a payload that is not JSON-serializable");
  }
}

function short(error: unknown): string {
  const name = error instanceof Error ? error.name : typeof error;
  let text = error instanceof Error ? error.message : String(error);
  if (text.length > MESSAGE_LIMIT) text = text.slice(0, MESSAGE_LIMIT - 3) + "...";
  return text ? `${name}: ${text}` : name;
}

function withAgentRefs(tools: readonly Record<string, unknown>[], refs: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  const names = new Set(tools.map((tool) => tool["name"]));
  return [...tools, ...refs.filter((ref) => !names.has(ref["name"]))];
}

/** One run: the entrypoint on the input, and how it ended as the callback the OE gets. */
export async function runExecution(
  app: App,
  request: AERExecuteRequest,
  options: { oe: OEApi; tools: readonly Record<string, unknown>[]; work: WorkRegistry | null; signal: AbortSignal },
): Promise<ExecutorCallback> {
  const executionId = request.execution_id;
  const run = new RunState(
    {
      executionId,
      workspaceId: request.workspace_id ?? "",
      sessionId: request.session_id ?? null,
      userId: request.user_id ?? null,
      orgId: request.org_id ?? null,
      resume: request.resume ?? false,
      // The agentRef tools the OE sent with the run (issue 38), after the bundle's and the tenant's own; a
      // name those already use is theirs in the list (the OE still routes the call as the agentRef).
      tools: withAgentRefs(options.tools, request.agent_refs ?? []),
      streamMode: [...new Set(request.stream_mode ?? [])],
      signal: options.signal,
    },
    options.oe,
    options.work,
    request.suspend_replies ?? [],
  );
  const entry = app.entrypointFunction;
  if (entry === null) return failed(executionId, ENTRYPOINT_ERROR, "the App has no entrypoint");
  return runScope(run, async () => {
    try {
      const result = await entry(request.input ?? null, run.context);
      await confirmReplies(run);
      if (run.platformFailure !== null) return failed(executionId, PLATFORM_FAILURE, run.platformFailure);
      if (run.suspension !== null) return suspended(executionId, run.suspension);
      let value: unknown;
      try {
        const text = JSON.stringify(result);
        value = text === undefined ? null : JSON.parse(text);
      } catch {
        return failed(executionId, INVALID_RESULT, "the entrypoint returned a value that is not JSON-serializable");
      }
      return { execution_id: executionId, status: "COMPLETED", result: value };
    } catch (error) {
      if (run.platformFailure !== null) return failed(executionId, PLATFORM_FAILURE, run.platformFailure);
      if (error instanceof PlatformFailure) return failed(executionId, PLATFORM_FAILURE, error.message);
      if (error instanceof PendingSuspend && run.suspension === null) {
        // app.suspend in agent code: the OE holds it at its step before the run says SUSPENDED.
        try {
          const answer = await ask(run, error.pending);
          if (answer.status === "suspend") return suspended(executionId, SuspendRequested.fromResult(answer.result, answer.step, error.tool ?? ""));
          return failed(executionId, PLATFORM_FAILURE, `the OE answered app.suspend at step ${error.pending.step} with ${answer.status ?? "no outcome"} instead of holding it for a human`);
        } catch (failure) {
          return failed(executionId, PLATFORM_FAILURE, run.platformFailure ?? short(failure));
        }
      }
      if (error instanceof SuspendRequested) return suspended(executionId, run.suspension ?? error);
      logger.error(`execution ${executionId}: the entrypoint raised ${error instanceof Error ? error.name : typeof error}`, error);
      return failed(executionId, ENTRYPOINT_ERROR, short(error));
    }
  });
}

export class ExecutionRunner {
  private readonly running = new Map<string, Promise<void>>();

  constructor(
    private readonly app: App,
    private readonly oe: OEApi,
    private readonly tools: readonly Record<string, unknown>[],
    private readonly work: WorkRegistry | null,
    private readonly appId: string | null,
  ) {}

  isRunning(executionId: string): boolean {
    return this.running.has(executionId);
  }

  get size(): number {
    return this.running.size;
  }

  /** Start the run and return at once; refuse another workspace, a drained execution or a duplicate. */
  start(request: AERExecuteRequest): void {
    if (this.appId !== null && request.workspace_id !== this.appId) throw new WorkspaceMismatchError();
    const executionId = request.execution_id;
    if (this.work?.draining(executionId) != null) throw new ExecutionDraining(executionId);
    if (this.running.has(executionId)) throw new ExecutionConflictError();
    const turn = this.work?.admit(executionId, null, { cancellable: true }) ?? null;
    const signal = turn?.signal ?? new AbortController().signal;
    // Started on the next turn of the event loop, as Python's task is: the 202 is written before the run
    // can reach the OE (a run of no calls would otherwise call back before the OE saw it start).
    const done = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.execute(request, signal))
      .finally(() => this.running.delete(executionId));
    this.running.set(executionId, done);
    if (turn !== null && this.work !== null) this.work.attach(turn, done);
  }

  private async execute(request: AERExecuteRequest, signal: AbortSignal): Promise<void> {
    const executionId = request.execution_id;
    await withLogContext(executionId, null, async () => {
      logger.info(`execution ${executionId} started (resume=${request.resume ? "True" : "False"})`);
      let callback = await runExecution(this.app, request, { oe: this.oe, tools: this.tools, work: this.work, signal });
      const drained = this.work?.draining(executionId) ?? null;
      if (drained !== null && callback.status !== "COMPLETED") {
        callback = failed(executionId, PLATFORM_FAILURE, `the run was drained (${drained})`);
      }
      logger.info(`execution ${executionId} ended ${callback.status}`);
      try {
        await this.oe.callback(callback);
      } catch (error) {
        // A drained run's callback is refused by the OE (it cancelled the execution): said, not an error.
        const message = `execution ${executionId}: the OE did not take the callback: ${error instanceof Error ? error.message : String(error)}`;
        if (drained !== null) logger.info(message);
        else logger.error(message);
      }
    });
  }

  /** SIGTERM: wait up to `timeoutS` for the runs in flight (not the per-execution drain of POST /drain). */
  async shutdown(timeoutS: number): Promise<void> {
    const runs = [...this.running.values()];
    if (runs.length === 0) return;
    logger.info(`waiting up to ${timeoutS} s for ${runs.length} execution(s) in flight`);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled(runs), new Promise((resolve) => (timer = setTimeout(resolve, timeoutS * 1000)))]);
    clearTimeout(timer);
  }
}
