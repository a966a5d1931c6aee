// One exchange with the OE on behalf of a run, and the meaning of its final answer. A platform failure
// poisons the rest of the turn (LG-08): every later call fails at once, and the run ends FAILED.
import type { RunState } from "./run_context.js";
import { REPLAY_DIVERGED, TOOL_ERROR, type ToolExecuteAnswer, type ToolExecuteRequest } from "./protocol.js";
import { PlatformFailure, SuspendRequested, ToolExecutionError } from "./sdk_errors.js";
import { getLogger } from "./logging.js";

const logger = getLogger("agent_runtime_ts.secure");

export async function guarded<T>(run: RunState, exchange: () => Promise<T>): Promise<T> {
  if (run.platformFailure !== null) {
    throw new PlatformFailure(`an earlier platform failure ended this turn: ${run.platformFailure}`);
  }
  try {
    return await exchange();
  } catch (error) {
    if (error instanceof PlatformFailure) run.platformFailure ??= error.message;
    throw error;
  }
}

function checkAnswer(request: ToolExecuteRequest, answer: ToolExecuteAnswer): void {
  if (answer.step !== request.step) {
    throw new PlatformFailure(`the OE answered step ${answer.step} to the call at step ${request.step}`);
  }
  if (answer.proceed && answer.route_to == null && answer.status == null) {
    throw new PlatformFailure(`the OE's answer at step ${request.step} has neither a route nor an outcome`);
  }
}

/** Replayed agent-level suspensions are confirmed with the OE, in order, before anything else is asked. */
export async function confirmReplies(run: RunState): Promise<void> {
  while (run.unconfirmed.length > 0) {
    const [request, reply] = run.unconfirmed.shift() as (typeof run.unconfirmed)[number];
    const answer = await guarded(run, async () => {
      const got = await run.oe.toolExecute(request);
      checkAnswer(request, got);
      return got;
    });
    const expected: Record<string, unknown> = { decision: reply.decision, reviewer_notes: reply.reviewer_notes ?? null };
    if (reply.kind === "interrupt") expected["value"] = reply.value ?? null;
    if (answer.status === "success" && JSON.stringify(answer.result) === JSON.stringify(expected)) continue;
    if (answer.status === "error" && answer.error?.category === REPLAY_DIVERGED) outcome(run, answer, request.tool);
    const failure = `the OE answered the replayed app.suspend at step ${request.step} with ${answer.status ?? "no outcome"}, not the decision this run was given`;
    run.platformFailure ??= failure;
    throw new PlatformFailure(failure);
  }
}

export async function ask(run: RunState, request: ToolExecuteRequest): Promise<ToolExecuteAnswer> {
  // A drained turn asks nothing more: its signal's reason is the CallInterrupted that stopped it.
  if (run.context.signal.aborted) throw run.context.signal.reason;
  await confirmReplies(run);
  return guarded(run, async () => {
    const answer = await run.oe.toolExecute(request);
    checkAnswer(request, answer);
    return answer;
  });
}

/** The final outcome the OE returned, as the value or error agent code sees. */
export function outcome(run: RunState, answer: ToolExecuteAnswer, tool: string): unknown {
  if (answer.from_cache) logger.info(`cached result: tool=${tool} step=${answer.step}`);
  if (answer.status === "error") {
    const error = answer.error ?? { category: TOOL_ERROR, explanation: "the OE reported an error" };
    if (error.category === REPLAY_DIVERGED) {
      run.platformFailure ??= error.explanation || REPLAY_DIVERGED;
      throw new PlatformFailure(`${REPLAY_DIVERGED}: ${error.explanation ?? ""}`);
    }
    throw new ToolExecutionError(error);
  }
  if (answer.status === "suspend") {
    const signal = SuspendRequested.fromResult(answer.result, answer.step, tool);
    run.suspension ??= signal;
    throw signal;
  }
  return answer.result;
}
