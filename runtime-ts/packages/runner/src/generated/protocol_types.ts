// Generated from schema/protocol.schema.json (agent_runtime/protocol.py) by scripts/generate_types.mjs.
// Do not edit by hand: run `python -m agent_runtime.protocol_schema` then `npm run generate`.

/**
 * The AER's final word on a run (upper case, as S1 writes it).
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "CallbackStatus".
 */
export type CallbackStatus = "COMPLETED" | "SUSPENDED" | "FAILED";

export interface ProtocolDocument {
  AERExecuteRequest?: AERExecuteRequest;
  AERExecutionStatus?: AERExecutionStatus;
  CallError?: CallError;
  CallOutcome?: CallOutcome;
  CallbackStatus?: CallbackStatus;
  Claims?: Claims;
  DrainAnswer?: DrainAnswer;
  DrainRequest?: DrainRequest;
  ExecutorCallback?: ExecutorCallback;
  GraphStreamChunk?: GraphStreamChunk;
  InterruptCallAnswer?: InterruptCallAnswer;
  InterruptCallRequest?: InterruptCallRequest;
  InvokeLLMRequest?: InvokeLLMRequest;
  LLMDelta?: LLMDelta;
  SuspendReply?: SuspendReply;
  ToolCallDelta?: ToolCallDelta;
  ToolExecuteAnswer?: ToolExecuteAnswer;
  ToolExecuteRequest?: ToolExecuteRequest;
  ToolPodExecuteRequest?: ToolPodExecuteRequest;
  ToolResultRequest?: ToolResultRequest;
}
/**
 * `POST /execute` on the AER: start (or, with `resume`, re-run) one execution. Answered 202.
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "AERExecuteRequest".
 */
export interface AERExecuteRequest {
  /**
   * @maxItems 64
   */
  agent_refs?: {
    [k: string]: unknown | undefined;
  }[];
  execution_id: string;
  input?: unknown;
  memory_credential?: string | null;
  org_id?: string | null;
  resume?: boolean;
  session_id?: string | null;
  stream_mode?: ("values" | "updates" | "messages" | "custom")[];
  suspend_replies?: SuspendReply[];
  user_id?: string | null;
  workspace_id?: string;
}
/**
 * The human's answer to an agent-level `app.suspend` at `step`, handed to a resumed run up front: agent
 * code calls `app.suspend` synchronously, so its replayed answer cannot wait for a round trip.
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "SuspendReply".
 */
export interface SuspendReply {
  decision: "approved" | "rejected";
  kind?: string;
  payload?: unknown;
  reason: string;
  reviewer_notes?: string | null;
  step: number;
  value?: unknown;
}
/**
 * The AER's answer to `POST /execute` (202) and to `GET /executions/{id}` (200) while it runs it.
 *
 * `pod_name` and `pod_address` say which pod answered, so the OE drains that pod directly (Decision 8).
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "AERExecutionStatus".
 */
export interface AERExecutionStatus {
  execution_id: string;
  pod_address?: string | null;
  pod_name?: string | null;
  state?: "running";
}
/**
 * A classified failure, safe to show to the model, the client and the audit log.
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "CallError".
 */
export interface CallError {
  category: string;
  explanation?: string;
  status_code?: number | null;
}
/**
 * What the Tool Pod answers on `/execute` and `/invoke_llm`; the OE caches exactly this per step.
 *
 * `status: "suspend"` (a tool called `app.suspend`) carries `result = {"reason", "payload"}`; the signal is
 * the status, never a value inside `result` (OE-14).
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "CallOutcome".
 */
export interface CallOutcome {
  duration_ms?: number;
  error?: CallError | null;
  pod_address?: string | null;
  pod_name?: string | null;
  result?: unknown;
  status: "success" | "error" | "suspend";
}
/**
 * What a statement says. Empty `execution_id` only for `purpose: control`.
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "Claims".
 */
export interface Claims {
  agent: string;
  aud: "aer" | "tool" | "memory";
  execution_id?: string;
  exp: number;
  iat: number;
  org_id?: string;
  purpose?: "execution" | "control" | "export" | "knowledge";
  user_id?: string;
  workspace: string;
}
/**
 * 202 with `accepted` while the work settles; 200 with the final outcome after (DR-04).
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "DrainAnswer".
 */
export interface DrainAnswer {
  outcome: "accepted" | "completed" | "timed_out" | "delivery_failed";
  pod_address?: string | null;
  pod_name?: string | null;
  reason_code?: string | null;
}
/**
 * `POST /drain`: stop every tracked piece of work of one execution by `deadline_at_ms` (epoch ms).
 *
 * `workspace_id` is required, and must equal APP_ID, on a managed runtime (APP_ID set); it is checked by
 * the receiver, so it is optional here.
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "DrainRequest".
 */
export interface DrainRequest {
  deadline_at_ms: number;
  execution_id: string;
  reason?: string;
  request_id: string;
  workspace_id?: string | null;
}
/**
 * `POST /executor/callback`: the end of one run of the entrypoint.
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "ExecutorCallback".
 */
export interface ExecutorCallback {
  error?: CallError | null;
  execution_id: string;
  metadata?: {
    [k: string]: unknown | undefined;
  } | null;
  result?: unknown;
  status: CallbackStatus;
}
/**
 * `POST /tool/stream`: one chunk of a LangGraph stream mode, published as an event named `mode`.
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "GraphStreamChunk".
 */
export interface GraphStreamChunk {
  data?: unknown;
  execution_id: string;
  mode: "values" | "updates" | "messages" | "custom";
}
/**
 * Always 200 once the workspace check passed (IC-03).
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "InterruptCallAnswer".
 */
export interface InterruptCallAnswer {
  outcome: "interrupted" | "not_found" | "already_settled" | "not_cancellable";
  pod_address?: string | null;
  pod_name?: string | null;
}
/**
 * `POST /interrupt/call`: stop the one call at `step_number` (the key is `step_number`, not `step`).
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "InterruptCallRequest".
 */
export interface InterruptCallRequest {
  execution_id: string;
  request_id?: string | null;
  step_number: number;
  workspace_id?: string | null;
}
/**
 * `POST /invoke_llm` on the Tool Pod: run the model registered under `llm_id` once.
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "InvokeLLMRequest".
 */
export interface InvokeLLMRequest {
  execution_id?: string | null;
  llm_id: string;
  /**
   * @minItems 1
   */
  messages: [
    {
      [k: string]: unknown | undefined;
    },
    ...{
      [k: string]: unknown | undefined;
    }[]
  ];
  options?: {
    [k: string]: unknown | undefined;
  } | null;
  step?: number | null;
  stream?: boolean;
  tools?:
    | {
        [k: string]: unknown | undefined;
      }[]
    | null;
}
/**
 * One piece of a streamed model answer (the `llm_delta` event's data, and a line of `/invoke_llm`'s
 * NDJSON stream). Joined in `index` order the pieces give the final message: `text` its content,
 * `extra` its extra text fields (`reasoning_content`), `tool_calls` its calls' ids, names and argument
 * text. The last piece has `finish_reason` and `usage`; `from_cache` marks a replayed step's whole
 * message sent as one piece.
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "LLMDelta".
 */
export interface LLMDelta {
  extra?: {
    [k: string]: string | undefined;
  };
  finish_reason?: string | null;
  from_cache?: boolean;
  id?: string | null;
  index?: number;
  last?: boolean;
  step?: number | null;
  text?: string;
  tool_calls?: ToolCallDelta[];
  usage?: {
    [k: string]: unknown | undefined;
  } | null;
}
/**
 * A piece of one tool call the model is writing: `id` and `name` come once, `arguments` in pieces.
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "ToolCallDelta".
 */
export interface ToolCallDelta {
  arguments?: string;
  id?: string | null;
  index: number;
  name?: string | null;
}
/**
 * The OE's answer; exactly one of: a denial, a callback route, or a final outcome (OE-06).
 *
 * On a callback route, `args` (when set) are the arguments a reviewer approved: run the tool with them.
 * On a final outcome, `args` (when set) are the arguments the call ran with, a reviewer's edit.
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "ToolExecuteAnswer".
 */
export interface ToolExecuteAnswer {
  args?: {
    [k: string]: unknown | undefined;
  } | null;
  deltas?: LLMDelta[] | null;
  duration_ms?: number | null;
  error?: CallError | null;
  from_cache?: boolean;
  pod_name?: string | null;
  proceed: boolean;
  reason?: string | null;
  result?: unknown;
  route_to?: "callback" | null;
  status?: ("success" | "error" | "suspend") | null;
  step: number;
}
/**
 * `POST /tool/execute`: one intercepted call. An LLM call has `tool == "invoke_llm"` and `messages`.
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "ToolExecuteRequest".
 */
export interface ToolExecuteRequest {
  agent_name?: string | null;
  args?: {
    [k: string]: unknown | undefined;
  };
  execution_id: string;
  llm_id?: string | null;
  messages?:
    | {
        [k: string]: unknown | undefined;
      }[]
    | null;
  options?: {
    [k: string]: unknown | undefined;
  } | null;
  step: number;
  stream?: boolean | null;
  tool: string;
  tools?:
    | {
        [k: string]: unknown | undefined;
      }[]
    | null;
}
/**
 * `POST /execute` on the Tool Pod: run one remote tool (the OE sends `args` as `arguments`).
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "ToolPodExecuteRequest".
 */
export interface ToolPodExecuteRequest {
  arguments?: {
    [k: string]: unknown | undefined;
  };
  execution_id?: string | null;
  memory_credential?: string | null;
  org_id?: string | null;
  step?: number | null;
  tool: string;
  user_id?: string | null;
}
/**
 * `POST /tool/result`: the outcome of a local tool the AER ran after `route_to: "callback"`.
 *
 * This interface was referenced by `ProtocolDocument`'s JSON-Schema
 * via the `definition` "ToolResultRequest".
 */
export interface ToolResultRequest {
  duration_ms?: number | null;
  error?: CallError | null;
  execution_id: string;
  result?: unknown;
  status: "success" | "error" | "suspend";
  step: number;
}

export const PROTOCOL_CONSTANTS = {
  "AGENT_SUSPEND": "app.suspend",
  "ENTRYPOINT_ERROR": "entrypoint_error",
  "EXECUTION_DRAINED": "execution_drained",
  "EXECUTION_DRAINING": "execution_draining",
  "EXECUTION_NOT_FOUND": "execution_not_found",
  "INTERRUPTED": "interrupted",
  "INVALID_RESULT": "invalid_result",
  "INVOKE_LLM": "invoke_llm",
  "LLM_ERROR": "llm_error",
  "MAX_EPOCH_MS": 253402300799999,
  "MAX_STEP": 2147483647,
  "PLATFORM_FAILURE": "platform_failure",
  "POLICY_DENIED": "policy_denied",
  "REPLAY_DIVERGED": "replay_diverged",
  "UNKNOWN_LLM": "unknown_llm"
} as const;
