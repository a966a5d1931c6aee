// Governed LangChain tools: every call goes through the OE, whoever runs the body.
//
// `governedTool(schema, call)` is a LangChain tool for one tool of the Agent's surface (a connector tool, an
// `app.tool` function or a registered LangChain tool): invoking it asks the OE, which runs it in the Tool
// Pod or routes a local tool back to this AER. Outcomes map as the seed and LG-08 say:
//
// - a tool's own failure or a policy denial is thrown as an Error, so the stock ToolNode reports it to the
//   model as a ToolMessage with status "error", as LangGraph.js does for any tool;
// - a suspension (a sensitive call held for review, `app.suspend` in the body) stops the graph with
//   LangGraph's GraphInterrupt, which ToolNode passes through; the run then ends SUSPENDED (agent.ts);
// - a platform failure is also thrown as an Error (the ToolMessage carries its text, as LangGraph.js does),
//   but the run is poisoned: the next model call, the next tool call and every save of the step are
//   refused, and the turn ends FAILED. With the platform checkpointer nothing of the step persists, so no
//   later turn shows that text to the model.
import { DynamicStructuredTool, type StructuredToolInterface } from "@langchain/core/tools";
import { GraphInterrupt } from "@langchain/langgraph";
import { PlatformFailure, PolicyDeniedException, SuspendRequested, ToolExecutionError } from "@agent-engine/runner";

export const PLATFORM_FAILURE_PREFIX = "platform failure, this turn ends: ";
const TOOL_MESSAGE = "tool_message";

/** `{name, description, inputSchema}` as the AER lists its tools (GET /tools, the run's context). */
export interface ToolSchema {
  readonly name: string;
  readonly description?: string;
  readonly inputSchema?: Record<string, unknown>;
}

/** How a governed tool asks the OE (the runner's `app.callTool`). */
export type GovernedCall = (name: string, args: Record<string, unknown>) => Promise<unknown>;

/** The text the model reads for a tool's own failure or a denial; a tool's own message verbatim. */
export function toolErrorText(error: ToolExecutionError | PolicyDeniedException): string {
  if (error instanceof PolicyDeniedException) return `denied by policy: ${error.message}`;
  if (error.error.category === TOOL_MESSAGE && error.error.explanation) return error.error.explanation;
  return `error (${error.error.category}): ${error.error.explanation ?? ""}`;
}

/** What a governed call's outcome is as a tool's: its result, or the error ToolNode reports. */
export function settledOutcome(error: unknown): never {
  if (error instanceof SuspendRequested) {
    // The OE holds the call: stop the graph here. The resumed run replays the turn (agent.ts), and the OE
    // answers this step with the reviewer's decision.
    throw new GraphInterrupt([{ id: `agent-engine-step-${error.step ?? 0}`, value: error.metadata() }]);
  }
  if (error instanceof ToolExecutionError || error instanceof PolicyDeniedException) throw new Error(toolErrorText(error));
  if (error instanceof PlatformFailure) throw new Error(PLATFORM_FAILURE_PREFIX + error.message);
  throw error;
}

function content(result: unknown): string {
  return typeof result === "string" ? result : JSON.stringify(result ?? null);
}

/** A governed tool for `schema`; each invocation is `call(name, args)`, one OE step. */
export function governedTool(schema: ToolSchema, call: GovernedCall): StructuredToolInterface {
  const parameters: Record<string, unknown> = { type: "object", properties: {}, ...(schema.inputSchema ?? {}) };
  return new DynamicStructuredTool({
    name: schema.name,
    description: schema.description || schema.name,
    schema: parameters,
    func: async (args: Record<string, unknown>) => {
      try {
        return content(await call(schema.name, args));
      } catch (error) {
        return settledOutcome(error);
      }
    },
  });
}
