// An example TAH client in JavaScript, with the official `nats` client, written
// from docs/protocol.md alone.
//
// It creates a session (the API's tah.api.create), watches the session's events
// (an ordered JetStream consumer of its shard of the log, TAH_EVT_<k>, on
// tah.evt.<k>.<sid>, each message a record of events) and token deltas (core
// NATS tah.sess.<sid>.delta), sends one input (a JetStream publish to
// tah.sess.<sid>.in with the Tah-Command header), prints the answer as it is
// written (stdout) and each step as it is logged (stderr), and exits when the
// turn ends: 0 when it completed, 1 when it failed, 5 when it was cancelled.
//
// Run, in the directory where tah-node runs (its data directory is .tah):
//   tahctl creds add --role client jsclient   # writes .tah/creds/jsclient.creds
//   NATS_URL=nats://127.0.0.1:4222 NATS_CREDS=.tah/creds/jsclient.creds node examples/client-js/index.js "your question"
// (NATS_CREDS is a .creds file: the one `tahctl creds add --role client NAME`
// wrote, wherever it printed, or the node's .tah/admin.creds.)

"use strict";

const fs = require("fs");
const crypto = require("crypto");
const { connect, credsAuthenticator, headers, StringCodec } = require("nats");

const sc = StringCodec();

// credentials reads the .creds file NATS_CREDS names (a user JWT and its
// nkey seed), as nats.js takes it, its name (which its inputs name as
// their sender) and the inbox prefix its name gives: a
// credential may receive replies under _INBOX_<its name>. only
// (docs/security.md).
function credentials() {
  const file = process.env.NATS_CREDS;
  if (!file) return {};
  const creds = fs.readFileSync(file);
  const jwt = /-----BEGIN NATS USER JWT-----\s*(\S+)\s*------END/.exec(creds.toString("utf8"))[1];
  const name = JSON.parse(Buffer.from(jwt.split(".")[1], "base64url").toString("utf8")).name;
  return { authenticator: credsAuthenticator(creds), inboxPrefix: "_INBOX_" + name, sender: name };
}

// api calls tah.api.<name> and returns the JSON reply, or throws the service error.
async function api(nc, name, body) {
  const m = await nc.request("tah.api." + name, sc.encode(JSON.stringify(body || {})), { timeout: 10000 });
  const code = m.headers && m.headers.get("Nats-Service-Error-Code");
  if (code) throw new Error(`tah.api.${name}: ${code} ${m.headers.get("Nats-Service-Error")}`);
  return JSON.parse(sc.decode(m.data));
}

// shard is the shard of the log that holds a session's records: FNV-1a 32 of
// the session id, modulo the log's shard count (tah.api.status's log_shards).
function shard(sid, n) {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(sid, "utf8")) {
    h = Math.imul(h ^ b, 0x01000193) >>> 0;
  }
  return h % n;
}

// eventsOf returns the events of a message of the log: a record (version 2)
// holds several, a message of a version-1 log is one.
function eventsOf(body) {
  return body.v === 2 ? body.events : [body];
}

function oneLine(s, n) {
  s = String(s || "").split(/\s+/).filter(Boolean).join(" ");
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

// describe says, on one line, what a step's event is about.
function describe(ev) {
  const d = ev.data || {};
  switch (ev.type) {
    case "turn.started": return `turn ${d.turn}: ${JSON.stringify(oneLine(d.message && d.message.content, 60))}`;
    // The request is recorded by reference (docs/protocol.md, "The request of an
    // LLM step"): history is how many messages of the history it was made from.
    case "llm.started": return `${d.step_id}: the model is asked (history: ${d.history} message${d.history === 1 ? "" : "s"})`;
    case "llm.completed": {
      const r = d.response || {};
      const calls = (r.tool_calls || []).map((c) => c.name);
      const what = calls.length ? "calls " + calls.join(", ") : JSON.stringify(oneLine(r.content, 50));
      const u = r.usage || {};
      return `${d.step_id}: ${what} (${u.input_tokens} → ${u.output_tokens} tokens)`;
    }
    case "llm.failed": return `${d.step_id}: ${d.error} [${d.code}]`;
    case "tool.started": return `${d.call.name} ${JSON.stringify(d.call.arguments || {})}`;
    case "tool.finished": {
      const first = String(d.output || "").split("\n")[0];
      return `${d.name} → ${oneLine(first, 50)}${d.is_error ? " [" + d.code + "]" : ""}`;
    }
    case "agent.finished": return `turn ${d.turn} done: ${d.steps} model calls`;
    case "agent.failed": return `turn ${d.turn} failed: ${d.error} [${d.code}]`;
    case "agent.cancelled": return `turn ${d.turn} cancelled: ${d.reason || ""}`;
    default: return "";
  }
}

async function main() {
  const text = process.argv.slice(2).join(" ") || "Analyse this project's directory structure";
  const { sender, ...auth } = credentials();
  const nc = await connect({
    servers: process.env.NATS_URL || "nats://127.0.0.1:4222",
    ...auth,
    name: "tah-client-js",
  });
  const js = nc.jetstream();

  // 1. A new session, and its shard of the log.
  const { session: sid } = await api(nc, "create", {});
  const { log_shards: shards } = await api(nc, "status", {});
  const k = shard(sid, shards);
  process.stderr.write(`session ${sid}\n`);

  // 2. Watch before sending, so that nothing is missed: the token deltas...
  let highEpoch = 0;
  let lineOpen = false;
  const deltas = nc.subscribe(`tah.sess.${sid}.delta`, {
    callback: (err, m) => {
      if (err) return;
      const epoch = Number((m.headers && m.headers.get("Tah-Epoch")) || 0);
      if (epoch < highEpoch) return; // from an owner that lost the session
      highEpoch = epoch;
      const d = JSON.parse(sc.decode(m.data));
      if (d.text) {
        process.stdout.write(d.text);
        lineOpen = !d.text.endsWith("\n");
      }
    },
  });
  // ...and the steps: an ordered consumer of the session's shard filtered on
  // its subject, by start sequence (the client's default: 1, so from the
  // session's first record on; it is new).
  const consumer = await js.consumers.get(`TAH_EVT_${k}`, { filterSubjects: `tah.evt.${k}.${sid}` });
  const events = await consumer.consume();
  await nc.flush();

  // 3. The input. Its Nats-Msg-Id is "<sid>:<id>": TAH_IN de-duplicates
  // message ids across every session, and the session keeps apart two
  // sessions' inputs of one id.
  const id = "in_" + crypto.randomBytes(8).toString("hex");
  const h = headers();
  h.set("Tah-Command", "run");
  // A credential's inputs name it (NATS allows no other name, nor none);
  // without a credential (a node with no authentication) they name none.
  const subject = sender ? `tah.sess.${sid}.in.by.${sender}` : `tah.sess.${sid}.in`;
  await js.publish(subject, sc.encode(JSON.stringify({ id, input: text })), { headers: h, msgID: `${sid}:${id}` });

  // 4. Until the turn ends.
  let exitCode = 1;
  let lastId = ""; // the Nats-Msg-Id of the record before
  records: for await (const m of events) {
    // A record the stream stored twice (a retried append around a leader
    // change) has the id of the record before it: skip the copy.
    const msgId = m.headers ? m.headers.get("Nats-Msg-Id") : "";
    if (msgId && msgId === lastId) {
      continue;
    }
    lastId = msgId;
    for (const ev of eventsOf(JSON.parse(sc.decode(m.data)))) {
      if (lineOpen && ev.type !== "llm.streaming") {
        process.stdout.write("\n");
        lineOpen = false;
      }
      const what = describe(ev);
      process.stderr.write(`  #${m.seq} ${ev.type}${what ? "  " + what : ""}\n`);
      if (ev.type === "agent.finished" || ev.type === "agent.failed" || ev.type === "agent.cancelled") {
        if (ev.type === "agent.finished") {
          exitCode = 0;
        } else if (ev.type === "agent.cancelled") {
          exitCode = 5;
        }
        break records;
      }
    }
  }
  await events.close();
  deltas.unsubscribe();
  await nc.drain();
  process.exit(exitCode);
}

main().catch((err) => {
  process.stderr.write(`Error: ${err.message}\n`);
  process.exit(4);
});
