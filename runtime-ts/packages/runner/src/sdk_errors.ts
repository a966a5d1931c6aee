// What agent code sees when a call does not simply return (the Python SDK's sdk/errors.py).
import type { CallError } from "./protocol.js";

/** The platform (OE, Tool Pod, the wire) failed: never the tool's fault, and it ends the turn (LG-08). */
export class PlatformFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PlatformFailure";
  }
}

/** The OE's policy denied the call. */
export class PolicyDeniedException extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PolicyDeniedException";
  }
}

/** The tool (or model) call failed: its category and explanation are safe to show to the model. */
export class ToolExecutionError extends Error {
  constructor(readonly error: CallError) {
    super(`${error.category}: ${error.explanation ?? ""}`);
    this.name = "ToolExecutionError";
  }
}

/** A call asked a human (`app.suspend`, or a held call): the run ends SUSPENDED at `step`. */
export class SuspendRequested extends Error {
  constructor(
    readonly reason: string,
    readonly payload: unknown,
    public step: number | null,
    public tool: string | null,
  ) {
    super(`suspended: ${reason}`);
    this.name = "SuspendRequested";
  }

  static fromResult(result: unknown, step: number, tool: string): SuspendRequested {
    const body = typeof result === "object" && result !== null ? (result as Record<string, unknown>) : {};
    const reason = typeof body["reason"] === "string" ? body["reason"] : "held for a human";
    return new SuspendRequested(reason, body["payload"] ?? null, step, tool);
  }

  metadata(): Record<string, unknown> {
    return { reason: this.reason, payload: this.payload, step: this.step, tool: this.tool };
  }
}

/** A tool body's message meant for the model (LangChain's ToolException, the Python SDK's ToolError). */
export class ToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ToolError";
  }
}
