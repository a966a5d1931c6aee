// Where checkpoints live: the store, the MongoDB database name and the project scope (CP-01..CP-04, LG-04).
//
// | env                        | default                                         | meaning                         |
// | CHECKPOINT_STORE           | `mongodb` with MONGODB_URI, else `sqlite`       | `mongodb`, `sqlite` or `memory` |
// | MONGODB_URI                | unset                                           | the AER's MongoDB (its only credential) |
// | MDB_AGENTIC_STORE_DB       | `mdb_store`                                     | base name of the per-project database |
// | CHECKPOINT_DB_NAME         | unset                                           | the exact database name: no project scoping |
// | CHECKPOINT_SQLITE_PATH     | `<tmp>/agent-engine/checkpoints-ts.sqlite3`     | the SQLite file (local, dev)    |
//
// The same variables and the same names as the Python SDK (agent_runtime/langgraph/checkpointer.py), so a
// dual-runtime agent that sets CHECKPOINT_DB_NAME shares one database. The project is the namespace part of
// APP_ID (`<namespace>.<agent>`). A managed runtime (REQUIRE_PROJECT_SCOPED_DB=true) without APP_ID fails
// closed: every read and save is refused (the refusal travels in the settings).
import { tmpdir } from "node:os";
import { join } from "node:path";

export const CHECKPOINT_STORE_ENV = "CHECKPOINT_STORE";
export const MONGODB_URI_ENV = "MONGODB_URI";
export const STORE_DB_ENV = "MDB_AGENTIC_STORE_DB";
export const CHECKPOINT_DB_NAME_ENV = "CHECKPOINT_DB_NAME";
export const CHECKPOINT_SQLITE_PATH_ENV = "CHECKPOINT_SQLITE_PATH";
export const APP_ID_ENV = "APP_ID";
export const REQUIRE_PROJECT_SCOPED_DB_ENV = "REQUIRE_PROJECT_SCOPED_DB";
export const DEFAULT_STORE_DB = "mdb_store";
// MongoDB refuses database names of 64 bytes or more.
export const MAX_DB_NAME_BYTES = 63;
const DB_NAME_FORBIDDEN = /[/\\. "$*<>:|?\x00]/;
const TRUE_WORDS: ReadonlySet<string> = new Set(["1", "true", "yes", "on"]);

export type Env = Readonly<Record<string, string | undefined>>;
export type StoreKind = "mongodb" | "sqlite" | "memory";

/** The checkpoint settings are unusable; the message names the variable and the fix. */
export class CheckpointConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CheckpointConfigError";
  }
}

/** A managed runtime without APP_ID: checkpoint reads and saves fail closed (CP-04). */
export class CheckpointScopeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CheckpointScopeError";
  }
}

/** The resolved settings of one process. `refusal` is set when every read and save must fail. */
export interface CheckpointSettings {
  readonly store: StoreKind;
  /** May hold a password: never printed (see `describeSettings`). */
  readonly mongodbUri?: string;
  readonly dbName?: string;
  readonly sqlitePath?: string;
  readonly refusal?: string;
}

function value(env: Env, name: string): string {
  return (env[name] ?? "").trim();
}

export function isManaged(env: Env): boolean {
  return TRUE_WORDS.has(value(env, REQUIRE_PROJECT_SCOPED_DB_ENV).toLowerCase());
}

/** Why checkpoints must fail closed here, or undefined (CP-04). */
export function scopeRefusal(env: Env): string | undefined {
  if (isManaged(env) && value(env, APP_ID_ENV) === "") {
    return (
      `${REQUIRE_PROJECT_SCOPED_DB_ENV} is set but ${APP_ID_ENV} is not: checkpoint reads and saves are ` +
      `refused rather than trusting the request's workspace; the operator renders ${APP_ID_ENV}=` +
      "<namespace>.<agent> into the AER, set it when running the AER by hand"
    );
  }
  return undefined;
}

/** The project part of APP_ID (`<namespace>.<agent>`), as database-name characters. */
export function projectScope(appId: string): string {
  const project = appId.split(".", 1)[0] ?? "";
  return project.replace(/[^A-Za-z0-9_]/g, "_");
}

function checkedDbName(name: string, source: string): string {
  if (DB_NAME_FORBIDDEN.test(name)) {
    throw new CheckpointConfigError(
      `the checkpoint database name from ${source} has a character MongoDB refuses ` +
        '(/ \\ . space " $ * < > : | ?); use letters, digits, - and _',
    );
  }
  const bytes = Buffer.byteLength(name, "utf8");
  if (bytes > MAX_DB_NAME_BYTES) {
    throw new CheckpointConfigError(
      `the checkpoint database name from ${source} is ${bytes} bytes; MongoDB allows ${MAX_DB_NAME_BYTES}: ` +
        `shorten ${STORE_DB_ENV} or set ${CHECKPOINT_DB_NAME_ENV}`,
    );
  }
  return name;
}

/** CHECKPOINT_DB_NAME verbatim, else `<MDB_AGENTIC_STORE_DB or mdb_store>_<project>` (CP-03). */
export function mongoDbName(env: Env): string {
  const exact = value(env, CHECKPOINT_DB_NAME_ENV);
  if (exact !== "") return checkedDbName(exact, CHECKPOINT_DB_NAME_ENV);
  const base = value(env, STORE_DB_ENV) || DEFAULT_STORE_DB;
  const appId = value(env, APP_ID_ENV);
  const name = appId ? `${base}_${projectScope(appId)}` : base;
  return checkedDbName(name, `${STORE_DB_ENV} with the project from ${APP_ID_ENV}`);
}

export function defaultSqlitePath(): string {
  return join(tmpdir(), "agent-engine", "checkpoints-ts.sqlite3");
}

/** The settings from the environment; CheckpointConfigError names a bad variable. */
export function checkpointSettings(env: Env): CheckpointSettings {
  const uri = value(env, MONGODB_URI_ENV);
  const store = value(env, CHECKPOINT_STORE_ENV).toLowerCase() || (uri ? "mongodb" : "sqlite");
  const refusal = scopeRefusal(env);
  const scope = refusal === undefined ? {} : { refusal };
  if (store === "mongodb") {
    if (uri === "") {
      throw new CheckpointConfigError(
        `${CHECKPOINT_STORE_ENV}=mongodb needs ${MONGODB_URI_ENV}: the MongoDB connection string ` +
          "(give it to the AER through a Secret)",
      );
    }
    if (!uri.startsWith("mongodb://") && !uri.startsWith("mongodb+srv://")) {
      throw new CheckpointConfigError(`${MONGODB_URI_ENV} must start with mongodb:// or mongodb+srv://`);
    }
    return { store: "mongodb", mongodbUri: uri, dbName: mongoDbName(env), ...scope };
  }
  if (store === "sqlite") {
    return { store: "sqlite", sqlitePath: value(env, CHECKPOINT_SQLITE_PATH_ENV) || defaultSqlitePath(), ...scope };
  }
  if (store === "memory") return { store: "memory", ...scope };
  throw new CheckpointConfigError(`${CHECKPOINT_STORE_ENV}=${JSON.stringify(store)}: use mongodb, sqlite or memory`);
}

/** The settings as a log line can show them: the MongoDB URI (which may carry a password) left out. */
export function describeSettings(settings: CheckpointSettings): string {
  if (settings.store === "mongodb") return `mongodb database ${settings.dbName ?? "?"}`;
  if (settings.store === "sqlite") return `sqlite file ${settings.sqlitePath ?? "?"}`;
  return "memory";
}
