// Reads the JSON report of the validation run (vitest) and decides: every test must pass on every
// backend, except the ones @langchain/langgraph-checkpoint-validation itself marks as a TODO of that
// backend's saver (its skip list names the stock savers; our checkpointer has its own name, so the suite
// runs them and they fail for the saver's reason, not ours). Prints one line per backend.
import { readFileSync } from "node:fs";

const report = process.argv[2];
// The suite's own skip list (dist/spec/put.js, it_skipForSomeModules): "TODO: <saver> doesn't store
// channel deltas", for MemorySaver, MongoDBSaver and SqliteSaver alike.
const BACKEND_TODO = new Set(["should only store channel_values that have changed (based on newVersions)"]);

let results;
try {
  results = JSON.parse(readFileSync(report, "utf8"));
} catch (error) {
  console.error(`checkpoint validation: no report at ${report} (${error}); the vitest run did not finish`);
  process.exit(1);
}

const backends = new Map();
let unexpected = 0;
for (const file of results.testResults ?? []) {
  const backend = file.name.split("/").at(-1).replace(".test.ts", "");
  const tally = backends.get(backend) ?? { passed: 0, failed: 0, todo: 0, total: 0 };
  if ((file.assertionResults ?? []).length === 0 && file.status === "failed") {
    console.error(`checkpoint validation: ${backend}: the file failed before any test ran: ${file.message ?? ""}`);
    unexpected += 1;
  }
  for (const test of file.assertionResults ?? []) {
    tally.total += 1;
    if (test.status === "passed") tally.passed += 1;
    else if (test.status === "failed" && BACKEND_TODO.has(test.title)) tally.todo += 1;
    else if (test.status === "failed") {
      tally.failed += 1;
      unexpected += 1;
      console.error(`checkpoint validation: ${backend}: FAILED ${test.fullName}`);
    }
  }
  backends.set(backend, tally);
}
for (const name of ["memory", "sqlite", "mongodb"]) {
  if (!backends.has(name)) {
    console.error(`checkpoint validation: no results for the ${name} backend`);
    unexpected += 1;
  }
}
for (const [name, t] of backends) {
  console.log(
    `checkpoint validation (${name}): ${t.passed} of ${t.total} pass, ${t.failed} unexpected failures, ` +
      `${t.todo} the suite marks as its backend saver's TODO ("doesn't store channel deltas")`,
  );
}
process.exit(unexpected === 0 ? 0 : 1);
