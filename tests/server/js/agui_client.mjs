// The real AG-UI client (@ag-ui/client HttpAgent) against agentledger's server.
// Usage: node agui_client.mjs <scenario> <server url> <thread id>
// Every event is validated with @ag-ui/core's schemas (the client itself also verifies the
// event order). Prints one JSON line: what the Python test asserts on (messages, outcomes).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";

const [scenario, url, threadId] = process.argv.slice(2);
const PICK = {
  name: "pick_color",
  description: "Let the user pick a color.",
  parameters: { type: "object", properties: { value: { type: "string" } } },
};

function agent(extra = {}) {
  return new HttpAgent({ url, threadId, ...extra });
}

function user(text) {
  return { id: randomUUID(), role: "user", content: text };
}

// Runs one turn, validating every event; returns the events and the run's outcome.
async function turn(a, params = {}, onEvent = () => {}) {
  const events = [];
  let finished;
  const subscriber = {
    onEvent({ event }) {
      EventSchemas.parse(event); // throws on anything the protocol's schemas reject
      events.push(event);
      onEvent(event);
    },
    onRunFinishedEvent(params) {
      finished = { outcome: params.outcome, pendingToolCallIds: params.pendingToolCallIds };
    },
  };
  await a.runAgent(params, subscriber);
  return { events, finished };
}

function ids(messages) {
  return messages.map((m) => m.id);
}

const scenarios = {
  // Three turns; HttpAgent resends the whole thread every time.
  async three_turns() {
    const a = agent();
    const types = [];
    for (let n = 0; n < 3; n++) {
      a.addMessage(user(`turn ${n}`));
      const { events, finished } = await turn(a);
      assert.equal(finished.outcome, "success");
      types.push(events.map((e) => e.type));
    }
    assert.equal(new Set(ids(a.messages)).size, a.messages.length);
    return { messages: a.messages, types };
  },

  // A frontend tool: the run ends with the call pending; the next run carries the result.
  async frontend_tool() {
    const a = agent();
    a.addMessage(user("call pick_color red"));
    const first = await turn(a, { tools: [PICK] });
    assert.equal(first.finished.outcome, "success");
    assert.equal(first.finished.pendingToolCallIds.length, 1);
    const [callId] = first.finished.pendingToolCallIds;
    a.addMessage({ id: randomUUID(), role: "tool", toolCallId: callId, content: "red" });
    const second = await turn(a, { tools: [PICK] });
    assert.deepEqual(second.finished.pendingToolCallIds, []);
    assert.equal(a.messages.at(-1).content, "done: red");
    return { messages: a.messages, pending: first.finished.pendingToolCallIds };
  },

  // A fresh client with no history hydrates an existing thread.
  async hydrate() {
    const a = agent();
    const { events } = await turn(a);
    assert.ok(!events.some((e) => e.type === "TEXT_MESSAGE_START"));
    return { messages: a.messages, state: a.state };
  },

  // A client that holds nothing of the thread sends only its new message; the snapshot then
  // gives it the thread (in @ag-ui/client's order: its own messages first), and its next run
  // resends everything in that order.
  async only_new() {
    const a = agent();
    a.addMessage(user("only the new one"));
    await turn(a);
    const order = ids(a.messages);
    a.addMessage(user("and one more"));
    await turn(a);
    return { messages: a.messages, order };
  },

  // abortRun() mid-stream, then a new run on the same thread.
  async abort() {
    const a = agent();
    a.addMessage(user("slow 60"));
    let deltas = 0;
    const aborted = turn(a, {}, (event) => {
      if (event.type === "TEXT_MESSAGE_CONTENT" && ++deltas === 3) a.abortRun();
    }).catch((error) => ({ error: String(error) }));
    await aborted;
    assert.ok(deltas >= 3);
    const b = agent({ initialMessages: a.messages });
    b.addMessage(user("after the abort"));
    const { finished } = await turn(b);
    assert.equal(finished.outcome, "success");
    return { messages: b.messages, deltas };
  },

  // Two clients run on one thread at once: one runs, the other is refused.
  async concurrent() {
    const a = agent();
    const b = agent();
    a.addMessage(user("slow 80"));
    b.addMessage(user("at the same time"));
    let started;
    const running = new Promise((resolve) => (started = resolve));
    const first = turn(a, {}, (event) => event.type === "RUN_STARTED" && started());
    await running;
    const second = await turn(b).then(
      () => "ran",
      (error) => String(error),
    );
    await first;
    return { messages: a.messages, second };
  },
};

const result = await scenarios[scenario]();
console.log(JSON.stringify(result));
