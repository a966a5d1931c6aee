// The wire contracts: the generated types (from agent_runtime/protocol.py through JSON Schema), the paths and
// categories, and validation of a received body against the same schema, naming each bad field.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import { PROTOCOL_CONSTANTS } from "./generated/protocol_types.js";
import type * as Wire from "./generated/protocol_types.js";

export type * from "./generated/protocol_types.js";
export { PROTOCOL_CONSTANTS };

export const INVOKE_LLM = PROTOCOL_CONSTANTS.INVOKE_LLM;
export const AGENT_SUSPEND = PROTOCOL_CONSTANTS.AGENT_SUSPEND;
export const EXECUTION_NOT_FOUND = PROTOCOL_CONSTANTS.EXECUTION_NOT_FOUND;
export const INTERRUPTED = PROTOCOL_CONSTANTS.INTERRUPTED;
export const EXECUTION_DRAINED = PROTOCOL_CONSTANTS.EXECUTION_DRAINED;
export const EXECUTION_DRAINING = PROTOCOL_CONSTANTS.EXECUTION_DRAINING;
export const PLATFORM_FAILURE = PROTOCOL_CONSTANTS.PLATFORM_FAILURE;
export const ENTRYPOINT_ERROR = PROTOCOL_CONSTANTS.ENTRYPOINT_ERROR;
export const INVALID_RESULT = PROTOCOL_CONSTANTS.INVALID_RESULT;
export const POLICY_DENIED = PROTOCOL_CONSTANTS.POLICY_DENIED;
export const REPLAY_DIVERGED = PROTOCOL_CONSTANTS.REPLAY_DIVERGED;

// Categories of a failed tool call (the Python Tool Pod's and SecureToolWrapper's).
export const UNKNOWN_TOOL = "unknown_tool";
export const INVALID_ARGUMENTS = "invalid_arguments";
export const TOOL_ERROR = "tool_error";
export const TIMEOUT = "timeout";

export const AER_EXECUTE_PATH = "/execute";
export const TOOL_EXECUTE_PATH = "/execute";
export const INVOKE_LLM_PATH = "/invoke_llm";
export const TOOLS_PATH = "/tools";
export const OE_TOOL_EXECUTE_PATH = "/tool/execute";
export const OE_TOOL_RESULT_PATH = "/tool/result";
export const OE_CALLBACK_PATH = "/executor/callback";
export const OE_GRAPH_STREAM_PATH = "/tool/stream";
export const DRAIN_PATH = "/drain";
export const INTERRUPT_CALL_PATH = "/interrupt/call";

export const MAX_BODY_BYTES = 8 * 1024 * 1024;

const SCHEMA_FILE = fileURLToPath(new URL("../../schema/protocol.schema.json", import.meta.url));
const document = JSON.parse(readFileSync(SCHEMA_FILE, "utf8")) as { $defs: Record<string, object> };
const ajv = new Ajv2020({ allErrors: true, strict: false });
ajv.addSchema({ $id: "protocol", $defs: document.$defs });

export interface Problem {
  readonly field: string;
  readonly problem: string;
}

/** A body that is not the model: each bad field and its problem, never the offending input. */
export class BodyInvalid extends Error {
  constructor(readonly problems: readonly Problem[]) {
    super(problems.map((p) => `${p.field}: ${p.problem}`).join("; "));
  }
}

type Models = {
  AERExecuteRequest: Wire.AERExecuteRequest;
  ToolPodExecuteRequest: Wire.ToolPodExecuteRequest;
  InvokeLLMRequest: Wire.InvokeLLMRequest;
  DrainRequest: Wire.DrainRequest;
  InterruptCallRequest: Wire.InterruptCallRequest;
  ToolExecuteAnswer: Wire.ToolExecuteAnswer;
  Claims: Wire.Claims;
};

const validators = new Map<string, ValidateFunction>();

function validator(model: keyof Models): ValidateFunction {
  let found = validators.get(model);
  if (found === undefined) {
    found = ajv.compile({ $ref: `protocol#/$defs/${model}` });
    validators.set(model, found);
  }
  return found;
}

function problemOf(error: ErrorObject): Problem {
  const path = error.instancePath.split("/").filter(Boolean);
  if (error.keyword === "required") path.push(String(error.params["missingProperty"]));
  const field = path.join(".") || "(body)";
  const problems: Record<string, string> = { required: "Field required" };
  return { field, problem: problems[error.keyword] ?? error.message ?? error.keyword };
}

/** The value as `model`, or BodyInvalid naming each field (one problem per field, as pydantic says it). */
export function parseModel<K extends keyof Models>(model: K, value: unknown): Models[K] {
  const check = validator(model);
  if (check(value)) return value as Models[K];
  const seen = new Map<string, Problem>();
  for (const error of check.errors ?? []) {
    // anyOf branches (`string | null`) each report; the field's first problem is enough.
    if (error.keyword === "anyOf") continue;
    const problem = problemOf(error);
    if (!seen.has(problem.field)) seen.set(problem.field, problem);
  }
  throw new BodyInvalid([...seen.values()]);
}

/** JSON text as `model`: malformed JSON is a `(body)` problem. */
export function parseBody<K extends keyof Models>(model: K, text: string): Models[K] {
  let value: unknown;
  try {
    value = JSON.parse(text === "" ? "null" : text);
  } catch {
    throw new BodyInvalid([{ field: "(body)", problem: "Invalid JSON" }]);
  }
  return parseModel(model, value);
}
