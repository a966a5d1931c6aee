// SecureWrappedLLM: a model call is a step like a tool call (tool `invoke_llm`), asked of the OE, which runs
// it in the Tool Pod (OE-19) and answers the final AI message. The AER holds no model key.
import { currentRun } from "./run_context.js";
import { ask, outcome } from "./oe_exchange.js";
import { INVOKE_LLM, type LLMDelta, type ToolExecuteRequest } from "./protocol.js";
import { PlatformFailure, PolicyDeniedException } from "./sdk_errors.js";
import { withLogContext } from "./logging.js";

export type Message = Record<string, unknown>;

export interface InvokeOptions {
  readonly tools?: readonly Record<string, unknown>[];
  readonly options?: Record<string, unknown>;
  /** Stream the call: the OE publishes the model's deltas as `llm_delta` events while they arrive. */
  readonly stream?: boolean;
}

export class SecureWrappedLLM {
  constructor(readonly llmId: string) {}

  /** The final AI message (`{type: "ai", content, tool_calls, ...}`). */
  async invoke(messages: readonly Message[], options: InvokeOptions = {}): Promise<Message> {
    return (await this.invokeWithDeltas(messages, options)).message;
  }

  /** A streamed call's deltas as the OE published them (redacted, in order) and its final AI message. */
  invokeWithDeltas(messages: readonly Message[], options: InvokeOptions = {}): Promise<{ deltas: LLMDelta[]; message: Message }> {
    const run = currentRun(`calling the model '${this.llmId}'`);
    const request: ToolExecuteRequest = {
      execution_id: run.context.executionId,
      step: run.allocateStep(),
      tool: INVOKE_LLM,
      llm_id: this.llmId,
      messages: JSON.parse(JSON.stringify(messages)) as Message[],
      ...(options.tools !== undefined ? { tools: JSON.parse(JSON.stringify(options.tools)) as Message[] } : {}),
      ...(options.options !== undefined ? { options: JSON.parse(JSON.stringify(options.options)) as Message } : {}),
      ...(options.stream ? { stream: true } : {}),
    };
    return withLogContext(run.context.executionId, request.step, async () => {
      const answer = await ask(run, request);
      if (!answer.proceed) throw new PolicyDeniedException(answer.reason ?? `model '${this.llmId}' was denied by policy`);
      if (answer.route_to === "callback") {
        const failure = "the OE routed an LLM call back to the AER; model calls run in the Tool Pod only";
        run.platformFailure ??= failure;
        throw new PlatformFailure(failure);
      }
      const message = outcome(run, answer, INVOKE_LLM);
      if (typeof message !== "object" || message === null || (message as Message)["type"] !== "ai") {
        const failure = `the OE's answer to the model call at step ${request.step} is not an AI message`;
        run.platformFailure ??= failure;
        throw new PlatformFailure(failure);
      }
      return { deltas: answer.deltas ?? [], message: message as Message };
    });
  }
}
