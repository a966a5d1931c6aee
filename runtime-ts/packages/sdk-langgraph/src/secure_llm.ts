// GovernedChatModel: what `app.llm(model, { llmId })` returns in a LangGraph App.
//
// A LangChain chat model whose every call goes to the OE as `invoke_llm` (B-13) through the runner's
// SecureWrappedLLM and runs in the Tool Pod, where the registered model and its key are. It binds tools
// like any chat model, so a graph uses it as it would the model it wraps:
// `app.llm(new ChatOpenAI(...)).bindTools(tools)`, or hands it to createReactAgent.
import { createHash } from "node:crypto";
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import {
  BaseChatModel,
  type BaseChatModelCallOptions,
  type BindToolsInput,
} from "@langchain/core/language_models/chat_models";
import type { BaseLanguageModelInput } from "@langchain/core/language_models/base";
import { AIMessage, type AIMessageChunk, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import type { Runnable } from "@langchain/core/runnables";
import { convertToOpenAITool } from "@langchain/core/utils/function_calling";
import { SuspendRequested, type SecureWrappedLLM } from "@agent-engine/runner";
import { settledOutcome } from "./durable_tools.js";
import { fromPlatform, toPlatformMessages, type PlatformMessage } from "./messages.js";
import { completeStoppedToolCalls } from "./stopped_tool_call_middleware.js";

export interface GovernedCallOptions extends BaseChatModelCallOptions {
  /** The offered tools in chat-completions form (what `bindTools` binds). */
  tools?: Record<string, unknown>[];
}

/** LangChain's tool_choice spellings in the chat-completions form the Tool Pod's model receives. */
export function openAIToolChoice(choice: unknown): unknown {
  if (choice === undefined || choice === null || typeof choice === "object") return choice;
  if (choice === "auto" || choice === "none" || choice === "required") return choice;
  if (choice === "any" || choice === true) return "required";
  if (typeof choice === "string") return { type: "function", function: { name: choice } };
  throw new TypeError(`tool_choice ${JSON.stringify(choice)} is not auto, none, any, required or a tool name`);
}

/** An id for an AI message the provider gave none: the same on replay (a random id would change the
 * fingerprint of every later model call). */
export function stableMessageId(message: PlatformMessage): string {
  return `ae-${createHash("sha256").update(JSON.stringify(message)).digest("hex").slice(0, 32)}`;
}

/** LangGraph gives input and tool messages random ids (messagesStateReducer); the model needs none, and
 * the OE's fingerprint of a replayed call must not change. AI message ids are stable (above). */
function withoutRandomId(message: PlatformMessage): PlatformMessage {
  if (message["type"] === "ai") return message;
  const { id: _id, ...rest } = message;
  return rest;
}

export class GovernedChatModel extends BaseChatModel<GovernedCallOptions, AIMessageChunk> {
  constructor(
    readonly llmId: string,
    private readonly secure: SecureWrappedLLM,
  ) {
    super({});
  }

  override _llmType(): string {
    return "agent-engine-governed";
  }

  override get callKeys(): string[] {
    return [...super.callKeys, "tools", "tool_choice"];
  }

  override bindTools(tools: BindToolsInput[], kwargs?: Partial<GovernedCallOptions>): Runnable<BaseLanguageModelInput, AIMessageChunk, GovernedCallOptions> {
    const formatted = tools.map((tool) => convertToOpenAITool(tool) as unknown as Record<string, unknown>);
    const bound: Partial<GovernedCallOptions> = { ...kwargs, tools: formatted };
    const choice = openAIToolChoice(kwargs?.tool_choice);
    if (choice !== undefined) bound.tool_choice = choice as NonNullable<GovernedCallOptions["tool_choice"]>;
    return this.withConfig(bound);
  }

  override async _generate(messages: BaseMessage[], options: this["ParsedCallOptions"], _runManager?: CallbackManagerForLLMRun): Promise<ChatResult> {
    const sent = toPlatformMessages(completeStoppedToolCalls(messages)).map(withoutRandomId);
    const extra: Record<string, unknown> = {};
    if (options.tool_choice !== undefined) extra["tool_choice"] = options.tool_choice;
    if (options.stop !== undefined && options.stop.length > 0) extra["stop"] = [...options.stop];
    let answer: PlatformMessage;
    try {
      answer = await this.secure.invoke(sent, {
        ...(options.tools !== undefined ? { tools: options.tools } : {}),
        ...(Object.keys(extra).length > 0 ? { options: extra } : {}),
      });
    } catch (error) {
      // A held model call stops the graph as a held tool call does; the rest propagates (a platform
      // failure out of the node fails the turn).
      if (error instanceof SuspendRequested) settledOutcome(error);
      throw error;
    }
    if (typeof answer["id"] !== "string" || answer["id"] === "") answer = { ...answer, id: stableMessageId(answer) };
    const message = fromPlatform(answer);
    if (!AIMessage.isInstance(message)) throw new TypeError(`model ${JSON.stringify(this.llmId)} answered a ${message.getType()} message, not an AI message`);
    const text = typeof message.content === "string" ? message.content : "";
    return { generations: [{ message, text }] };
  }
}
