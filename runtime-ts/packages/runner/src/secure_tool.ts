// SecureToolWrapper: every tool call asks the OE first (B-05). The OE answers a denial, "run it yourself"
// (`route_to: "callback"`, local tools only) or the call's final outcome. A local body runs here only after
// the OE's approval, tracked in the work registry (so a drain or an interrupt of its step reaches it), and
// its outcome is reported (`POST /tool/result`) before the agent sees it.
import { CallInterrupted, ExecutionDraining } from "./call_errors.js";
import type { ToolSpec } from "./app.js";
import { getLogger, withLogContext } from "./logging.js";
import { ask, guarded, outcome } from "./oe_exchange.js";
import { INVALID_ARGUMENTS, TIMEOUT, TOOL_ERROR, UNKNOWN_TOOL, type CallError, type ToolResultRequest } from "./protocol.js";
import { currentRun, type RunState } from "./run_context.js";
import { PolicyDeniedException, SuspendRequested, ToolError, ToolExecutionError } from "./sdk_errors.js";

const logger = getLogger("agent_runtime_ts.secure");

class LocalOutcome {
  private readonly started = performance.now();
  constructor(
    private readonly run: RunState,
    private readonly step: number,
  ) {}

  async report(status: ToolResultRequest["status"], fields: { result?: unknown; error?: CallError } = {}): Promise<void> {
    const request: ToolResultRequest = {
      execution_id: this.run.context.executionId,
      step: this.step,
      status,
      result: fields.result ?? null,
      error: fields.error ?? null,
      duration_ms: performance.now() - this.started,
    };
    await guarded(this.run, () => this.run.oe.toolResult(request));
  }

  async fail(category: string, explanation: string): Promise<ToolExecutionError> {
    const error = { category, explanation };
    await this.report("error", { error });
    return new ToolExecutionError(error);
  }
}

function jsonable(value: unknown, what: string): unknown {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? null : JSON.parse(text);
  } catch {
    throw new TypeError(`${what} must be JSON-serializable`);
  }
}

async function withTimeout<T>(promise: Promise<T>, timeoutS: number): Promise<{ value: T } | { timedOut: true }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<{ timedOut: true }>((resolve) => {
    timer = setTimeout(() => resolve({ timedOut: true }), timeoutS * 1000);
  });
  try {
    return await Promise.race([promise.then((value) => ({ value })), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function runLocal(run: RunState, spec: ToolSpec | null, name: string, step: number, args: Record<string, unknown>): Promise<unknown> {
  const report = new LocalOutcome(run, step);
  if (spec === null) throw await report.fail(UNKNOWN_TOOL, `the OE routed tool '${name}' to the AER, which has no local tool so named`);
  const problems = spec.problems(args);
  if (problems.length > 0) throw await report.fail(INVALID_ARGUMENTS, `tool '${spec.name}' arguments are invalid: ${problems.join("; ")}`);
  const executionId = run.context.executionId;
  let value: unknown;
  try {
    const work = async (signal: AbortSignal | null): Promise<unknown> =>
      spec.body(args, signal === null ? { executionId, step } : { executionId, step, signal });
    const tracked =
      run.work === null ? work(null) : run.work.run(run.work.admit(executionId, step, { cancellable: spec.abortable }), work);
    const settled = await withTimeout(tracked, spec.timeoutS);
    if ("timedOut" in settled) {
      throw await report.fail(TIMEOUT, `tool '${spec.name}' did not finish within its timeoutS=${spec.timeoutS}`);
    }
    value = settled.value;
  } catch (error) {
    if (error instanceof ToolExecutionError) throw error;
    if (error instanceof SuspendRequested) {
      error.step = step;
      error.tool = spec.name;
      await report.report("suspend", { result: { reason: error.reason, payload: jsonable(error.payload, "the suspend payload") } });
      run.suspension ??= error;
      throw error;
    }
    if (error instanceof CallInterrupted || error instanceof ExecutionDraining) throw await report.fail(error.category, error.explanation);
    if (error instanceof ToolError) throw await report.fail("tool_message", error.message);
    // The message may quote anything: only the type reaches the model and the OE, the log keeps the rest.
    const type = error instanceof Error ? error.name : typeof error;
    logger.error(`local tool ${spec.name} raised ${type}`, error);
    throw await report.fail(TOOL_ERROR, `tool '${spec.name}' failed with ${type}; see the AER log`);
  }
  let result: unknown;
  try {
    result = jsonable(value, "the result");
  } catch {
    throw await report.fail(TOOL_ERROR, `tool '${spec.name}' returned a value that is not JSON-serializable`);
  }
  await report.report("success", { result });
  // The JSON form, as a replay from the OE's cache returns it: the agent sees the same either way.
  return result;
}

/** One governed tool call of `run` (its step taken now, before the first await). */
export function callTool(run: RunState, name: string, args: Record<string, unknown>, local: ToolSpec | null): Promise<unknown> {
  const arguments_ = jsonable(args, `the arguments of tool '${name}'`) as Record<string, unknown>;
  const step = run.allocateStep();
  return withLogContext(run.context.executionId, step, async () => {
    const answer = await ask(run, { execution_id: run.context.executionId, step, tool: name, args: arguments_ });
    if (!answer.proceed) throw new PolicyDeniedException(answer.reason ?? `tool '${name}' was denied by policy`);
    // A reviewer may have approved the call with edited arguments: those are the ones that run.
    const executed = answer.args ?? arguments_;
    if (answer.route_to === "callback") return runLocal(run, local, name, step, executed);
    return outcome(run, answer, name);
  });
}

/** One tool as agent code and frameworks call it (the Python SDK's SecureToolWrapper): every call asks the
 * OE; `local` is the tool's body when it runs in the AER. Framework SDKs wrap their tool objects in it. */
export class SecureToolWrapper {
  constructor(
    readonly name: string,
    private readonly local: ToolSpec | null = null,
  ) {}

  /** Start the call now (its step is taken here); resolves to the result the OE allowed. */
  invoke(args: Record<string, unknown> = {}): Promise<unknown> {
    return callTool(currentRun(`calling tool '${this.name}'`), this.name, args, this.local?.isLocal ? this.local : null);
  }
}
