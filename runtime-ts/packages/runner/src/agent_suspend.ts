// `app.suspend` in agent code: a step of its own, held by the OE like an approval. On a resumed run whose OE
// sent the human's answer for this step (`suspend_replies`), it returns the answer at once (confirmed with
// the OE before anything else is asked); otherwise it raises the signal the runner reports before it calls
// back SUSPENDED.
import { AGENT_SUSPEND, type ToolExecuteRequest } from "./protocol.js";
import type { RunState } from "./run_context.js";
import { SuspendRequested } from "./sdk_errors.js";
import { getLogger } from "./logging.js";

const logger = getLogger("agent_runtime_ts.secure");

export class PendingSuspend extends SuspendRequested {
  constructor(
    reason: string,
    payload: unknown,
    step: number,
    readonly pending: ToolExecuteRequest,
  ) {
    super(reason, payload, step, AGENT_SUSPEND);
  }
}

export function suspendInAgent(run: RunState, reason: string, payload: unknown): { decision: string; reviewer_notes: string | null } {
  if (typeof reason !== "string" || !reason.trim()) {
    throw new Error("app.suspend(reason) needs a non-empty reason: say what the human must decide");
  }
  const jsonPayload: unknown = JSON.parse(JSON.stringify(payload ?? null));
  const step = run.allocateStep();
  const request: ToolExecuteRequest = {
    execution_id: run.context.executionId,
    step,
    tool: AGENT_SUSPEND,
    args: { reason, payload: jsonPayload },
  };
  const reply = run.replies.get(step);
  if (reply !== undefined && reply.reason === reason && JSON.stringify(reply.payload ?? null) === JSON.stringify(jsonPayload)) {
    logger.info(`cached result: tool=${AGENT_SUSPEND} step=${step}`);
    run.unconfirmed.push([request, reply]);
    return { decision: reply.decision, reviewer_notes: reply.reviewer_notes ?? null };
  }
  throw new PendingSuspend(reason, jsonPayload, step, request);
}
