// app.checkpointer() over MongoDB (MONGODB_URI, the official driver) on a real FerretDB against the
// LangGraph.js conformance suite; each run its own database, dropped after.
import { randomUUID } from "node:crypto";
import { MongoClient } from "mongodb";
import { inject } from "vitest";
import { validate } from "@langchain/langgraph-checkpoint-validation";
import { App, type PlatformCheckpointer } from "../src/index.js";

const uri = inject("mongodbUri");
const names = new Map<PlatformCheckpointer, string>();

validate({
  checkpointerName: "app.checkpointer() (MongoDB on FerretDB)",
  createCheckpointer: () => {
    const dbName = `validation_${randomUUID().slice(0, 8)}`;
    const env = { MONGODB_URI: uri, CHECKPOINT_DB_NAME: dbName };
    const checkpointer = new App({ appName: "validation", env }).checkpointer();
    names.set(checkpointer, dbName);
    return checkpointer;
  },
  destroyCheckpointer: async (checkpointer) => {
    await checkpointer.close();
    const client = new MongoClient(uri);
    try {
      await client.db(names.get(checkpointer)).dropDatabase();
    } finally {
      await client.close();
    }
  },
});
