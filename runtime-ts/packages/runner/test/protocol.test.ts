// Received bodies are checked against the same JSON Schema pydantic checks, with each bad field named.
import { test } from "node:test";
import assert from "node:assert/strict";
import { BodyInvalid, parseBody } from "../src/protocol.js";

function problems(model: "DrainRequest" | "InterruptCallRequest" | "AERExecuteRequest", body: string): string[] {
  try {
    parseBody(model, body);
  } catch (error) {
    assert.ok(error instanceof BodyInvalid);
    return error.problems.map((p) => p.field);
  }
  return [];
}

test("a drain body missing its fields names each of them", () => {
  assert.deepEqual(problems("DrainRequest", "{}").sort(), ["deadline_at_ms", "execution_id", "request_id"]);
});

test("wrong types and ranges are named, and the offending value is never quoted", () => {
  const secret = "sk-do-not-echo-1234567890";
  const body = JSON.stringify({ request_id: "r", execution_id: secret.repeat(20), deadline_at_ms: -1 });
  try {
    parseBody("DrainRequest", body);
    assert.fail("expected BodyInvalid");
  } catch (error) {
    assert.ok(error instanceof BodyInvalid);
    assert.deepEqual(error.problems.map((p) => p.field).sort(), ["deadline_at_ms", "execution_id"]);
    assert.ok(!error.message.includes(secret));
  }
});

test("the interrupt key is step_number, not step; unknown fields are ignored", () => {
  assert.deepEqual(problems("InterruptCallRequest", JSON.stringify({ execution_id: "e", step: 1 })), ["step_number"]);
  assert.deepEqual(problems("InterruptCallRequest", JSON.stringify({ execution_id: "e", step_number: 1, newer: true })), []);
});

test("malformed JSON is a (body) problem", () => {
  assert.deepEqual(problems("AERExecuteRequest", "{"), ["(body)"]);
});
