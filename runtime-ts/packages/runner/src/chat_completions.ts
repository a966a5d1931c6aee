// An OpenAI-compatible chat-completions model for the Tool Pod (`app.model(llmId, ChatCompletionsModel.fromEnv(env))`):
// the platform's model from AGENTIC_LLM_BASE_URL and AGENTIC_LLM_MODEL, its key read per call from the
// variable AGENTIC_LLM_API_KEY_ENV names (the model key lives only in the Tool Pod, Decision 9). Messages in
// the platform's shape (`{type: human|system|ai|tool, ...}`) as llm/messages.py maps them; the answer is the
// same AI message. No error, log line or result carries the key or a provider body.
import { ModelError, type Message, type ModelCall, type ModelDelta, type ModelRunner } from "./model.js";
import type { Env } from "./contract.js";

export const LLM_BASE_URL_ENV = "AGENTIC_LLM_BASE_URL";
export const LLM_MODEL_ENV = "AGENTIC_LLM_MODEL";
export const LLM_API_KEY_ENV_ENV = "AGENTIC_LLM_API_KEY_ENV";
const RESERVED_OPTIONS: ReadonlySet<string> = new Set(["model", "messages", "tools", "stream"]);
const ROLE: Readonly<Record<string, string>> = { system: "system", human: "user", ai: "assistant", tool: "tool" };
const MODEL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const TIMEOUT_MS = 120_000;
const MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

const toModelName = (name: string): string => (MODEL_NAME.test(name) ? name : name.replaceAll(".", "__"));

/** Chat-completions `messages` for platform messages (pure). */
export function toOpenAIMessages(messages: readonly Message[]): Record<string, unknown>[] {
  return messages.map((message, index) => {
    const kind = String(message["type"] ?? message["role"] ?? "");
    const role = ROLE[kind] ?? (Object.values(ROLE).includes(kind) ? kind : null);
    if (role === null) throw new ModelError("invalid_arguments", `messages[${index}].type must be human, system, ai or tool`);
    const wire: Record<string, unknown> = { role, content: message["content"] ?? "" };
    if (role === "tool") wire["tool_call_id"] = message["tool_call_id"];
    const calls = (message["tool_calls"] as { id: string; name: string; args: unknown }[] | undefined) ?? [];
    if (role === "assistant" && calls.length > 0) {
      wire["tool_calls"] = calls.map((call) => ({ id: call.id, type: "function", function: { name: toModelName(call.name), arguments: JSON.stringify(call.args ?? {}) } }));
      wire["content"] = message["content"] || null;
    }
    return wire;
  });
}

/** Chat-completions `tools` for the platform's tool schemas `{name, description, inputSchema}` (pure). */
export function toOpenAITools(tools: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  return tools.map((tool) => ({
    type: "function",
    function: {
      name: toModelName(String(tool["name"])),
      description: String(tool["description"] ?? ""),
      parameters: (tool["inputSchema"] as Record<string, unknown> | undefined) ?? { type: "object", properties: {} },
    },
  }));
}

/** The AI message of a completion (choice 0), tool names mapped back to the ones offered (pure). */
export function aiMessageFromCompletion(body: unknown, offered: ReadonlyMap<string, string>): Message {
  const top = body as { id?: unknown; model?: unknown; choices?: { index?: number; message?: Record<string, unknown>; finish_reason?: unknown }[]; usage?: Record<string, number> };
  const choice = Array.isArray(top?.choices) ? (top.choices.find((c) => (c.index ?? 0) === 0) ?? null) : null;
  if (choice === null || typeof choice.message !== "object" || choice.message === null) {
    throw new ModelError("llm_error", "the model's answer has no choice 0 with a message");
  }
  const raw = (choice.message["tool_calls"] as { id: string; function: { name: string; arguments: string } }[] | undefined) ?? [];
  const toolCalls: Record<string, unknown>[] = [];
  const invalid: Record<string, unknown>[] = [];
  for (const call of raw) {
    const name = offered.get(call.function.name) ?? call.function.name;
    try {
      const args: unknown = JSON.parse(call.function.arguments || "{}");
      if (typeof args !== "object" || args === null || Array.isArray(args)) throw new Error("not an object");
      toolCalls.push({ id: call.id, name, args, type: "tool_call" });
    } catch {
      invalid.push({ id: call.id, name, args: call.function.arguments, error: "arguments are not a JSON object" });
    }
  }
  const usage = top.usage;
  return {
    type: "ai",
    content: choice.message["content"] ?? "",
    id: typeof top.id === "string" ? top.id : null,
    tool_calls: toolCalls,
    invalid_tool_calls: invalid,
    additional_kwargs: {},
    response_metadata: { model_name: top.model ?? null, finish_reason: choice.finish_reason ?? null, ...(usage ? { token_usage: usage } : {}) },
    usage_metadata: usage
      ? { input_tokens: usage["prompt_tokens"] ?? 0, output_tokens: usage["completion_tokens"] ?? 0, total_tokens: usage["total_tokens"] ?? 0 }
      : null,
  };
}

export class ChatCompletionsModel implements ModelRunner {
  constructor(
    private readonly baseUrl: string,
    private readonly model: string,
    private readonly apiKeyEnv: string | null,
    private readonly env: Env = process.env,
  ) {}

  static fromEnv(env: Env = process.env): ChatCompletionsModel {
    const base = (env[LLM_BASE_URL_ENV] ?? "").trim();
    const model = (env[LLM_MODEL_ENV] ?? "").trim();
    for (const [name, value] of [[LLM_BASE_URL_ENV, base], [LLM_MODEL_ENV, model]] as const) {
      if (!value) throw new Error(`${name} is not set: it names the chat-completions endpoint and model`);
    }
    return new ChatCompletionsModel(base.replace(/\/+$/, ""), model, (env[LLM_API_KEY_ENV_ENV] ?? "").trim() || null, env);
  }

  private request(call: ModelCall, stream: boolean): { body: Record<string, unknown>; headers: Record<string, string>; offered: Map<string, string> } {
    const body: Record<string, unknown> = { model: this.model, messages: toOpenAIMessages(call.messages) };
    for (const [key, value] of Object.entries(call.options ?? {})) {
      if (RESERVED_OPTIONS.has(key)) throw new ModelError("invalid_arguments", `options.${key} is set by the client and cannot be an option`);
      body[key] = value;
    }
    const offered = new Map<string, string>();
    if (call.tools && call.tools.length > 0) {
      body["tools"] = toOpenAITools(call.tools);
      for (const tool of call.tools) offered.set(toModelName(String(tool["name"])), String(tool["name"]));
    }
    if (stream) {
      body["stream"] = true;
      body["stream_options"] = { ...((body["stream_options"] as Record<string, unknown> | undefined) ?? {}), include_usage: true };
    }
    const headers: Record<string, string> = { "content-type": "application/json" };
    const key = this.apiKeyEnv ? this.env[this.apiKeyEnv] : undefined;
    if (key) headers["authorization"] = `Bearer ${key}`;
    return { body, headers, offered };
  }

  private async send(call: ModelCall, stream: boolean): Promise<{ response: Response; offered: Map<string, string> }> {
    const { body, headers, offered } = this.request(call, stream);
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}/chat/completions`, {
        method: "POST",
        headers,
        body: JSON.stringify(body),
        redirect: "error",
        signal: AbortSignal.any([call.signal, AbortSignal.timeout(TIMEOUT_MS)]),
      });
    } catch (error) {
      if (call.signal.aborted) throw call.signal.reason;
      const name = error instanceof Error ? error.name : "error";
      throw new ModelError("llm_error", name === "TimeoutError" ? "the model did not answer in time" : "the model could not be reached");
    }
    if (response.status >= 400) {
      await response.body?.cancel();
      // Providers echo credentials in error bodies: only the status is reported.
      const kind = response.status === 401 || response.status === 403 ? "the model rejected the credential" : response.status === 429 ? "the model is rate limiting requests" : "the model failed the request";
      throw new ModelError("llm_error", `HTTP ${response.status}: ${kind}`);
    }
    return { response, offered };
  }

  async invoke(call: ModelCall): Promise<Message> {
    const { response, offered } = await this.send(call, false);
    const text = await response.text();
    if (text.length > MAX_RESPONSE_BYTES) throw new ModelError("llm_error", "the model's answer is larger than the cap");
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new ModelError("llm_error", "the model's answer is not JSON");
    }
    return aiMessageFromCompletion(parsed, offered);
  }

  /** The call streamed (server-sent events of chat-completion chunks), collected into the same message. */
  async stream(call: ModelCall, onDelta: (delta: ModelDelta) => void): Promise<Message> {
    const { response, offered } = await this.send(call, true);
    if (response.body === null) throw new ModelError("llm_error", "the model's stream has no body");
    const collected = { id: null as string | null, model: null as unknown, content: "", finish: null as string | null, usage: undefined as Record<string, number> | undefined };
    const calls = new Map<number, { id: string; name: string; arguments: string }>();
    const decoder = new TextDecoder();
    let buffer = "";
    let size = 0;
    const handle = (data: string): void => {
      let chunk: { id?: string; model?: unknown; choices?: { index?: number; delta?: Record<string, unknown>; finish_reason?: string | null }[]; usage?: Record<string, number> | null };
      try {
        chunk = JSON.parse(data) as typeof chunk;
      } catch {
        throw new ModelError("llm_error", "a chunk of the model's stream is not JSON");
      }
      collected.id ??= typeof chunk.id === "string" ? chunk.id : null;
      collected.model ??= chunk.model ?? null;
      if (chunk.usage) collected.usage = chunk.usage;
      const choice = chunk.choices?.find((c) => (c.index ?? 0) === 0);
      const delta = choice?.delta ?? {};
      const text = typeof delta["content"] === "string" ? delta["content"] : "";
      const pieces: { index: number; id?: string; name?: string; arguments?: string }[] = [];
      for (const raw of (delta["tool_calls"] as { index?: number; id?: string; function?: { name?: string; arguments?: string } }[] | undefined) ?? []) {
        const index = raw.index ?? 0;
        const known = calls.get(index) ?? { id: "", name: "", arguments: "" };
        if (raw.id) known.id = raw.id;
        const name = raw.function?.name ? (offered.get(raw.function.name) ?? raw.function.name) : undefined;
        if (name) known.name = name;
        known.arguments += raw.function?.arguments ?? "";
        calls.set(index, known);
        pieces.push({ index, ...(raw.id ? { id: raw.id } : {}), ...(name ? { name } : {}), arguments: raw.function?.arguments ?? "" });
      }
      collected.content += text;
      if (choice?.finish_reason) collected.finish = choice.finish_reason;
      if (text || pieces.length > 0) onDelta({ text, toolCalls: pieces });
    };
    try {
      for await (const piece of response.body) {
        size += piece.length;
        if (size > MAX_RESPONSE_BYTES) throw new ModelError("llm_error", "the model's answer is larger than the cap");
        buffer += decoder.decode(piece, { stream: true });
        let newline: number;
        while ((newline = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, newline).trim();
          buffer = buffer.slice(newline + 1);
          if (!line.startsWith("data:")) continue;
          const data = line.slice(5).trim();
          if (data && data !== "[DONE]") handle(data);
        }
      }
    } catch (error) {
      if (call.signal.aborted) throw call.signal.reason;
      if (error instanceof ModelError) throw error;
      throw new ModelError("llm_error", "the model's stream broke off");
    }
    onDelta({ last: true, ...(collected.finish !== null ? { finishReason: collected.finish } : {}), ...(collected.usage ? { usage: collected.usage } : {}) });
    const toolCalls = [...calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, call_]) => ({ id: call_.id, type: "function", function: { name: call_.name, arguments: call_.arguments } }));
    const completion = {
      id: collected.id,
      model: collected.model,
      choices: [{ index: 0, message: { content: collected.content, tool_calls: toolCalls }, finish_reason: collected.finish }],
      ...(collected.usage ? { usage: collected.usage } : {}),
    };
    // Names are canonical already: mapped again through `offered` they stay as they are.
    return aiMessageFromCompletion(completion, new Map());
  }
}
