// The Tool Pod's side of a LangChain chat model: the runner's ModelRunner over a BaseChatModel.
//
// `/invoke_llm` hands a registered model platform message dicts and the offered tools (chat-completions
// form) and expects a platform AI message dict back. This adapter translates both ways and lets the
// LangChain model make the provider call (its own client, retries and key handling) in the Tool Pod, where
// the key is. The call's AbortSignal (a drain, an interrupt of its step) reaches the provider request.
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage } from "@langchain/core/messages";
import type { ModelCall, ModelRunner } from "@agent-engine/runner";
import { fromPlatformMessages, toPlatform, type PlatformMessage } from "./messages.js";

export type ChatModelSource = BaseChatModel | (() => BaseChatModel);

export class LangChainModelAdapter implements ModelRunner {
  private built: BaseChatModel | undefined;

  /** `source` is the model, or a factory called once, on the first call (in the Tool Pod, where the key is). */
  constructor(private source: ChatModelSource) {}

  get model(): BaseChatModel {
    if (this.built === undefined) {
      this.built = typeof this.source === "function" && !("invoke" in this.source) ? (this.source as () => BaseChatModel)() : (this.source as BaseChatModel);
    }
    return this.built;
  }

  /** Another model (or factory) for the same llm id: used from the next call that builds it. */
  replace(source: ChatModelSource): void {
    if (source === this.source) return;
    this.source = source;
    this.built = undefined;
  }

  /** The model's type is enough to name it in a log; its settings may hold a key. */
  toString(): string {
    return `LangChainModelAdapter(${this.built?.constructor.name ?? "not built yet"})`;
  }

  async invoke(call: ModelCall): Promise<PlatformMessage> {
    const options: Record<string, unknown> = { ...(call.options ?? {}) };
    const toolChoice = options["tool_choice"];
    delete options["tool_choice"];
    const tools = call.tools ?? [];
    let runnable = this.model as { invoke: BaseChatModel["invoke"] };
    if (tools.length > 0) {
      if (this.model.bindTools === undefined) {
        throw new TypeError(`${this.model.constructor.name} cannot bind tools; the graph offered ${tools.length}`);
      }
      runnable = this.model.bindTools(
        tools.map((tool) => ({ ...tool })),
        toolChoice === undefined ? {} : { tool_choice: toolChoice as never },
      ) as unknown as typeof runnable;
    }
    const message = await runnable.invoke(fromPlatformMessages(call.messages), { ...options, signal: call.signal });
    if (!AIMessage.isInstance(message)) throw new TypeError(`the model returned a ${String(message)}, not an AIMessage`);
    return toPlatform(message);
  }
}
