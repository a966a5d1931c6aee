// Errors a tracked call ends with, shared by the registry, the SDK wrappers and the servers.
import { EXECUTION_DRAINED, EXECUTION_DRAINING, INTERRUPTED } from "./protocol.js";

/** A new call of an execution being drained is refused before anything runs (DR-10). */
export class ExecutionDraining extends Error {
  readonly category = EXECUTION_DRAINING;
  readonly explanation: string;
  constructor(executionId: string) {
    const explanation = `execution '${executionId}' is being drained here: no new call of it is admitted`;
    super(explanation);
    this.explanation = explanation;
  }
}

/** The call was stopped by an interrupt (`interrupted`) or a drain (`execution_drained`): its own answer (IC-09). */
export class CallInterrupted extends Error {
  constructor(
    readonly category: string,
    readonly explanation: string,
  ) {
    super(explanation);
  }

  static byInterrupt(executionId: string, step: number | null): CallInterrupted {
    return new CallInterrupted(INTERRUPTED, `the call at step ${step ?? "None"} of execution '${executionId}' was interrupted`);
  }

  static byDrain(executionId: string, reason: string): CallInterrupted {
    const why = reason ? ` (${reason})` : "";
    return new CallInterrupted(EXECUTION_DRAINED, `execution '${executionId}' was drained${why}; the call was cancelled`);
  }
}
