// LangChain messages <-> the platform's message dicts (LG-14), as pure functions.
//
// The platform dict mirrors LangChain's fields (the Python SDK's agent_runtime/llm/messages.py), so the
// translation is lossless for what crosses the OE and its replay cache: `id`, `name`, `additional_kwargs`,
// `response_metadata`, `tool_calls`, `invalid_tool_calls` and `usage_metadata` survive a round trip.
import {
  AIMessage,
  HumanMessage,
  SystemMessage,
  ToolMessage,
  coerceMessageLikeToMessage,
  type BaseMessage,
  type BaseMessageLike,
  type AIMessageFields,
  type MessageContent,
  type UsageMetadata,
} from "@langchain/core/messages";
import type { InvalidToolCall } from "@langchain/core/messages/tool";

export type PlatformMessage = Record<string, unknown>;

/** A message that has no platform form, or a platform dict that is not a message; names the field. */
export class MessageError extends Error {
  constructor(
    readonly field: string,
    problem: string,
  ) {
    super(`${field}: ${problem}`);
    this.name = "MessageError";
  }
}

function jsonable(value: unknown): unknown {
  // What crosses the OE is JSON; anything else a provider put in metadata becomes its JSON form here.
  const text = JSON.stringify(value, (_key, item: unknown) => (typeof item === "bigint" ? item.toString() : item));
  return text === undefined ? null : JSON.parse(text);
}

function record(value: unknown): Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** One LangChain message (or anything LangChain coerces to one) as a platform dict. */
export function toPlatform(input: BaseMessage | BaseMessageLike): PlatformMessage {
  const message = coerceMessageLikeToMessage(input);
  const type = message.getType();
  if (AIMessage.isInstance(message)) {
    return {
      type: "ai",
      content: jsonable(message.content),
      id: message.id ?? null,
      name: message.name ?? null,
      additional_kwargs: jsonable(message.additional_kwargs ?? {}),
      response_metadata: jsonable(message.response_metadata ?? {}),
      tool_calls: (message.tool_calls ?? []).map((call) => ({ id: call.id ?? null, name: call.name, args: jsonable(call.args) })),
      invalid_tool_calls: (message.invalid_tool_calls ?? []).map((call) => jsonable({ ...call })),
      usage_metadata: message.usage_metadata ? jsonable(message.usage_metadata) : null,
    };
  }
  if (type !== "human" && type !== "system" && type !== "tool") {
    throw new MessageError("message.type", `a ${JSON.stringify(type)} message has no platform form; use human/ai/system/tool`);
  }
  const out: PlatformMessage = { type, content: jsonable(message.content) };
  if (message.id != null) out["id"] = message.id;
  if (message.name != null) out["name"] = message.name;
  if (ToolMessage.isInstance(message)) {
    out["tool_call_id"] = message.tool_call_id;
    out["status"] = message.status ?? "success";
  }
  if (Object.keys(message.additional_kwargs ?? {}).length > 0) out["additional_kwargs"] = jsonable(message.additional_kwargs);
  if (Object.keys(message.response_metadata ?? {}).length > 0) out["response_metadata"] = jsonable(message.response_metadata);
  return out;
}

export function toPlatformMessages(messages: readonly (BaseMessage | BaseMessageLike)[]): PlatformMessage[] {
  return messages.map((message) => toPlatform(message));
}

function content(value: unknown, field: string): MessageContent {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  if (Array.isArray(value)) return value as MessageContent;
  throw new MessageError(field, "content must be a string or a list of content blocks");
}

function parsedArgs(value: unknown, field: string): Record<string, unknown> {
  if (typeof value === "string") {
    try {
      return record(JSON.parse(value || "{}"));
    } catch {
      throw new MessageError(field, "tool call arguments are not JSON");
    }
  }
  return record(value);
}

/** The tool calls of a platform (or OpenAI-style `{function: {name, arguments}}`) AI message. */
function toolCalls(value: unknown, field: string): { id: string; name: string; args: Record<string, unknown>; type: "tool_call" }[] {
  if (value === null || value === undefined) return [];
  if (!Array.isArray(value)) throw new MessageError(field, "must be a list");
  return value.map((raw, index) => {
    const call = record(raw);
    const fn = record(call["function"]);
    const name = call["name"] ?? fn["name"];
    if (typeof name !== "string" || name === "") throw new MessageError(`${field}[${index}].name`, "is missing");
    const id = call["id"];
    return {
      id: typeof id === "string" ? id : "",
      name,
      args: parsedArgs(call["args"] ?? fn["arguments"], `${field}[${index}].args`),
      type: "tool_call" as const,
    };
  });
}

/** A platform (or OpenAI-style) message dict as the LangChain message it mirrors. */
export function fromPlatform(raw: PlatformMessage): BaseMessage {
  const role = raw["type"] ?? raw["role"];
  const type = role === "user" ? "human" : role === "assistant" ? "ai" : role;
  const common: { content: MessageContent; id?: string; name?: string; additional_kwargs?: Record<string, unknown>; response_metadata?: Record<string, unknown> } = {
    content: content(raw["content"], "message.content"),
  };
  if (typeof raw["id"] === "string") common.id = raw["id"];
  if (typeof raw["name"] === "string") common.name = raw["name"];
  if (Object.keys(record(raw["additional_kwargs"])).length > 0) common.additional_kwargs = { ...record(raw["additional_kwargs"]) };
  if (Object.keys(record(raw["response_metadata"])).length > 0) common.response_metadata = { ...record(raw["response_metadata"]) };
  if (type === "ai") {
    const usage = raw["usage_metadata"];
    const fields: AIMessageFields = {
      ...common,
      tool_calls: toolCalls(raw["tool_calls"], "message.tool_calls"),
      invalid_tool_calls: Array.isArray(raw["invalid_tool_calls"])
        ? (raw["invalid_tool_calls"] as InvalidToolCall[]).map((call) => ({ ...call, type: "invalid_tool_call" as const }))
        : [],
    };
    const message = new AIMessage(fields);
    // Set after construction: AIMessageFields types usage_metadata per message structure.
    if (usage !== null && typeof usage === "object") Object.assign(message, { usage_metadata: usage as UsageMetadata });
    return message;
  }
  if (type === "tool") {
    const callId = raw["tool_call_id"];
    if (typeof callId !== "string" || callId === "") throw new MessageError("message.tool_call_id", "a tool message needs the id of the call it answers");
    const status = raw["status"] === "error" ? "error" : "success";
    return new ToolMessage({ ...common, tool_call_id: callId, status });
  }
  if (type === "system") return new SystemMessage(common);
  if (type === "human") return new HumanMessage(common);
  throw new MessageError("message.type", `${JSON.stringify(role)} is not human, ai, system or tool`);
}

export function fromPlatformMessages(messages: readonly PlatformMessage[]): BaseMessage[] {
  return messages.map((message) => fromPlatform(message));
}
