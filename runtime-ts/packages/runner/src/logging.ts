// Process-wide logging: one line per record on stderr, JSON when STRUCTURED_LOGGING=true, the same fields as
// agent_runtime/logging_config.py (ts, level, logger, message, execution_id, step, error_type, traceback).
// Installed by the launcher before the tenant's entrypoint is imported; installing again is idempotent.
import { AsyncLocalStorage } from "node:async_hooks";
import { STRUCTURED_LOGGING_ENV, type Env } from "./contract.js";

export type Level = "DEBUG" | "INFO" | "WARNING" | "ERROR";
const RANK: Readonly<Record<Level, number>> = { DEBUG: 10, INFO: 20, WARNING: 30, ERROR: 40 };
const TRUE_WORDS: ReadonlySet<string> = new Set(["1", "true", "yes", "on"]);

interface LogContext {
  readonly executionId: string | null;
  readonly step: number | null;
}

interface Sink {
  structured: boolean;
  level: Level;
  write: (line: string) => void;
}

const context = new AsyncLocalStorage<LogContext>();
let sink: Sink | null = null;

export function structuredLoggingEnabled(env: Env): boolean {
  return TRUE_WORDS.has((env[STRUCTURED_LOGGING_ENV] ?? "").trim().toLowerCase());
}

/** Route every logger through one sink; a second call reconfigures the same one. */
export function setupLogging(
  env: Env,
  options: { write?: (line: string) => void; level?: Level } = {},
): void {
  const write = options.write ?? sink?.write ?? ((line: string) => process.stderr.write(line + "\n"));
  sink = { structured: structuredLoggingEnabled(env), level: options.level ?? "INFO", write };
}

/** Tag every record logged inside `fn` (and what it awaits) with the execution and step. */
export function withLogContext<T>(executionId: string | null, step: number | null, fn: () => T): T {
  return context.run({ executionId, step }, fn);
}

/** A line for one record (pure). */
export function formatRecord(
  record: { level: Level; logger: string; message: string; error?: unknown; at?: Date },
  ctx: LogContext | undefined,
  structured: boolean,
): string {
  const at = (record.at ?? new Date()).toISOString();
  const error = record.error instanceof Error ? record.error : null;
  if (structured) {
    const entry: Record<string, unknown> = { ts: at, level: record.level, logger: record.logger, message: record.message };
    if (ctx?.executionId != null) entry["execution_id"] = ctx.executionId;
    if (ctx?.step != null) entry["step"] = ctx.step;
    if (error !== null) {
      entry["error_type"] = error.name;
      entry["traceback"] = error.stack ?? String(error);
    }
    return JSON.stringify(entry);
  }
  let text = `${at} ${record.level} ${record.logger}: ${record.message}`;
  if (ctx !== undefined && (ctx.executionId !== null || ctx.step !== null)) {
    text += ` [execution_id=${ctx.executionId ?? "None"} step=${ctx.step ?? "None"}]`;
  }
  if (error !== null) text += "\n" + (error.stack ?? String(error));
  return text;
}

export class Logger {
  constructor(readonly name: string) {}

  private emit(level: Level, message: string, error?: unknown): void {
    const current = sink ?? { structured: false, level: "INFO" as Level, write: (line: string) => process.stderr.write(line + "\n") };
    if (RANK[level] < RANK[current.level]) return;
    current.write(formatRecord({ level, logger: this.name, message, error }, context.getStore(), current.structured));
  }

  debug(message: string): void {
    this.emit("DEBUG", message);
  }
  info(message: string): void {
    this.emit("INFO", message);
  }
  warning(message: string): void {
    this.emit("WARNING", message);
  }
  error(message: string, error?: unknown): void {
    this.emit("ERROR", message, error);
  }
}

export function getLogger(name: string): Logger {
  return new Logger(name);
}
