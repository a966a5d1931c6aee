// The platform checkpointer (`app.checkpointer()`): a LangGraph saver over a real one, with two refusals.
//
// It keeps checkpoints in the backend the settings name (MongoDB through MongoDBSaver, SQLite through
// SqliteSaver on better-sqlite3, or memory through MemorySaver) and adds what the platform promises on top:
//
// - fail closed (CP-04): in a managed runtime without APP_ID every read and save throws;
// - after a platform failure in the run (LG-08, LG-09) every save of the run throws, pending writes
//   included, so nothing of the failing step persists and no later turn shows the failure to the model.
//
// The backend is opened on first use: the Tool Pod builds the graph at start-up and never touches it, and
// its environment need not name the AER's store.
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  MemorySaver,
  TASKS,
  maxChannelVersion,
  type CheckpointPendingWrite,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
} from "@langchain/langgraph-checkpoint";
import { CheckpointScopeError, type CheckpointSettings, type StoreKind } from "./checkpointer.js";

type Opener = () => Promise<BaseCheckpointSaver>;

/** Checkpoints before format 4 kept pending `Send`s in their parent's writes; format 4 keeps them in the
 * TASKS channel. MongoDBSaver does not migrate them (MemorySaver and SqliteSaver do): the same migration
 * here, for every backend, on what a read returns (nothing is written back). */
export function withPendingSends(tuple: CheckpointTuple, parentWrites: readonly CheckpointPendingWrite[]): CheckpointTuple {
  const checkpoint = tuple.checkpoint;
  if (checkpoint.v >= 4 || TASKS in (checkpoint.channel_values ?? {})) return tuple;
  const sends = parentWrites.filter(([, channel]) => channel === TASKS).map(([, , value]) => value);
  const versions = Object.values(checkpoint.channel_versions ?? {});
  return {
    ...tuple,
    checkpoint: {
      ...checkpoint,
      channel_values: { ...checkpoint.channel_values, [TASKS]: sends },
      channel_versions: { ...checkpoint.channel_versions, [TASKS]: versions.length > 0 ? maxChannelVersion(...versions) : 1 },
    },
  };
}

/** Why a save of the current run must be refused (a platform failure earlier in the turn), or undefined. */
export type SaveGuard = (what: string) => Error | undefined;

/** Metadata every save of the current run carries (the execution that saved it), or undefined. */
export type SaveStamp = () => Record<string, unknown> | undefined;

export interface PlatformCheckpointerOptions {
  readonly refusal?: string | undefined;
  readonly saveGuard?: SaveGuard | undefined;
  readonly stamp?: SaveStamp | undefined;
  readonly store?: StoreKind | "custom";
}

export class PlatformCheckpointer extends BaseCheckpointSaver {
  readonly store: StoreKind | "custom";
  private opened: Promise<BaseCheckpointSaver> | undefined;
  private readonly refusal: string | undefined;
  private readonly saveGuard: SaveGuard | undefined;
  private readonly stamp: SaveStamp | undefined;
  private closer: (() => Promise<void>) | undefined;

  private constructor(
    private readonly opener: Opener,
    options: PlatformCheckpointerOptions,
  ) {
    super();
    this.store = options.store ?? "custom";
    this.refusal = options.refusal;
    this.saveGuard = options.saveGuard;
    this.stamp = options.stamp;
  }

  /** The platform's refusals over a saver you built yourself. */
  static wrapping(saver: BaseCheckpointSaver, options: PlatformCheckpointerOptions = {}): PlatformCheckpointer {
    const checkpointer = new PlatformCheckpointer(() => Promise.resolve(saver), { store: "custom", ...options });
    checkpointer.serde = saver.serde;
    return checkpointer;
  }

  /** The checkpointer the settings name; nothing is opened until the first read or save. */
  static fromSettings(
    settings: CheckpointSettings,
    hooks: { readonly saveGuard?: SaveGuard; readonly stamp?: SaveStamp } = {},
  ): PlatformCheckpointer {
    const options = { refusal: settings.refusal, saveGuard: hooks.saveGuard, stamp: hooks.stamp, store: settings.store };
    if (settings.store === "memory") {
      const saver = new MemorySaver();
      return new PlatformCheckpointer(() => Promise.resolve(saver), options);
    }
    if (settings.store === "sqlite") {
      const path = settings.sqlitePath ?? "";
      const checkpointer: PlatformCheckpointer = new PlatformCheckpointer(async () => {
        // Loaded on first use: better-sqlite3 is a native module the Tool Pod's build never needs.
        const { SqliteSaver } = await import("@langchain/langgraph-checkpoint-sqlite");
        if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
        const saver = SqliteSaver.fromConnString(path);
        checkpointer.closer = () => Promise.resolve(void saver.db.close());
        return saver;
      }, options);
      return checkpointer;
    }
    const uri = settings.mongodbUri ?? "";
    const dbName = settings.dbName ?? "";
    const checkpointer: PlatformCheckpointer = new PlatformCheckpointer(async () => {
      const { MongoClient } = await import("mongodb");
      const { MongoDBSaver } = await import("@langchain/langgraph-checkpoint-mongodb");
      const client = new MongoClient(uri, { appName: "agent-engine-aer-ts" });
      checkpointer.closer = () => client.close();
      return new MongoDBSaver({ client, dbName });
    }, options);
    return checkpointer;
  }

  // the refusals ---------------------------------------------------------------------------------------

  private admitRead(): void {
    if (this.refusal !== undefined) throw new CheckpointScopeError(this.refusal);
  }

  private admitSave(what: string): void {
    this.admitRead();
    const refused = this.saveGuard?.(what);
    if (refused !== undefined) throw refused;
  }

  private backend(): Promise<BaseCheckpointSaver> {
    if (this.opened === undefined) {
      this.opened = this.opener().catch((error: unknown) => {
        this.opened = undefined; // the next read or save tries again (the store may come back)
        throw error;
      });
    }
    return this.opened;
  }

  /** Close what the checkpointer opened (the SQLite file, the MongoDB client). */
  async close(): Promise<void> {
    const closer = this.closer;
    this.closer = undefined;
    this.opened = undefined;
    if (closer !== undefined) await closer();
  }

  // the saver API --------------------------------------------------------------------------------------

  private async migrated(backend: BaseCheckpointSaver, tuple: CheckpointTuple): Promise<CheckpointTuple> {
    if (tuple.checkpoint.v >= 4 || tuple.parentConfig === undefined) return tuple;
    const parent = await backend.getTuple(tuple.parentConfig);
    return withPendingSends(tuple, parent?.pendingWrites ?? []);
  }

  override async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    this.admitRead();
    const backend = await this.backend();
    const found = await backend.getTuple(config);
    return found === undefined ? undefined : this.migrated(backend, found);
  }

  override async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    this.admitRead();
    const backend = await this.backend();
    for await (const found of backend.list(config, options)) yield await this.migrated(backend, found);
  }

  override async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    this.admitSave("save");
    const stamped = { ...metadata, ...(this.stamp?.() ?? {}) } as CheckpointMetadata;
    return (await this.backend()).put(config, checkpoint, stamped, newVersions);
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    this.admitSave("pending writes");
    const backend = await this.backend();
    return taskPath === undefined ? backend.putWrites(config, writes, taskId) : backend.putWrites(config, writes, taskId, taskPath);
  }

  override async deleteThread(threadId: string): Promise<void> {
    this.admitRead();
    return (await this.backend()).deleteThread(threadId);
  }
}
