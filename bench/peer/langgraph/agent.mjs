// The peer of TAH's bench (docs/benchmarks.md, the peer row): the same agent as
// row 2's, a turn of STEPS tool steps with a model that answers at once (a
// tool call each time, then a final answer) and a tool that returns "ok", in
// LangGraph.js with its SQLite checkpointer, which writes a checkpoint after
// every node. It prints one JSON object: the median time per step over TURNS
// turns, for each SQLite synchronous setting asked for.
//
//   node agent.mjs [STEPS=20] [TURNS=5] [SYNC=NORMAL,FULL] [DIR=tmpdir]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";

const steps = Number(process.argv[2] ?? 20);
const turns = Number(process.argv[3] ?? 5);
const syncs = (process.argv[4] ?? "NORMAL,FULL").split(",");
const dir = process.argv[5] ?? mkdtempSync(join(tmpdir(), "tah-peer-"));

const noop = tool(async () => "ok", {
  name: "noop",
  description: "Does nothing and says ok.",
  schema: { type: "object", properties: {} },
});

// model is the fake model: a tool call until the turn has made steps of
// them, then a final answer; it answers at once, as row 2's mock does.
function model(state) {
  const calls = state.messages.filter((m) => m.getType() === "tool").length;
  if (calls < steps) {
    return { messages: [new AIMessage({ content: "", tool_calls: [{ id: `call_${calls}`, name: "noop", args: {} }] })] };
  }
  return { messages: [new AIMessage("done")] };
}

function graph(checkpointer) {
  return new StateGraph(MessagesAnnotation)
    .addNode("agent", model)
    .addNode("tools", new ToolNode([noop]))
    .addEdge(START, "agent")
    .addConditionalEdges("agent", (s) => (s.messages.at(-1).tool_calls?.length ? "tools" : END))
    .addEdge("tools", "agent")
    .compile({ checkpointer });
}

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

const out = { peer: "langgraph.js", steps, turns, results: [] };
for (const sync of syncs) {
  const path = join(dir, `checkpoints-${sync}.db`);
  const saver = SqliteSaver.fromConnString(path);
  saver.db.pragma("journal_mode = WAL");
  saver.db.pragma(`synchronous = ${sync}`);
  const app = graph(saver);
  // One warm-up turn, then the measured ones, each on a thread of its own.
  await app.invoke({ messages: [new HumanMessage("warm up")] }, { configurable: { thread_id: `warm-${sync}` }, recursionLimit: 4 * steps + 10 });
  const perStep = [];
  for (let t = 0; t < turns; t++) {
    const begin = performance.now();
    const res = await app.invoke({ messages: [new HumanMessage(`turn ${t}`)] }, { configurable: { thread_id: `t${t}-${sync}` }, recursionLimit: 4 * steps + 10 });
    const took = performance.now() - begin;
    if (res.messages.at(-1).content !== "done") throw new Error(`turn ${t} did not finish`);
    perStep.push(took / steps);
  }
  saver.db.close();
  out.results.push({ synchronous: sync, per_step_ms: median(perStep), per_step_all_ms: perStep });
}
if (!process.argv[5]) rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify(out));
