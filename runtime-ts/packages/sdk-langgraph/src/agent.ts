// LangGraphBaseAgent (LG-12): runs a compiled graph as one execution of the AER.
//
// - New run: `graph.invoke(input, { configurable: { thread_id } })`, steps numbered 1, 2, 3... A failed
//   turn may have left tool calls unanswered: the input first says they stopped (stopped_tool_call_middleware).
// - Suspension: a governed call the OE holds stops the graph (GraphInterrupt); LangGraph saves the
//   checkpoint, and the run ends SUSPENDED with the OE's payload.
// - Resume: the turn is replayed from the execution's first checkpoint on a new branch (checkpoint_branch.ts),
//   so every call gets the number it had and the OE answers it from its replay cache, running the held one
//   once with the reviewer's decision. No checkpoint to resume from (a memory saver in a restarted process,
//   another replica) is an error naming the fix (CP-07), never a silent fresh start.
// - A graph compiled without a checkpointer replays its turn from the input, against the same cache.
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { currentRun, type RequestContext } from "@agent-engine/runner";
import { turnStart } from "./checkpoint_branch.js";
import { MONGODB_URI_ENV } from "./checkpointer.js";
import { toPlatform } from "./messages.js";
import { stoppedAnswers } from "./stopped_tool_call_middleware.js";

/** What the agent needs of a compiled graph (CompiledStateGraph has it). */
export interface CompiledGraphLike {
  invoke(input: unknown, config: Record<string, unknown>): Promise<unknown>;
  getState(config: Record<string, unknown>): Promise<{ values: unknown }>;
  checkpointer?: unknown;
}

export function isCompiledGraph(value: unknown): value is CompiledGraphLike {
  const graph = value as Partial<CompiledGraphLike> | null;
  return typeof graph === "object" && graph !== null && typeof graph.invoke === "function" && typeof graph.getState === "function";
}

/** A resume found no checkpoint of its own turn (CP-07); the message names the fix. */
export class CheckpointMissingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CheckpointMissingError";
  }
}

/** The graph stopped at an interrupt() no OE-governed call asked for. */
export class UngovernedInterruptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UngovernedInterruptError";
  }
}

const INTERRUPT_KEY = "__interrupt__";

/** A graph's output as JSON: messages as platform dicts, LangGraph's interrupt marker dropped. */
export function jsonableState(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value ?? null;
  if (AIMessage.isInstance(value) || (value as Partial<BaseMessage>).getType !== undefined) return toPlatform(value as BaseMessage);
  if (Array.isArray(value)) return value.map(jsonableState);
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) if (key !== INTERRUPT_KEY) out[key] = jsonableState(item);
  return out;
}

function messagesOf(values: unknown): BaseMessage[] {
  const messages = (values as Record<string, unknown> | null)?.["messages"];
  return Array.isArray(messages) ? (messages as BaseMessage[]) : [];
}

export class LangGraphBaseAgent {
  constructor(
    readonly graph: CompiledGraphLike,
    private readonly threadId: string,
  ) {}

  get checkpointer(): BaseCheckpointSaver | undefined {
    return this.graph.checkpointer instanceof BaseCheckpointSaver ? this.graph.checkpointer : undefined;
  }

  /** One turn of the execution `context` describes, inside the runner's run. */
  async run(input: unknown, context: RequestContext): Promise<unknown> {
    const configurable: Record<string, unknown> = { thread_id: this.threadId };
    const config = { configurable, signal: context.signal };
    const saver = this.checkpointer;
    let graphInput: unknown = input;
    if (context.resume && saver !== undefined) {
      const start = await turnStart(saver, this.threadId, context.executionId);
      if ("missing" in start) throw this.missing(context.executionId, start.missing);
      configurable["checkpoint_id"] = start.checkpointId;
      graphInput = null;
    } else if (saver !== undefined) {
      graphInput = await this.recoveredInput(input, config);
    }
    const result = await this.graph.invoke(graphInput, config);
    const run = currentRun("the LangGraph agent's turn");
    if (run.suspension !== null) throw run.suspension;
    const interrupted = (result as Record<string, unknown> | null)?.[INTERRUPT_KEY];
    if (Array.isArray(interrupted) && interrupted.length > 0) {
      throw new UngovernedInterruptError(
        "the graph stopped at a LangGraph interrupt() that no governed call asked for; the TypeScript SDK holds " +
          "governed calls only: mark the tool sensitive (app.tool(tool, { sensitive: true })) or use app.suspend(reason)",
      );
    }
    return jsonableState(result);
  }

  /** The input, after a stopped-call answer for each tool call a failed turn left unanswered. */
  private async recoveredInput(input: unknown, config: Record<string, unknown>): Promise<unknown> {
    const state = await this.graph.getState(config);
    const stopped = stoppedAnswers(messagesOf(state.values));
    if (stopped.length === 0) return input;
    const record = (input ?? {}) as Record<string, unknown>;
    const messages = Array.isArray(record["messages"]) ? (record["messages"] as unknown[]) : [];
    return { ...record, messages: [...stopped, ...messages] };
  }

  private missing(executionId: string, why: "no_checkpoint" | "another_turn"): CheckpointMissingError {
    if (why === "no_checkpoint") {
      return new CheckpointMissingError(
        `resuming execution ${JSON.stringify(executionId)}: no checkpoint for thread ${JSON.stringify(this.threadId)}. ` +
          `A memory checkpointer loses them with the process (or lives in another replica); set ${MONGODB_URI_ENV} ` +
          "for the AER (or CHECKPOINT_SQLITE_PATH on a kept volume)",
      );
    }
    return new CheckpointMissingError(
      `resuming execution ${JSON.stringify(executionId)}: the latest checkpoint of thread ${JSON.stringify(this.threadId)} ` +
        "is not this execution's (another turn ran on the thread since); start a new execution",
    );
  }
}
