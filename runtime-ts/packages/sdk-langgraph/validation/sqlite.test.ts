// app.checkpointer() over a real SQLite file (better-sqlite3) against the LangGraph.js conformance suite.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { validate } from "@langchain/langgraph-checkpoint-validation";
import { App, type PlatformCheckpointer } from "../src/index.js";

const dirs = new Map<PlatformCheckpointer, string>();

validate({
  checkpointerName: "app.checkpointer() (SQLite file)",
  createCheckpointer: () => {
    const dir = mkdtempSync(join(tmpdir(), "sdk-langgraph-sqlite-"));
    const env = { CHECKPOINT_STORE: "sqlite", CHECKPOINT_SQLITE_PATH: join(dir, "nested", "checkpoints.sqlite3") };
    const checkpointer = new App({ appName: "validation", env }).checkpointer();
    dirs.set(checkpointer, dir);
    return checkpointer;
  },
  destroyCheckpointer: async (checkpointer) => {
    await checkpointer.close();
    rmSync(dirs.get(checkpointer) ?? "", { recursive: true, force: true });
  },
});
