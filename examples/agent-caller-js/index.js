// A caller of the Synadia Agent Protocol for NATS v0.3, in JavaScript with the
// official `nats` client, written from the protocol's specification
// (core-protocol.md of synadia-ai/synadia-agent-sdk-docs: §4 discovery, §5
// request, §6 response streaming, §7 queries, §8 heartbeat and status, §9
// errors, §12 the caller checklist), not from TAH's code: it is the
// independent party of TAH's interop test (cmd/tahctl/testdata/script/
// agents_js.txtar).
//
// What it does, in the order of the caller checklist:
//   1. subscribes to every heartbeat (agents.hb.*.*.*) before discovery (§8.5);
//   2. discovers with $SRV.PING.agents and $SRV.INFO.agents, collecting
//      replies until a short quiet time (several instances answer) (§4.1);
//   3. keeps the instances whose protocol_version is 0.3 (§11.2) and picks
//      the controller of the agent (--agent, default tah): metadata.session
//      "new", TAH's instance that starts sessions;
//   4. locates its endpoint named "prompt", reads max_payload and
//      attachments_ok and enforces them before publishing (§5.4);
//   5. publishes to the endpoint's subject verbatim (§4.3) and reads the
//      stream: headers first on every message (§9), an empty header-less
//      message ends it (§6.5), unknown chunk types are skipped (§6.6), the
//      response text is concatenated and starts again on status
//      "restarted", 60 s without a message is a transport error (§6.6);
//   6. the stream's status "session:<sid>" names the session started; the
//      session's own instance (metadata.session == sid) is found by
//      discovery again (it registers after the session starts, so it is
//      retried, woken early by the instance's first heartbeat), and each
//      further prompt goes there;
//   7. asks the instance's status endpoint (§8.7) and reports the liveness
//      of the instances it heard from, per instance_id (§8.2);
//   8. with a .creds file it has an identity (§13.4: the user JWT's sub and
//      issuer account) and signs every prompt, status request and answer to a
//      query with an Agent-Sender header (§13.5, §13.6); without one it sends
//      none, and refuses locally to prompt an endpoint whose
//      min_sender_trust is not "any" (§13.9).
//
// Run, in the directory where tah-node runs (its data directory is .tah):
//   tahctl creds add --role client alice    # writes .tah/creds/alice.creds
//   NATS_URL=nats://127.0.0.1:4222 NATS_CREDS=.tah/creds/alice.creds \
//     node examples/agent-caller-js/index.js [flags] PROMPT [FOLLOW-UP ...]
// Flags (each also from the environment):
//   --server URL          NATS_URL (default nats://127.0.0.1:4222)
//   --creds FILE          NATS_CREDS: a .creds file (a user JWT and its seed)
//   --inbox-prefix P      NATS_INBOX_PREFIX (default _INBOX_<the credential's
//                         name>: TAH's credentials receive replies only there)
//   --agent NAME          AGENT (default tah): metadata.agent to prompt
//   --attach FILE         an attachment of the first prompt (repeatable)
//   --answer TEXT         the reply to every query chunk (§7); without it a
//                         query is printed and left unanswered
//
// Output (stdout), one fact a line, for a test to check:
//   discovered: ping N, info N           replies of $SRV.PING / $SRV.INFO
//   controller: SUBJECT max_payload M (B bytes) attachments_ok X
//   identity: ACCOUNT.USER | none       the agent ID it signs with (§13.4)
//   prompt K: SUBJECT (B bytes)
//   status K: TOKEN                      every status chunk
//   session: SID                         the session the first prompt started
//   query K: ID PROMPT                   a query chunk (answered: "answered K: ID")
//   error K: CODE DESCRIPTION error=E message=M
//   answer K: "TEXT"                     the response text, as a JSON string
//   end K: ok | error CODE               the terminator
//   instance: NAME SUBJECT session SID (after N discoveries)
//   status reply: agent=.. owner=.. session=.. interval_s=.. instance_id matches|differs
//   liveness: NAME INSTANCE_ID heartbeats N interval_s S online|offline
// Heartbeats and notes go to stderr.
//
// Exit: 0 done; 1 a transport or discovery failure (no agent, a timeout);
// 2 usage; 3 refused locally (§5.4: too large, attachments not accepted);
// 4 the agent answered an error (§9).

"use strict";

const crypto = require("crypto");
const fs = require("fs");
const { connect, credsAuthenticator, createInbox, Empty, headers, StringCodec } = require("nats");
// The NKEY Sign operation (ed25519) of the user's seed, for §13.6.
const nkeys = require("nkeys.js");

const sc = StringCodec();

// The protocol version this caller speaks; 0.x minors may break each other,
// so only this MAJOR.MINOR is accepted (§11.2).
const PROTOCOL = "0.3";
// Discovery collects replies from many instances: it waits this long for the
// first one, then until no more arrive for QUIET_MS.
const FIRST_MS = 2000;
const QUIET_MS = 300;
// §6.6: 60 seconds without a chunk ends a stream as a transport error.
const INACTIVITY_MS = 60000;
// How long the session's instance may take to appear in discovery after the
// session started: its registration is asynchronous to the stream.
const INSTANCE_WAIT_MS = 15000;

class Refused extends Error {} // exit 3: a local check of §5.4
class AgentError extends Error {} // exit 4: an error message of §9

function usage(msg) {
  if (msg) console.error(msg);
  console.error("usage: node index.js [--server URL] [--creds FILE] [--inbox-prefix P] [--agent NAME] [--attach FILE]... [--answer TEXT] PROMPT [FOLLOW-UP ...]");
  process.exit(2);
}

function parseArgs(argv) {
  const o = {
    server: process.env.NATS_URL || "nats://127.0.0.1:4222",
    creds: process.env.NATS_CREDS || "",
    inboxPrefix: process.env.NATS_INBOX_PREFIX || "",
    agent: process.env.AGENT || "tah",
    attach: [],
    answer: null,
    prompts: [],
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case "--server": o.server = val(); break;
      case "--creds": o.creds = val(); break;
      case "--inbox-prefix": o.inboxPrefix = val(); break;
      case "--agent": o.agent = val(); break;
      case "--attach": o.attach.push(val()); break;
      case "--answer": o.answer = val(); break;
      case "--": o.prompts.push(...argv.slice(i + 1)); i = argv.length; break;
      default:
        if (a.startsWith("--")) usage(`unknown flag ${a}`);
        o.prompts.push(a);
    }
  }
  if (o.prompts.length === 0) usage("give at least one prompt");
  return o;
}

// credentials reads the .creds file and the name its user JWT carries: a TAH
// credential may receive replies only under _INBOX_<its name>, so that is the
// default inbox prefix.
// With it comes the caller's identity (§13.4): the user JWT's sub (the user
// NKEY) and its issuer account, and the seed that signs.
function credentials(file) {
  if (!file) return { opts: {}, name: "", id: null };
  const creds = fs.readFileSync(file);
  const text = creds.toString("utf8");
  const m = /-----BEGIN NATS USER JWT-----\s*(\S+)\s*------END/.exec(text);
  if (!m) throw new Error(`${file} is not a .creds file (no user JWT in it): give the file tahctl creds add wrote`);
  const claims = JSON.parse(Buffer.from(m[1].split(".")[1], "base64url").toString("utf8"));
  const seed = /-----BEGIN USER NKEY SEED-----\s*(\S+)\s*------END/.exec(text);
  let id = null;
  if (seed && claims.sub) {
    const kp = nkeys.fromSeed(Buffer.from(seed[1]));
    if (kp.getPublicKey() !== claims.sub) throw new Error(`${file}: its seed is not its JWT's user (${claims.sub})`);
    id = { kp, user: claims.sub, account: (claims.nats && claims.nats.issuer_account) || claims.iss, name: claims.name || "" };
  }
  return { opts: { authenticator: credsAuthenticator(creds) }, name: claims.name || "", id };
}

// senderHeaders are the headers of a message to subject with payload: an
// Agent-Sender signed by id (§13.5, §13.6), or none without an identity.
function senderHeaders(id, subject, payload) {
  if (!id) return undefined;
  const ts = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  const nonce = crypto.randomBytes(16).toString("base64url");
  const hash = crypto.createHash("sha256").update(payload).digest("hex");
  const input = `AGENT-SENDER-V1\n${id.account}\n${id.user}\n${subject}\n${ts}\n${nonce}\n${hash}\n`;
  const sig = Buffer.from(id.kp.sign(Buffer.from(input, "utf8"))).toString("base64url");
  const h = headers();
  h.set("Agent-Sender", JSON.stringify({ v: 1, account: id.account, user: id.user, name: id.name, sub: subject, ts, nonce, sig }));
  return h;
}

// out prints one fact on stdout.
function out(line) {
  process.stdout.write(line + "\n");
}

function note(line) {
  process.stderr.write(line + "\n");
}

// compatible applies §11.1/§11.2: only the MAJOR.MINOR prefix counts, and on
// the unstable 0.x line only the exact MAJOR.MINOR this caller speaks.
function compatible(v) {
  const m = /^(\d+)\.(\d+)/.exec(String(v || ""));
  return m !== null && `${m[1]}.${m[2]}` === PROTOCOL;
}

// maxPayloadBytes reads §2.1's max_payload: a positive integer and B, KB, MB
// or GB. The multiples are powers of 1024, as NATS's own max_payload sizes
// are (a server's "1MB" is 1048576 bytes).
function maxPayloadBytes(s) {
  const m = /^([1-9][0-9]*)(B|KB|MB|GB)$/.exec(String(s || ""));
  if (!m) return null;
  return Number(m[1]) * { B: 1, KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3 }[m[2]];
}

// truthy reads a boolean of endpoint metadata: the specification writes a
// JSON boolean, but micro service metadata is string-valued, so "true" is
// accepted too.
function truthy(v) {
  return v === true || v === "true";
}

// isTerminator: §6.5, a zero-byte body with no NATS headers.
function isTerminator(m) {
  return m.data.length === 0 && (!m.headers || (m.headers.keys().length === 0 && !m.headers.code));
}

// errorOf reads the headers of §9.1 (every message is checked for them
// before its body): null when the message is not an error.
function errorOf(m) {
  if (!m.headers) return null;
  const code = m.headers.get("Nats-Service-Error-Code");
  if (!code) {
    // The server's own status message: nobody listens on the subject.
    if (m.headers.code === 503 && m.data.length === 0) {
      return { code: "503", description: "no responders", body: {} };
    }
    return null;
  }
  let body = {};
  try {
    const b = JSON.parse(sc.decode(m.data));
    if (b && typeof b === "object") body = b;
  } catch (_) {
    // §9.1: an empty or non-JSON body leaves the header as the description.
  }
  return { code, description: m.headers.get("Nats-Service-Error") || "", body };
}

// gather sends one request and collects every reply until none arrived for
// QUIET_MS (FIRST_MS for the first): discovery is answered by each instance.
function gather(nc, prefix, subject) {
  return new Promise((resolve, reject) => {
    const replies = [];
    let timer = null;
    const inbox = createInbox(prefix);
    const finish = () => {
      clearTimeout(timer);
      sub.unsubscribe();
      resolve(replies);
    };
    const sub = nc.subscribe(inbox, {
      callback: (err, m) => {
        if (err) {
          clearTimeout(timer);
          sub.unsubscribe();
          reject(new Error(`${subject}: ${err.message}`));
          return;
        }
        if (errorOf(m)) {
          // No responders (or an error): nothing more will come.
          finish();
          return;
        }
        try {
          replies.push(JSON.parse(sc.decode(m.data)));
        } catch (e) {
          note(`${subject}: a reply that is not JSON, skipped: ${e.message}`);
        }
        clearTimeout(timer);
        timer = setTimeout(finish, QUIET_MS);
      },
    });
    timer = setTimeout(finish, FIRST_MS);
    nc.publish(subject, Empty, { reply: inbox });
  });
}

// discover runs §4.1 and returns the INFO records of compatible instances.
async function discover(nc, prefix, quiet) {
  const pings = await gather(nc, prefix, "$SRV.PING.agents");
  const infos = await gather(nc, prefix, "$SRV.INFO.agents");
  if (!quiet) out(`discovered: ping ${pings.length}, info ${infos.length}`);
  return infos.filter((s) => {
    const md = s.metadata || {};
    if (!compatible(md.protocol_version)) {
      note(`skipped instance ${s.id}: protocol_version ${JSON.stringify(md.protocol_version)}, this caller speaks ${PROTOCOL}`);
      return false;
    }
    return true;
  });
}

// endpoint finds an endpoint by name (§4.3); unknown endpoints are ignored.
function endpoint(info, name) {
  return (info.endpoints || []).find((e) => e.name === name) || null;
}

// instanceName is the 5th token of an endpoint subject of the default
// pattern agents.{verb}.{agent}.{owner}.{name} (§2, §4.3), else the
// session's label.
function instanceName(info, ep) {
  const t = ep.subject.split(".");
  return t.length === 5 && t[0] === "agents" ? t[4] : (info.metadata || {}).session || info.id;
}

// request builds the payload of a prompt and checks it against the
// endpoint's metadata before anything is published (§5.4).
function request(ep, prompt, attachments, id) {
  const md = ep.metadata || {};
  // §13.9: an unknown value is "signed", the strictest this caller can meet.
  if (!id && md.min_sender_trust !== undefined && md.min_sender_trust !== "any") {
    throw new Refused(`the prompt endpoint ${ep.subject} requires a signed sender (min_sender_trust ${JSON.stringify(md.min_sender_trust)}) and this caller has no identity: give --creds`);
  }
  const max = maxPayloadBytes(md.max_payload);
  if (max === null) {
    throw new Refused(`the prompt endpoint ${ep.subject} declares no valid max_payload (${JSON.stringify(md.max_payload)}): not sent`);
  }
  if (attachments.length > 0 && !truthy(md.attachments_ok)) {
    throw new Refused(`the prompt endpoint ${ep.subject} does not accept attachments (attachments_ok ${JSON.stringify(md.attachments_ok)}): send the prompt without --attach`);
  }
  const env = { prompt };
  if (attachments.length > 0) env.attachments = attachments;
  const payload = sc.encode(JSON.stringify(env));
  if (payload.length > max) {
    throw new Refused(`the request is ${payload.length} bytes, over the agent's max_payload ${md.max_payload} (${max} bytes): not sent; send less`);
  }
  return payload;
}

// stream publishes one prompt and reads its response stream to the end (§6).
// It prints each fact as it comes and resolves with the stream's outcome.
function stream(nc, prefix, k, subject, payload, answer, id) {
  return new Promise((resolve, reject) => {
    const inbox = createInbox(prefix);
    const res = { text: "", session: "", error: null, statuses: [] };
    let timer = null;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        sub.unsubscribe();
        reject(new Error(`prompt ${k}: no message for ${INACTIVITY_MS / 1000} s on ${subject}: the stream is lost (§6.6); the agent may still be working`));
      }, INACTIVITY_MS);
    };
    const sub = nc.subscribe(inbox, {
      callback: (err, m) => {
        if (err) {
          clearTimeout(timer);
          reject(new Error(`prompt ${k}: ${err.message}`));
          return;
        }
        arm();
        // Headers first, on every message (§12).
        const e = errorOf(m);
        if (e) {
          res.error = e;
          out(`error ${k}: ${e.code} ${e.description} error=${e.body.error || ""} message=${JSON.stringify(e.body.message || e.description)}`);
          if (e.code === "503" && !m.headers.get("Nats-Service-Error-Code")) {
            // The server's no-responders status: no terminator follows.
            clearTimeout(timer);
            sub.unsubscribe();
            resolve(res);
          }
          return;
        }
        if (isTerminator(m)) {
          clearTimeout(timer);
          sub.unsubscribe();
          out(`answer ${k}: ${JSON.stringify(res.text)}`);
          out(`end ${k}: ${res.error ? "error " + res.error.code : "ok"}`);
          resolve(res);
          return;
        }
        let c;
        try {
          c = JSON.parse(sc.decode(m.data));
        } catch (_) {
          note(`prompt ${k}: a chunk that is not JSON, skipped`);
          return;
        }
        if (!c || typeof c !== "object") return;
        switch (c.type) {
          case "response": {
            // §6.3: a bare string, or an object with text.
            const t = typeof c.data === "string" ? c.data : c.data && typeof c.data.text === "string" ? c.data.text : "";
            res.text += t;
            break;
          }
          case "status": {
            const s = String(c.data);
            res.statuses.push(s);
            out(`status ${k}: ${s}`);
            if (s === "restarted") {
              // The agent's node resumed the turn after a crash and sends
              // its text again: only what follows counts.
              res.text = "";
            } else if (s.startsWith("session:")) {
              res.session = s.slice("session:".length);
              out(`session: ${res.session}`);
            }
            break;
          }
          case "query": {
            const q = c.data || {};
            out(`query ${k}: ${q.id} ${JSON.stringify(q.prompt || "")}`);
            if (answer !== null && q.reply_subject) {
              // §7.2: one message to the query's own subject.
              const body = sc.encode(answer);
              nc.publish(q.reply_subject, body, { headers: senderHeaders(id, q.reply_subject, body) });
              out(`answered ${k}: ${q.id}`);
            }
            break;
          }
          default:
            // §6.6: an unknown chunk type is ignored.
            break;
        }
      },
    });
    arm();
    nc.publish(subject, payload, { reply: inbox, headers: senderHeaders(id, subject, payload) });
  });
}

// findInstance discovers the session's own instance, which registers after
// the session starts: discovery is retried until it answers, each wait cut
// short by a heartbeat of the session (its instance beats once on
// registration).
async function findInstance(nc, prefix, agent, owner, sid, beats) {
  const deadline = Date.now() + INSTANCE_WAIT_MS;
  for (let n = 1; ; n++) {
    const infos = await discover(nc, prefix, true);
    const info = infos.find((s) => {
      const md = s.metadata || {};
      return md.agent === agent && md.owner === owner && md.session === sid && endpoint(s, "prompt");
    });
    if (info) {
      out(`instance: ${instanceName(info, endpoint(info, "prompt"))} ${endpoint(info, "prompt").subject} session ${sid} (after ${n} discover${n === 1 ? "y" : "ies"})`);
      return info;
    }
    if (Date.now() > deadline) {
      throw new Error(`the session ${sid} has no instance in $SRV.INFO.agents after ${INSTANCE_WAIT_MS / 1000} s: its node may not serve it as an agent`);
    }
    await beats.waitFor((hb) => hb.session === sid, 1000);
  }
}

// Heartbeats tracks liveness per instance_id (§8.2) and lets a caller wait
// for a heartbeat that matches.
class Heartbeats {
  constructor() {
    this.byInstance = new Map();
    this.waiters = [];
  }
  add(subject, hb) {
    const prev = this.byInstance.get(hb.instance_id);
    this.byInstance.set(hb.instance_id, {
      name: subject.split(".")[4] || "",
      session: hb.session,
      interval_s: Number(hb.interval_s) || 0,
      last: Date.now(),
      count: prev ? prev.count + 1 : 1,
    });
    note(`heartbeat: ${subject} ${hb.instance_id} session ${hb.session || "-"} interval_s ${hb.interval_s}`);
    this.waiters = this.waiters.filter((w) => {
      if (!w.match(hb)) return true;
      w.done();
      return false;
    });
  }
  // waitFor resolves at a matching heartbeat or after ms.
  waitFor(match, ms) {
    return new Promise((resolve) => {
      const w = { match, done: () => { clearTimeout(t); resolve(true); } };
      const t = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        resolve(false);
      }, ms);
      this.waiters.push(w);
    });
  }
  // report prints each instance heard from: online while its last beat is
  // younger than 3 × interval_s (§8.2).
  report() {
    for (const [id, h] of this.byInstance) {
      const online = Date.now() - h.last < 3 * h.interval_s * 1000;
      out(`liveness: ${h.name} ${id} heartbeats ${h.count} interval_s ${h.interval_s} ${online ? "online" : "offline"}`);
    }
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const cred = credentials(o.creds);
  const prefix = o.inboxPrefix || (cred.name ? "_INBOX_" + cred.name : "_INBOX");
  const nc = await connect({ servers: o.server, inboxPrefix: prefix, name: "agent-caller-js", ...cred.opts });
  try {
    // 1. Heartbeats before discovery (§8.5).
    const beats = new Heartbeats();
    nc.subscribe("agents.hb.*.*.*", {
      callback: (err, m) => {
        if (err) {
          note(`heartbeats: ${err.message}`);
          return;
        }
        try {
          const hb = JSON.parse(sc.decode(m.data));
          if (hb && hb.instance_id) beats.add(m.subject, hb);
        } catch (_) {
          // Not a heartbeat of §8.3: ignored.
        }
      },
    });
    await nc.flush();

    // 2-4. Discovery, the controller, its prompt endpoint.
    const infos = await discover(nc, prefix, false);
    const ctl = infos.find((s) => (s.metadata || {}).agent === o.agent && (s.metadata || {}).session === "new" && endpoint(s, "prompt"));
    if (!ctl) {
      throw new Error(`no instance of agent ${o.agent} with session "new" (its controller) answered $SRV.INFO.agents: is its node running, with the agent protocol on?`);
    }
    const owner = ctl.metadata.owner;
    const ctlEp = endpoint(ctl, "prompt");
    out(`identity: ${cred.id ? cred.id.account + "." + cred.id.user : "none"}`);
    out(`controller: ${ctlEp.subject} max_payload ${ctlEp.metadata.max_payload} (${maxPayloadBytes(ctlEp.metadata.max_payload)} bytes) attachments_ok ${ctlEp.metadata.attachments_ok}`);

    const attachments = o.attach.map((f) => ({ filename: f.split("/").pop(), content: fs.readFileSync(f).toString("base64") }));

    // 5. The first prompt, to the controller: it starts a session.
    let payload = request(ctlEp, o.prompts[0], attachments, cred.id);
    out(`prompt 1: ${ctlEp.subject} (${payload.length} bytes)`);
    const first = await stream(nc, prefix, 1, ctlEp.subject, payload, o.answer, cred.id);
    if (first.error) throw new AgentError(`the agent refused prompt 1: ${first.error.code} ${first.error.description}`);
    if (!first.session) throw new Error("the first stream named no session (no status session:<sid>): cannot continue it");

    // 6. Each further prompt to the session's own instance.
    let inst = null;
    if (o.prompts.length > 1) {
      inst = await findInstance(nc, prefix, o.agent, owner, first.session, beats);
      const ep = endpoint(inst, "prompt");
      for (let i = 1; i < o.prompts.length; i++) {
        payload = request(ep, o.prompts[i], [], cred.id);
        out(`prompt ${i + 1}: ${ep.subject} (${payload.length} bytes)`);
        const r = await stream(nc, prefix, i + 1, ep.subject, payload, o.answer, cred.id);
        if (r.error) throw new AgentError(`the agent refused prompt ${i + 1}: ${r.error.code} ${r.error.description}`);
      }
    } else {
      inst = await findInstance(nc, prefix, o.agent, owner, first.session, beats);
    }

    // 7. The instance's status endpoint (§8.7): a heartbeat-shaped reply.
    const st = endpoint(inst, "status");
    if (!st) throw new Error(`the instance ${inst.id} has no status endpoint (§8.7)`);
    const m = await nc.request(st.subject, Empty, { timeout: 5000, headers: senderHeaders(cred.id, st.subject, Empty) });
    const e = errorOf(m);
    if (e) throw new AgentError(`status ${st.subject}: ${e.code} ${e.description}`);
    const hb = JSON.parse(sc.decode(m.data));
    beats.add(st.subject.replace(/^agents\.status\./, "agents.hb."), hb);
    out(`status reply: agent=${hb.agent} owner=${hb.owner} session=${hb.session} interval_s=${hb.interval_s} instance_id ${hb.instance_id === inst.id ? "matches" : "differs"}`);
    beats.report();
  } finally {
    await nc.close();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`agent-caller-js: ${err.message}`);
    process.exit(err instanceof Refused ? 3 : err instanceof AgentError ? 4 : 1);
  },
);
