// `POST /drain` and `POST /interrupt/call` on the AER and the Tool Pod: thin routes over the WorkRegistry,
// the same answers as servers/drain_http.py. The workspace check comes first (400 without workspace_id,
// 403 workspace_mismatch on a managed runtime); every answer names the pod that gave it (Decision 8).
import { json, malformed, type Answer, type Route } from "./http_server.js";
import { BodyInvalid, DRAIN_PATH, INTERRUPT_CALL_PATH, parseBody, type DrainRequest, type InterruptCallRequest } from "./protocol.js";
import {
  checkWorkspace,
  DeadlineTooFar,
  RequestIdConflict,
  WorkspaceMismatch,
  WorkspaceMissing,
  type PodIdentity,
  type WorkRegistry,
} from "./work_registry.js";

export const MAX_CONTROL_BODY_BYTES = 64 * 1024;

const MISSING_WORKSPACE = {
  detail: [{ field: "workspace_id", problem: "required on this managed runtime (APP_ID is set): send the Agent's APP_ID" }],
};
const MISMATCH = {
  error: "workspace_mismatch",
  detail: "workspace_id does not name this runtime's workspace (APP_ID); send the Agent's own",
};

function pod(identity: PodIdentity): Record<string, string> {
  const out: Record<string, string> = {};
  if (identity.name !== null) out["pod_name"] = identity.name;
  if (identity.address !== null) out["pod_address"] = identity.address;
  return out;
}

function parse<K extends "DrainRequest" | "InterruptCallRequest">(
  model: K,
  body: string,
  appId: string | null,
): { call: K extends "DrainRequest" ? DrainRequest : InterruptCallRequest } | { refusal: Answer } {
  let call: DrainRequest | InterruptCallRequest;
  try {
    call = parseBody(model, body);
  } catch (error) {
    if (error instanceof BodyInvalid) return { refusal: malformed(error) };
    throw error;
  }
  try {
    checkWorkspace(appId, call.workspace_id);
  } catch (error) {
    if (error instanceof WorkspaceMissing) return { refusal: json(400, MISSING_WORKSPACE) };
    if (error instanceof WorkspaceMismatch) return { refusal: json(403, MISMATCH) };
    throw error;
  }
  return { call: call as K extends "DrainRequest" ? DrainRequest : InterruptCallRequest };
}

export function workRoutes(registry: WorkRegistry, options: { appId: string | null; pod: PodIdentity }): Route[] {
  const drain = async ({ body }: { body: string }): Promise<Answer> => {
    const parsed = parse("DrainRequest", body, options.appId);
    if ("refusal" in parsed) return parsed.refusal;
    const call = parsed.call;
    try {
      const [outcome, reasonCode] = registry.drain({
        requestId: call.request_id,
        executionId: call.execution_id,
        reason: call.reason ?? "",
        deadlineAtMs: call.deadline_at_ms,
      });
      const answer = { outcome, ...(reasonCode !== null ? { reason_code: reasonCode } : {}), ...pod(options.pod) };
      return json(outcome === "accepted" ? 202 : 200, answer);
    } catch (error) {
      if (error instanceof DeadlineTooFar) {
        return json(400, {
          error: "deadline_too_far",
          max_ms: error.maxMs,
          detail: `deadline_at_ms may be at most ${error.maxMs} ms ahead of now (RUNNER_DRAIN_MAX_DEADLINE_MS); send an earlier absolute deadline`,
        });
      }
      if (error instanceof RequestIdConflict) {
        return json(409, {
          error: "request_id_conflict",
          detail: "this request_id names the drain of another execution; use a new request_id per drain and the same one on every retry of it",
        });
      }
      throw error;
    }
  };
  const interrupt = async ({ body }: { body: string }): Promise<Answer> => {
    const parsed = parse("InterruptCallRequest", body, options.appId);
    if ("refusal" in parsed) return parsed.refusal;
    const outcome = registry.interrupt(parsed.call.execution_id, parsed.call.step_number);
    return json(200, { outcome, ...pod(options.pod) });
  };
  return [
    { method: "POST", path: DRAIN_PATH, handler: drain, maxBodyBytes: MAX_CONTROL_BODY_BYTES },
    { method: "POST", path: INTERRUPT_CALL_PATH, handler: interrupt, maxBodyBytes: MAX_CONTROL_BODY_BYTES },
  ];
}
