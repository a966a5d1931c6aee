// Drain and interrupt/call, the receiver side (DR-01 to DR-14, IC-01 to IC-10), as servers/drain.py, with
// TypeScript's limits: a promise cannot be cancelled, so only work that registered an AbortController (the
// AER's turn, a tool that takes a signal, a model stream) is aborted. A plain tool function gets no signal:
// it is tracked and admission-blocked, an interrupt of it is an honest `not_cancellable`, and a drain that it
// outlives is an honest `timed_out`. Nothing is ever reported abandoned while it still runs.
//
// State is process-local by design (DR-11): a restarted runtime answers `delivery_failed/execution_not_found`.
import { CallInterrupted, ExecutionDraining } from "./call_errors.js";
import { DRAIN_MAX_DEADLINE_MS_ENV, DRAIN_RECORD_TTL_S_ENV, POD_IP_ENV, type Env } from "./contract.js";
import { DUAL_STACK_HOST, IPV4_HOST } from "./listen.js";
import { getLogger } from "./logging.js";
import { EXECUTION_NOT_FOUND, type DrainAnswer, type InterruptCallAnswer } from "./protocol.js";

const logger = getLogger("agent_runtime_ts.work_registry");

export const DEFAULT_MAX_DEADLINE_MS = 60_000;
export const DEFAULT_RECORD_TTL_S = 900;
export const PENDING_INTERRUPT_TTL_S = 30;
const SWEEP_INTERVAL_MS = 1000;

export type DrainOutcome = DrainAnswer["outcome"];
export type InterruptOutcome = InterruptCallAnswer["outcome"];

export class DrainSettingsError extends Error {}
export class DeadlineTooFar extends Error {
  constructor(readonly maxMs: number) {
    super(`deadline_at_ms is more than ${maxMs} ms ahead`);
  }
}
export class RequestIdConflict extends Error {}
export class WorkspaceMissing extends Error {}
export class WorkspaceMismatch extends Error {}

function positiveInt(env: Env, name: string, fallback: number, unit: string): number {
  const raw = (env[name] ?? "").trim();
  if (!raw) return fallback;
  if (!/^[0-9]+$/.test(raw) || Number(raw) <= 0) {
    throw new DrainSettingsError(
      `${name}=${JSON.stringify(raw)} is not a positive whole number of ${unit}; set it to one (the default is ${fallback}) or unset it`,
    );
  }
  return Number(raw);
}

export interface DrainSettings {
  readonly maxDeadlineMs: number;
  readonly recordTtlS: number;
}

export function drainSettingsFromEnv(env: Env): DrainSettings {
  return {
    maxDeadlineMs: positiveInt(env, DRAIN_MAX_DEADLINE_MS_ENV, DEFAULT_MAX_DEADLINE_MS, "ms"),
    recordTtlS: positiveInt(env, DRAIN_RECORD_TTL_S_ENV, DEFAULT_RECORD_TTL_S, "seconds"),
  };
}

export interface PodIdentity {
  readonly name: string | null;
  readonly address: string | null;
}

function isIp(text: string): boolean {
  return /^(\d{1,3})(\.\d{1,3}){3}$/.test(text) ? text.split(".").every((part) => Number(part) <= 255) : /^[0-9a-fA-F:]+$/.test(text) && text.includes(":");
}

/** Which pod answers (Decision 8): HOSTNAME, and RUNNER_POD_IP (else the listen host, loopback for a wildcard). */
export function podIdentityFromEnv(env: Env, host: string, port: number): PodIdentity {
  const raw = (env[POD_IP_ENV] ?? "").trim();
  let address = host;
  if (raw) {
    if (!isIp(raw)) {
      throw new DrainSettingsError(`${POD_IP_ENV}=${JSON.stringify(raw)} is not an IP address; render it from the pod's status.podIP (downward API) or unset it`);
    }
    address = raw;
  } else if (host === "" || host === IPV4_HOST || host === DUAL_STACK_HOST) {
    address = "127.0.0.1";
  }
  const url = address.includes(":") ? `http://[${address}]:${port}` : `http://${address}:${port}`;
  return { name: env["HOSTNAME"] || null, address: url };
}

/** Decision 1, DR-03: exact match with APP_ID on a managed runtime; not checked without APP_ID. */
export function checkWorkspace(appId: string | null, workspaceId: string | null | undefined): void {
  if (!appId) return;
  if (!workspaceId) throw new WorkspaceMissing();
  if (workspaceId !== appId) throw new WorkspaceMismatch();
}

/** One tracked piece of work: a call at `step`, or (step null) the AER's turn. */
export class Ticket {
  started = false;
  settled = false;
  stopped: CallInterrupted | null = null;
  readonly controller: AbortController | null;

  constructor(
    readonly executionId: string,
    readonly step: number | null,
    readonly cancellable: boolean,
  ) {
    this.controller = cancellable ? new AbortController() : null;
  }

  /** The signal the work gets: null for a plain function, which has no channel to be told. */
  get signal(): AbortSignal | null {
    return this.controller?.signal ?? null;
  }
}

interface DrainRecord {
  readonly executionId: string;
  readonly reason: string;
  readonly deadlineAtMs: number;
  outcome: DrainOutcome;
  reasonCode: string | null;
  timer: NodeJS.Timeout | null;
}

interface Execution {
  readonly executionId: string;
  readonly tickets: Set<Ticket>;
  readonly settledSteps: Set<number>;
  maxSettled: number;
  readonly pending: Map<number, number>; // step -> when the kept interrupt expires (ms, monotonic)
  drain: DrainRecord | null;
  readonly requestIds: Set<string>;
}

export type DrainResult = readonly [DrainOutcome, string | null];

export interface WorkRegistryOptions {
  readonly settings?: DrainSettings;
  readonly boundedByLife?: boolean;
  readonly pendingInterruptTtlS?: number;
  readonly clockMs?: () => number;
  readonly wallMs?: () => number;
}

export class WorkRegistry {
  readonly settings: DrainSettings;
  private readonly boundedByLife: boolean;
  private readonly pendingTtlMs: number;
  private readonly clockMs: () => number;
  private readonly wallMs: () => number;
  private readonly executions = new Map<string, Execution>();
  private readonly byRequest = new Map<string, DrainRecord>();
  private readonly quiet = new Map<string, number>(); // insertion order: oldest quiet first
  private nextSweep = 0;

  constructor(options: WorkRegistryOptions = {}) {
    this.settings = options.settings ?? { maxDeadlineMs: DEFAULT_MAX_DEADLINE_MS, recordTtlS: DEFAULT_RECORD_TTL_S };
    this.boundedByLife = options.boundedByLife ?? false;
    this.pendingTtlMs = (options.pendingInterruptTtlS ?? PENDING_INTERRUPT_TTL_S) * 1000;
    this.clockMs = options.clockMs ?? (() => performance.now());
    this.wallMs = options.wallMs ?? (() => Date.now());
  }

  // admission and tracking -------------------------------------------------------------------------

  /** Register a call before anything of it runs; ExecutionDraining once a drain of its execution was accepted. */
  admit(executionId: string, step: number | null, options: { cancellable: boolean }): Ticket {
    const now = this.clockMs();
    this.sweep(now);
    let execution = this.executions.get(executionId);
    if (execution === undefined) {
      execution = this.newExecution(executionId);
    } else if (execution.drain !== null) {
      throw new ExecutionDraining(executionId);
    }
    this.quiet.delete(executionId);
    const ticket = new Ticket(executionId, step, options.cancellable);
    execution.tickets.add(ticket);
    if (step !== null) {
      const expires = execution.pending.get(step);
      execution.pending.delete(step);
      if (expires !== undefined && expires > now) ticket.stopped = CallInterrupted.byInterrupt(executionId, step);
    }
    return ticket;
  }

  /**
   * Run `work` as the ticket's work. A ticket stopped before it started runs nothing. A cancellable ticket's
   * caller gets CallInterrupted the moment it is aborted; the ticket itself settles only when the work's
   * promise does, so a drain waits for the work really to end.
   */
  run<T>(ticket: Ticket, work: (signal: AbortSignal | null) => Promise<T>): Promise<T> {
    if (ticket.stopped !== null) {
      this.settle(ticket);
      return Promise.reject(ticket.stopped);
    }
    let promise: Promise<T>;
    try {
      promise = work(ticket.signal);
    } catch (error) {
      promise = Promise.reject(error);
    }
    this.attach(ticket, promise);
    const controller = ticket.controller;
    if (controller === null) return promise;
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => reject(ticket.stopped ?? CallInterrupted.byInterrupt(ticket.executionId, ticket.step));
      if (controller.signal.aborted) return onAbort();
      controller.signal.addEventListener("abort", onAbort, { once: true });
      promise.then(
        (value) => {
          controller.signal.removeEventListener("abort", onAbort);
          if (ticket.stopped !== null) reject(ticket.stopped);
          else resolve(value);
        },
        (error: unknown) => {
          controller.signal.removeEventListener("abort", onAbort);
          reject(ticket.stopped ?? error);
        },
      );
    });
  }

  /** Make `promise` the ticket's work: the ticket settles when it does, whoever awaits it. */
  attach(ticket: Ticket, promise: Promise<unknown>): void {
    ticket.started = true;
    const done = (): void => this.settle(ticket);
    promise.then(done, done);
    if (ticket.stopped !== null) ticket.controller?.abort(ticket.stopped);
  }

  settle(ticket: Ticket): void {
    if (ticket.settled) return;
    ticket.settled = true;
    const execution = this.executions.get(ticket.executionId);
    if (execution === undefined) return;
    execution.tickets.delete(ticket);
    if (ticket.step !== null) {
      execution.settledSteps.add(ticket.step);
      execution.maxSettled = Math.max(execution.maxSettled, ticket.step);
    }
    if (execution.tickets.size === 0) this.markQuiet(execution);
  }

  /** The reason of the drain accepted for this execution, if one was. */
  draining(executionId: string): string | null {
    const drain = this.executions.get(executionId)?.drain;
    return drain == null ? null : drain.reason || "drained";
  }

  inFlight(executionId: string): number {
    return this.executions.get(executionId)?.tickets.size ?? 0;
  }

  // drain ------------------------------------------------------------------------------------------

  drain(request: { requestId: string; executionId: string; reason: string; deadlineAtMs: number }): DrainResult {
    const now = this.clockMs();
    this.sweep(now);
    const known = this.byRequest.get(request.requestId);
    if (known !== undefined) {
      if (known.executionId !== request.executionId) throw new RequestIdConflict(request.requestId);
      return [known.outcome, known.reasonCode];
    }
    let execution = this.executions.get(request.executionId);
    if (execution?.drain != null) {
      // One drain per execution: another request_id gets the record there is.
      this.index(execution, execution.drain, request.requestId);
      return [execution.drain.outcome, execution.drain.reasonCode];
    }
    const maxMs = this.settings.maxDeadlineMs;
    const remainingMs = request.deadlineAtMs - this.wallMs();
    if (remainingMs > maxMs) throw new DeadlineTooFar(maxMs);
    const record: DrainRecord = {
      executionId: request.executionId,
      reason: request.reason,
      deadlineAtMs: request.deadlineAtMs,
      outcome: "accepted",
      reasonCode: null,
      timer: null,
    };
    if (execution === undefined) {
      // Never served here, or forgotten: recorded all the same, so a retry re-reads it and a late call is refused.
      execution = this.newExecution(request.executionId);
      record.outcome = "delivery_failed";
      record.reasonCode = EXECUTION_NOT_FOUND;
      this.index(execution, record, request.requestId);
      this.markQuiet(execution);
      logger.info(`drain ${request.requestId}: execution ${request.executionId} is not known here`);
      return [record.outcome, record.reasonCode];
    }
    this.index(execution, record, request.requestId);
    execution.pending.clear();
    const stopped = CallInterrupted.byDrain(request.executionId, request.reason);
    for (const ticket of [...execution.tickets]) WorkRegistry.stop(ticket, stopped);
    logger.info(
      `drain ${request.requestId} of execution ${request.executionId} accepted (${request.reason || "no reason given"}): ` +
        `${execution.tickets.size} piece(s) of work in flight, deadline in ${remainingMs} ms`,
    );
    if (execution.tickets.size === 0) {
      this.finish(record, "completed");
    } else if (remainingMs <= 0) {
      // The deadline had passed with work in flight: timed_out, whatever settles next.
      this.finish(record, "timed_out");
    } else {
      record.timer = setTimeout(() => this.finish(record, "timed_out"), remainingMs);
    }
    return [record.outcome, record.reasonCode];
  }

  private finish(record: DrainRecord, outcome: DrainOutcome): void {
    if (record.outcome !== "accepted") return;
    record.outcome = outcome;
    if (record.timer !== null) clearTimeout(record.timer);
    record.timer = null;
    const execution = this.executions.get(record.executionId);
    const left = execution?.tickets.size ?? 0;
    logger.info(`drain of execution ${record.executionId} ${outcome} (${left} still running)`);
    if (execution !== undefined && left === 0) this.markQuiet(execution);
  }

  private index(execution: Execution, record: DrainRecord, requestId: string): void {
    execution.drain ??= record;
    execution.requestIds.add(requestId);
    this.byRequest.set(requestId, record);
  }

  // interrupt --------------------------------------------------------------------------------------

  /** Stop exactly the call at `step`; the execution stays open and later calls proceed (IC-08). */
  interrupt(executionId: string, step: number): InterruptOutcome {
    const now = this.clockMs();
    this.sweep(now);
    const execution = this.executions.get(executionId);
    if (execution === undefined) return "not_found";
    const running = [...execution.tickets].filter((ticket) => ticket.step === step);
    if (running.length > 0) {
      const outcomes = new Set(running.map((ticket) => WorkRegistry.stop(ticket, CallInterrupted.byInterrupt(executionId, step))));
      for (const outcome of ["interrupted", "not_cancellable", "already_settled"] as const) {
        if (outcomes.has(outcome)) {
          logger.info(`interrupt of execution ${executionId} step ${step}: ${outcome}`);
          return outcome;
        }
      }
    }
    if (execution.settledSteps.has(step)) return "already_settled";
    const alive = execution.tickets.size > 0 || !this.boundedByLife;
    if (execution.drain === null && alive && step > execution.maxSettled) {
      // Not attached yet: kept, and fired the moment the call attaches (IC-04).
      execution.pending.set(step, now + this.pendingTtlMs);
      logger.info(`interrupt of execution ${executionId} step ${step} kept until the call attaches`);
      return "interrupted";
    }
    return "not_found";
  }

  /** Signal one ticket; honest about work that has no signal channel. */
  private static stop(ticket: Ticket, why: CallInterrupted): InterruptOutcome {
    if (!ticket.started) {
      ticket.stopped ??= why; // admitted, not started: nothing has run, so it never will
      return "interrupted";
    }
    if (ticket.settled) return "already_settled";
    if (ticket.controller === null) return "not_cancellable";
    ticket.stopped ??= why;
    ticket.controller.abort(ticket.stopped);
    return "interrupted";
  }

  // forgetting -------------------------------------------------------------------------------------

  private newExecution(executionId: string): Execution {
    const execution: Execution = {
      executionId,
      tickets: new Set(),
      settledSteps: new Set(),
      maxSettled: 0,
      pending: new Map(),
      drain: null,
      requestIds: new Set(),
    };
    this.executions.set(executionId, execution);
    return execution;
  }

  private markQuiet(execution: Execution): void {
    const drain = execution.drain;
    if (drain !== null && drain.outcome === "accepted") this.finish(drain, "completed");
    this.quiet.delete(execution.executionId);
    this.quiet.set(execution.executionId, this.clockMs());
  }

  private sweep(now: number): void {
    if (now < this.nextSweep) return;
    this.nextSweep = now + SWEEP_INTERVAL_MS;
    const ttlMs = this.settings.recordTtlS * 1000;
    for (const [executionId, since] of this.quiet) {
      if (now - since < ttlMs) return;
      this.quiet.delete(executionId);
      const execution = this.executions.get(executionId);
      if (execution === undefined || execution.tickets.size > 0) continue;
      if (execution.drain?.timer != null) continue; // still settling
      this.executions.delete(executionId);
      for (const requestId of execution.requestIds) this.byRequest.delete(requestId);
    }
  }

  get size(): number {
    return this.executions.size;
  }
}
