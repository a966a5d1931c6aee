// @langchain/langgraph-checkpoint-validation is a vitest suite: run it against app.checkpointer() on each
// backend (memory, a real SQLite file, MongoDB through a real FerretDB this setup starts on loopback).
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["validation/**/*.test.ts"],
    // The suite calls describe/beforeAll as globals.
    globals: true,
    globalSetup: ["validation/ferretdb_setup.ts"],
    // One backend at a time: the machine is small and FerretDB serializes on its SQLite files anyway.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
