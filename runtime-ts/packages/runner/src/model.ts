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

export interface ModelRunner {
  /** The final AI message: `{type: "ai", content, tool_calls?, ...}`. */
  invoke(call: ModelCall): Promise<Message>;
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
