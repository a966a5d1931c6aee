// The registry's decisions with TypeScript's limits: an abortable call is aborted, a plain function is
// tracked and reported honestly (not_cancellable, timed_out), never abandoned.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CallInterrupted, ExecutionDraining } from "../src/call_errors.js";
import { DeadlineTooFar, RequestIdConflict, WorkRegistry } from "../src/work_registry.js";

function held(): { promise: Promise<string>; release: () => void } {
  let release = (): void => undefined;
  const promise = new Promise<string>((resolve) => {
    release = () => resolve("done");
  });
  return { promise, release };
}

test("an abortable call is aborted by an interrupt; its caller gets CallInterrupted at once", async () => {
  const registry = new WorkRegistry();
  const ticket = registry.admit("e1", 1, { cancellable: true });
  let seen: AbortSignal | null = null;
  const call = registry.run(ticket, (signal) => {
    seen = signal;
    return new Promise((_, reject) => signal?.addEventListener("abort", () => reject(new Error("aborted"))));
  });
  assert.equal(registry.interrupt("e1", 1), "interrupted");
  await assert.rejects(call, (error: unknown) => error instanceof CallInterrupted && error.category === "interrupted");
  assert.ok(seen !== null && (seen as AbortSignal).aborted);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(registry.interrupt("e1", 1), "already_settled");
});

test("a plain function gets no signal: not_cancellable, and it runs to its end", async () => {
  const registry = new WorkRegistry();
  const ticket = registry.admit("e1", 1, { cancellable: false });
  const body = held();
  let given: AbortSignal | null | undefined;
  const call = registry.run(ticket, (signal) => {
    given = signal;
    return body.promise;
  });
  assert.equal(given, null);
  assert.equal(registry.interrupt("e1", 1), "not_cancellable");
  body.release();
  assert.equal(await call, "done");
});

test("a drain waits for a plain function, and is completed when it ends before the deadline", async () => {
  const registry = new WorkRegistry();
  const body = held();
  const call = registry.run(registry.admit("e1", 1, { cancellable: false }), () => body.promise);
  const request = { requestId: "d1", executionId: "e1", reason: "cancelled", deadlineAtMs: Date.now() + 5000 };
  assert.deepEqual(registry.drain(request), ["accepted", null]);
  assert.throws(() => registry.admit("e1", 2, { cancellable: true }), ExecutionDraining);
  body.release();
  await call;
  assert.deepEqual(registry.drain(request), ["completed", null]);
});

test("a drain a plain function outlives is timed_out, and a retry never extends the deadline", async () => {
  const registry = new WorkRegistry();
  const body = held();
  void registry.run(registry.admit("e1", 1, { cancellable: false }), () => body.promise);
  assert.deepEqual(registry.drain({ requestId: "d1", executionId: "e1", reason: "", deadlineAtMs: Date.now() + 50 }), ["accepted", null]);
  await new Promise((resolve) => setTimeout(resolve, 120));
  assert.deepEqual(registry.drain({ requestId: "d2", executionId: "e1", reason: "", deadlineAtMs: Date.now() + 30_000 }), ["timed_out", null]);
  body.release();
});

test("an interrupt before the call attaches fires on attach: nothing runs", async () => {
  const registry = new WorkRegistry();
  const first = held();
  void registry.run(registry.admit("e1", 1, { cancellable: true }), () => first.promise);
  assert.equal(registry.interrupt("e1", 2), "interrupted");
  let ran = false;
  await assert.rejects(
    registry.run(registry.admit("e1", 2, { cancellable: true }), async () => {
      ran = true;
    }),
    CallInterrupted,
  );
  assert.equal(ran, false);
  first.release();
});

test("unknown executions, far deadlines and reused request ids", () => {
  const registry = new WorkRegistry({ settings: { maxDeadlineMs: 1000, recordTtlS: 900 } });
  assert.deepEqual(registry.drain({ requestId: "n1", executionId: "never", reason: "", deadlineAtMs: Date.now() }), [
    "delivery_failed",
    "execution_not_found",
  ]);
  assert.equal(registry.interrupt("nobody", 1), "not_found");
  registry.admit("e1", 1, { cancellable: true });
  assert.throws(() => registry.drain({ requestId: "f1", executionId: "e1", reason: "", deadlineAtMs: Date.now() + 5000 }), DeadlineTooFar);
  assert.throws(() => registry.drain({ requestId: "n1", executionId: "e1", reason: "", deadlineAtMs: Date.now() }), RequestIdConflict);
});
