// A model the Tool Pod runs for `POST /invoke_llm`: registered on the App under its llm id (the AER's
// `app.llm(llmId)` calls it through the OE). Framework SDKs adapt their chat models to this shape.
export type Message = Record<string, unknown>;

export interface ModelCall {
  readonly messages: readonly Message[];
  readonly tools: readonly Record<string, unknown>[] | null;
  readonly options: Readonly<Record<string, unknown>> | null;
  /** Aborted by a drain of the execution or an interrupt of this call's step. */
  readonly signal: AbortSignal;
}

/** One piece of a streamed answer: content text, pieces of tool calls (`id` and `name` once, `arguments` in
 * pieces), and on the last one the finish reason and usage. */
export interface ModelDelta {
  readonly text?: string;
  readonly toolCalls?: readonly { readonly index: number; readonly id?: string; readonly name?: string; readonly arguments?: string }[];
  readonly finishReason?: string;
  readonly usage?: Record<string, unknown>;
  /** The stream's last piece: whatever text was held back for redaction goes out with it. */
  readonly last?: boolean;
}

export interface ModelRunner {
  /** The final AI message: `{type: "ai", content, tool_calls?, ...}`. */
  invoke(call: ModelCall): Promise<Message>;
  /** Optional: the same call streamed, each piece handed to `onDelta` as it arrives; resolves to the same
   * final AI message `invoke` would. A model without it answers a streamed call whole. */
  stream?(call: ModelCall, onDelta: (delta: ModelDelta) => void): Promise<Message>;
}

/** A model call's failure the Tool Pod may report as is: its category and a safe explanation. */
export class ModelError extends Error {
  constructor(
    readonly category: string,
    readonly explanation: string,
  ) {
    super(explanation);
  }
}
