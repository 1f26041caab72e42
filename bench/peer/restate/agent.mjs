// The second peer of TAH's bench (docs/benchmarks.md, row 8): the same agent
// as row 2's, a turn of STEPS tool steps with a model that answers at once
// (a tool call each time, then a final answer) and a tool that returns "ok",
// as a Restate Virtual Object keyed by session id, with a ctx.run for every
// model call and every tool call (each acknowledged by restate-server only
// once it is in its log). This script starts the SDK's endpoint in its own
// process, restate-server (the binary of @restatedev/restate-server) as a
// child, registers the endpoint and drives the sessions through the
// server's HTTP ingress. It prints one JSON object:
//
//   - per_step_ms: one session, TURNS turns one after the other after a
//     warm-up turn of its own, the median of a turn's time over its steps;
//   - concurrent: SESSIONS sessions each running CTURNS turns back to back
//     (after a warm-up turn each), all at once: steps/s over the whole
//     window, the median time per step of a turn, and the CPU (this process
//     and restate-server's) per step.
//
// FSYNC "on" is Restate's default (the log server fsyncs every write batch);
// "off" sets log-server.rocksdb-disable-wal-fsync.
//
//   node agent.mjs STEPS TURNS SESSIONS CTURNS FSYNC DIR
//
// restate-server checks for a new release when it starts and has no setting
// to stop it: run this only in a network namespace with loopback alone
// (bench/peer.go runs it under `unshare --net`); it refuses to run where
// another interface is up.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
import { createRequire } from "node:module";
import { networkInterfaces } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";

// The SDK logs every invocation at INFO on the console, and reads its level
// once, when it is loaded.
process.env.RESTATE_LOGGING ??= "ERROR";
const restate = await import("@restatedev/restate-sdk");

const [steps, turns, sessions, cturns] = process.argv.slice(2, 6).map(Number);
const fsync = process.argv[6];
const dir = process.argv[7];
if (!(steps > 0 && turns > 0 && sessions > 0 && cturns > 0) || !["on", "off"].includes(fsync) || !dir) {
  console.error("usage: node agent.mjs STEPS TURNS SESSIONS CTURNS on|off DIR");
  process.exit(2);
}
const others = Object.keys(networkInterfaces()).filter((n) => n !== "lo");
if (others.length > 0) {
  console.error(`refusing to start restate-server with network interfaces other than loopback (${others.join(", ")}): run it under unshare --net`);
  process.exit(3);
}

const ingress = "http://127.0.0.1:8080";
const admin = "http://127.0.0.1:9070";
const endpointPort = 9080;

// model is the fake model: a tool call until the turn has made steps of
// them, then a final answer, at once, as row 2's mock does.
function model(messages, from) {
  const calls = messages.slice(from).filter((m) => m.role === "tool").length;
  if (calls < steps) {
    return { role: "assistant", content: "", tool_calls: [{ id: `call_${calls}`, name: "noop", args: {} }] };
  }
  return { role: "assistant", content: "done" };
}

// Session is the agent: its history in the object's state, a turn appends
// the user's message, then a model call and a tool call per step, each
// through ctx.run so that its result is in Restate's journal before the
// turn goes on.
const session = restate.object({
  name: "Session",
  handlers: {
    turn: async (ctx, text) => {
      const messages = (await ctx.get("messages")) ?? [];
      const from = messages.length;
      messages.push({ role: "user", content: text });
      for (;;) {
        const reply = await ctx.run("model", () => model(messages, from));
        messages.push(reply);
        if (!reply.tool_calls?.length) break;
        for (const call of reply.tool_calls) {
          const out = await ctx.run(`tool ${call.name}`, () => "ok");
          messages.push({ role: "tool", tool_call_id: call.id, content: out });
        }
      }
      ctx.set("messages", messages);
      return messages.at(-1).content;
    },
  },
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

// cpuOf is a process's user+system CPU in ms, from /proc (clock ticks of 10 ms).
function cpuOf(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}
const ownCPU = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

async function until(what, fn, deadline = 120_000) {
  const end = Date.now() + deadline;
  let last;
  while (Date.now() < end) {
    try {
      if (await fn()) return;
    } catch (err) {
      last = err;
    }
    await sleep(100);
  }
  throw new Error(`${what}: not within ${deadline} ms${last ? `: ${last.message}` : ""}`);
}

async function turn(key, text) {
  const res = await fetch(`${ingress}/Session/${encodeURIComponent(key)}/turn`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(text),
  });
  const body = await res.text();
  if (!res.ok) throw new Error(`turn of ${key}: ${res.status} ${body}`);
  if (JSON.parse(body) !== "done") throw new Error(`turn of ${key} did not finish: ${body}`);
}

const endpoint = http2.createServer(restate.endpoint().bind(session).http2Handler());
await new Promise((ok, fail) => endpoint.once("error", fail).listen(endpointPort, "127.0.0.1", ok));

const config = join(dir, "restate.toml");
writeFileSync(
  config,
  [
    `base-dir = ${JSON.stringify(join(dir, "restate-data"))}`,
    `node-name = "bench"`,
    "disable-telemetry = true",
    `log-filter = "warn"`,
    "",
    "[log-server]",
    `rocksdb-disable-wal-fsync = ${fsync === "off"}`,
    "",
  ].join("\n"),
);
const bin = createRequire(import.meta.url).resolve("@restatedev/restate-server-linux-x64/bin/restate-server");
let serverErr = "";
const server = spawn(bin, ["--config-file", config, "--no-logo"], { stdio: ["ignore", "ignore", "pipe"] });
server.stderr.on("data", (d) => {
  serverErr = (serverErr + d).slice(-4000);
});
const exited = new Promise((r) => server.once("exit", r));
let stopping = false;
exited.then((code) => {
  if (!stopping) {
    console.error(`restate-server exited (${code}): ${serverErr}`);
    process.exit(1);
  }
});

try {
  await until("restate-server's admin API", async () => (await fetch(`${admin}/health`)).ok);
  await until("the endpoint's registration", async () => {
    const res = await fetch(`${admin}/deployments`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ uri: `http://127.0.0.1:${endpointPort}`, force: true }),
    });
    if (!res.ok) throw new Error(`${res.status} ${await res.text()}`);
    return true;
  });
  // One session, a warm-up turn (the first turn of a partition waits for
  // its processor to be up), then turns one after the other.
  await until("the ingress", async () => {
    await turn("seq", "warm up");
    return true;
  });
  const perStep = [];
  for (let t = 0; t < turns; t++) {
    const begin = performance.now();
    await turn("seq", `turn ${t}`);
    perStep.push((performance.now() - begin) / steps);
  }

  // sessions at once, each a warm-up turn and then cturns back to back.
  const keys = Array.from({ length: sessions }, (_, i) => `c${i}`);
  await Promise.all(keys.map((k) => turn(k, "warm up")));
  const turnSteps = [];
  const cpu0 = ownCPU() + cpuOf(server.pid);
  const begin = performance.now();
  await Promise.all(
    keys.map(async (k) => {
      for (let t = 0; t < cturns; t++) {
        const b = performance.now();
        await turn(k, `turn ${t}`);
        turnSteps.push((performance.now() - b) / steps);
      }
    }),
  );
  const seconds = (performance.now() - begin) / 1000;
  const cpu = ownCPU() + cpuOf(server.pid) - cpu0;
  const total = sessions * cturns * steps;
  console.log(
    JSON.stringify({
      peer: "restate",
      fsync,
      steps,
      turns,
      per_step_ms: median(perStep),
      per_step_all_ms: perStep,
      concurrent: {
        sessions,
        turns: cturns,
        steps: total,
        seconds,
        steps_per_s: total / seconds,
        per_step_ms: median(turnSteps),
        cpu_per_step_ms: cpu / total,
      },
    }),
  );
} finally {
  stopping = true;
  server.kill("SIGTERM");
  const t = setTimeout(() => server.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(t);
  endpoint.close();
}
process.exit(0);
