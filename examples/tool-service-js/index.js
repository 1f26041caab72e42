// An example TAH tool service in JavaScript, with the official `nats` client.
//
// It offers three tools to every TAH node on the same NATS system:
//   shout       the text in capitals
//   word_count  how many words a text has
//   wait        waits a number of milliseconds (stops at once when cancelled)
//
// The contract it follows is docs/protocol.md, "Tool services". In short: one
// NATS micro service per tool, named tah-tool-<name>, with an endpoint on
// tah.tool.<name> in queue group tah-tools, whose metadata carries the tool's
// description and JSON Schema; every call is stored in the KV bucket
// tah_tool_results under <session>.<call id> ("running", then "done" with the
// result) BEFORE the reply; a message on tah.tool.cancel.<call id> cancels it.
//
// Run, in the directory where tah-node runs (its data directory is .tah):
//   tahctl creds add --role tool --tool shout,word_count,wait jstools   # writes .tah/creds/jstools.creds
//   NATS_URL=nats://127.0.0.1:4222 NATS_CREDS=.tah/creds/jstools.creds node examples/tool-service-js/index.js
// (NATS_CREDS is a .creds file: the one `tahctl creds add --role tool --tool
// NAME NAME` wrote, wherever it printed, or the node's .tah/admin.creds.)
//
// A tenant's tools (docs/protocol.md, "A tenant's tools"): with a tool
// credential of a tenant (tahctl creds add --tenant acme --role tool --tool
// shout,word_count,wait NAME), whose JWT says its tenant (the tag
// tenant:acme), the same tools are served to that tenant's sessions alone:
// services tah-ttool-acme__<name>, endpoints tah.ttool.acme.<name>, cancels on
// tah.ttool.acme.cancel.*, calls stored under t=acme.<tool>.<session>.<call>
// by a JetStream publish (such a credential may not read the bucket's
// stream info, which binding it would).
//
// Tracing: each call's span ("execute_tool <name>", a server span) is the child
// of the node's execute_tool span, whose W3C trace context comes in the call's
// traceparent and tracestate headers, so a turn is one trace across the node
// and this service. Spans are exported over OTLP/HTTP (protobuf) when the
// standard variables ask for it: OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_TRACES_EXPORTER=otlp for the
// default http://localhost:4318); the exporter reads the other OTEL_* variables
// (_HEADERS, _TIMEOUT, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_*).
// Without them, or with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none,
// the SDK is not even loaded and the spans are OpenTelemetry's no-ops.
//   OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 NATS_URL=... node index.js

"use strict";

const fs = require("fs");
const { connect, credsAuthenticator, StringCodec } = require("nats");
const otel = require("@opentelemetry/api");

const SUBJECT_PREFIX = "tah.tool.";
const CANCEL_PREFIX = "tah.tool.cancel.";
const QUEUE = "tah-tools";
const BUCKET = "tah_tool_results";
const sc = StringCodec();

// ---- the tools -------------------------------------------------------------

const tools = [
  {
    name: "shout",
    description: "Returns the given text in capital letters, followed by an exclamation mark.",
    schema: {
      type: "object",
      properties: { text: { type: "string", description: "The text to shout." } },
      required: ["text"],
      additionalProperties: false,
    },
    idempotent: true,
    run: async ({ text }) => text.toUpperCase() + "!",
  },
  {
    name: "word_count",
    description: "Counts the words (runs of non-space characters) of a text.",
    schema: {
      type: "object",
      properties: { text: { type: "string", description: "The text whose words to count." } },
      required: ["text"],
      additionalProperties: false,
    },
    idempotent: true,
    run: async ({ text }) => {
      const n = text.split(/\s+/).filter(Boolean).length;
      return `${n} ${n === 1 ? "word" : "words"}`;
    },
  },
  {
    name: "wait",
    description: "Waits for the given number of milliseconds, then says so.",
    schema: {
      type: "object",
      properties: { ms: { type: "integer", minimum: 0, maximum: 600000, description: "How long to wait." } },
      required: ["ms"],
      additionalProperties: false,
    },
    idempotent: true,
    run: ({ ms }, signal) =>
      new Promise((resolve, reject) => {
        if (signal.aborted) return reject(signal.reason); // cancelled before it started
        const t = setTimeout(() => resolve(`waited ${ms} ms`), ms);
        signal.addEventListener("abort", () => { clearTimeout(t); reject(signal.reason); }, { once: true });
      }),
  },
];

// validate checks input against the small part of JSON Schema these tools use
// (a real service may use a full validator such as ajv). It returns the problems.
function validate(schema, input) {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return ["at '': want an object"];
  const errs = [];
  for (const name of schema.required || []) {
    if (!(name in input)) errs.push(`at '': missing property '${name}'`);
  }
  for (const [name, value] of Object.entries(input)) {
    const p = (schema.properties || {})[name];
    if (!p) {
      if (schema.additionalProperties === false) errs.push(`at '': additional property '${name}' not allowed`);
      continue;
    }
    const ok = p.type === "integer" ? Number.isInteger(value) : typeof value === p.type;
    if (!ok) { errs.push(`at '/${name}': want ${p.type}`); continue; }
    if (p.minimum !== undefined && value < p.minimum) errs.push(`at '/${name}': below the minimum ${p.minimum}`);
    if (p.maximum !== undefined && value > p.maximum) errs.push(`at '/${name}': above the maximum ${p.maximum}`);
  }
  return errs;
}

// ---- tracing ---------------------------------------------------------------

const SCOPE = "tah-tool-service-js";

// startTracing registers OpenTelemetry's SDK with an OTLP exporter when the
// standard variables ask for it (see the top of this file) and returns the
// function that flushes and stops it. Otherwise it registers nothing: the API
// then hands out no-op spans, at no cost.
function startTracing() {
  const env = process.env;
  const exporter = (env.OTEL_TRACES_EXPORTER || "").trim().toLowerCase();
  if ((env.OTEL_SDK_DISABLED || "").trim().toLowerCase() === "true" || exporter === "none") return async () => {};
  if (!env.OTEL_EXPORTER_OTLP_ENDPOINT && !env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT && exporter !== "otlp") return async () => {};
  const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || "http/protobuf";
  if (protocol !== "http/protobuf") {
    console.error(`tracing: OTLP protocol ${protocol} is not offered by this example; exporting over http/protobuf`);
  }
  const { NodeTracerProvider, BatchSpanProcessor } = require("@opentelemetry/sdk-trace-node");
  const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-proto");
  const { defaultResource, resourceFromAttributes, detectResources, envDetector } = require("@opentelemetry/resources");
  // Later resources win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES over the example's name.
  const resource = defaultResource()
    .merge(resourceFromAttributes({ "service.name": SCOPE }))
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())], // the exporter reads OTEL_EXPORTER_OTLP_*
  });
  // The W3C trace context propagator and an AsyncLocalStorage context manager.
  provider.register();
  return () => provider.shutdown();
}

// A NATS message's headers as a carrier of trace context. NATS header names are
// case-sensitive and the node sends them in lower case; another caller may
// spell them "Traceparent", so a read tries every spelling.
const natsHeaders = {
  keys: (h) => (h ? h.keys() : []),
  get: (h, key) => {
    if (!h) return undefined;
    const k = h.keys().find((k) => k.toLowerCase() === key);
    return k === undefined ? undefined : h.get(k);
  },
};

// callSpan starts the span of one call as the child of the caller's span (a
// malformed traceparent is ignored: the span starts a trace of its own), with
// the attributes of the GenAI conventions TAH's own tool services set. Tool
// arguments and results are not recorded: they may hold anything.
function callSpan(tool, msg, callId, session) {
  const parent = otel.propagation.extract(otel.ROOT_CONTEXT, msg.headers, natsHeaders);
  return otel.trace.getTracer(SCOPE).startSpan(`execute_tool ${tool}`, {
    kind: otel.SpanKind.SERVER,
    attributes: {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": tool,
      "gen_ai.tool.call.id": callId,
      "tah.session.id": session,
    },
  }, parent);
}

// ---- the protocol ----------------------------------------------------------

// credentials reads the .creds file NATS_CREDS names (a user JWT and its
// nkey seed), as nats.js takes it, and the inbox prefix its name gives: a
// credential may receive replies under _INBOX_<its name>. only
// (docs/security.md).
function credentials() {
  const file = process.env.NATS_CREDS;
  if (!file) return { tenant: "" };
  const creds = fs.readFileSync(file);
  const jwt = /-----BEGIN NATS USER JWT-----\s*(\S+)\s*------END/.exec(creds.toString("utf8"))[1];
  const claims = JSON.parse(Buffer.from(jwt.split(".")[1], "base64url").toString("utf8"));
  // A tenant's credential says its tenant in a tag (docs/protocol.md).
  const tag = (claims.nats?.tags || []).find((t) => t.startsWith("tenant:"));
  return { authenticator: credsAuthenticator(creds), inboxPrefix: "_INBOX_" + claims.name, tenant: tag ? tag.slice("tenant:".length) : "" };
}

// names are the subjects and names the service uses: every tenant's tools',
// or a tenant's own (docs/protocol.md, "A tenant's tools").
function names(tenant) {
  if (!tenant) {
    return {
      service: (tool) => "tah-tool-" + tool,
      subject: (tool) => SUBJECT_PREFIX + tool,
      cancelPrefix: CANCEL_PREFIX,
      key: (tool, session, callId) => resultKey(tool, session, callId),
    };
  }
  return {
    service: (tool) => `tah-ttool-${tenant}__${tool}`,
    subject: (tool) => `tah.ttool.${tenant}.${tool}`,
    cancelPrefix: `tah.ttool.${tenant}.cancel.`,
    key: (tool, session, callId) => `t=${tenant}.${resultKey(tool, session, callId)}`,
  };
}

// token turns an id into a subject token / KV key part (docs/protocol.md).
function token(id) {
  return /^[A-Za-z0-9_-]{1,128}$/.test(id) ? id : "=" + Buffer.from(id, "utf8").toString("base64url");
}

// resultKey is a call's key in tah_tool_results: <tool>.<session>.<call>, the
// tool first, so that a tool credential writes its own tools' calls only.
function resultKey(tool, session, callId) {
  return `${token(tool)}.${session ? token(session) : "_"}.${token(callId)}`;
}

// The micro error code sent with a failed result of each code.
const STATUS = { invalid_input: 400, unknown_tool: 404, timeout: 408, cancelled: 499 };

function oneLine(s) {
  s = s.split(/\s+/).filter(Boolean).join(" ");
  return (s.length > 500 ? s.slice(0, 500) + "..." : s) || "the call failed";
}

const inflight = new Map(); // call token -> Set of { session, controller }

async function main() {
  const stopTracing = startTracing();
  const { tenant, ...auth } = credentials();
  const n = names(tenant);
  const nc = await connect({
    servers: process.env.NATS_URL || "nats://127.0.0.1:4222",
    ...auth,
    name: "tah-tool-service-js",
  });
  // The node creates the bucket; a tool credential may only bind to it. A
  // tenant's may not even bind (no stream info): it publishes on its keys.
  let put;
  if (tenant) {
    const js = nc.jetstream();
    put = (key, record) => js.publish(`$KV.${BUCKET}.${key}`, sc.encode(JSON.stringify(record)), { expect: { streamName: "KV_" + BUCKET } });
  } else {
    const kv = await nc.jetstream().views.kv(BUCKET, { bindOnly: true });
    put = (key, record) => kv.put(key, sc.encode(JSON.stringify(record)));
  }

  // One subscription for every cancel: the calls of this process are in inflight.
  nc.subscribe(n.cancelPrefix + "*", {
    callback: (err, msg) => {
      if (err) return;
      const tok = msg.subject.slice(n.cancelPrefix.length);
      let notice = {};
      try { notice = JSON.parse(sc.decode(msg.data) || "{}"); } catch { /* an empty body cancels by id */ }
      for (const c of inflight.get(tok) || []) {
        if (notice.session && notice.session !== c.session) continue;
        if (notice.attempt && notice.attempt !== c.attempt) continue;
        // reason "timeout": the caller's deadline passed; otherwise a cancel.
        c.controller.abort(Object.assign(new Error(notice.reason || "cancelled"), { timeout: notice.reason === "timeout" }));
      }
    },
  });

  async function handle(tool, srv, msg) {
    let req;
    try {
      req = JSON.parse(sc.decode(msg.data));
    } catch (e) {
      msg.respondError(400, "malformed request: " + e.message);
      return;
    }
    const callId = req.call_id || msg.headers?.get("Tah-Call-Id");
    const session = req.session || msg.headers?.get("Tah-Session") || "";
    const deadline = req.deadline || msg.headers?.get("Tah-Deadline");
    if (!callId) {
      msg.respondError(400, "malformed request: call_id is missing");
      return;
    }
    // The span ends once the reply has gone, whatever happens in between.
    const span = callSpan(tool.name, msg, callId, session);
    try {
      await serve(tool, srv, msg, req, callId, session, deadline, span);
    } catch (e) {
      span.setStatus({ code: otel.SpanStatusCode.ERROR, message: e.message });
      throw e;
    } finally {
      span.end();
    }
  }

  async function serve(tool, srv, msg, req, callId, session, deadline, span) {
    const key = n.key(tool.name, session, callId);
    const tok = token(callId);
    const controller = new AbortController();
    const entry = { session, attempt: req.attempt || "", controller };
    if (!inflight.has(tok)) inflight.set(tok, new Set());
    inflight.get(tok).add(entry);
    let timer;
    if (deadline) {
      const left = Date.parse(deadline) - Date.now();
      timer = setTimeout(() => controller.abort(Object.assign(new Error("deadline passed"), { timeout: true })), Math.max(left, 0));
    }

    const info = srv.info();
    const record = {
      call_id: callId, session, tool: tool.name, attempt: req.attempt || "",
      state: "running", service: info.name, instance: info.id, started: new Date().toISOString(),
    };
    await put(key, record);

    let result;
    const errs = validate(tool.schema, req.input);
    if (errs.length > 0) {
      result = { output: `Error: invalid input for tool ${tool.name}:\n- ${errs.join("\n- ")}`, is_error: true, code: "invalid_input" };
    } else {
      try {
        // A cancel may have come while the call was being stored: do not start then.
        controller.signal.throwIfAborted();
        result = { output: String(await tool.run(req.input, controller.signal)) };
      } catch (e) {
        if (controller.signal.aborted && controller.signal.reason?.timeout) {
          result = { output: `Error: the call to ${tool.name} ran out of time.`, is_error: true, code: "timeout" };
        } else if (controller.signal.aborted) {
          result = { output: `Error: the call to ${tool.name} was cancelled.`, is_error: true, code: "cancelled" };
        } else {
          result = { output: `Error: ${e.message}`, is_error: true, code: "tool_error" };
        }
      }
    }
    clearTimeout(timer);
    inflight.get(tok).delete(entry);
    if (inflight.get(tok).size === 0) inflight.delete(tok);

    if (result.is_error) {
      span.setStatus({ code: otel.SpanStatusCode.ERROR, message: result.code });
      span.setAttribute("error.type", result.code);
    }
    // Store first, then reply: a node that lost the reply finds the result.
    await put(key, { ...record, state: "done", finished: new Date().toISOString(), result });
    const body = sc.encode(JSON.stringify(result));
    if (result.is_error) {
      msg.respondError(STATUS[result.code] || 500, oneLine(result.output), body);
    } else {
      msg.respond(body);
    }
  }

  for (const tool of tools) {
    const srv = await nc.services.add({
      name: n.service(tool.name),
      version: "1.0.0",
      description: tool.description,
      metadata: { tah_protocol: "2" },
      queue: QUEUE,
    });
    srv.addEndpoint(tool.name, {
      subject: n.subject(tool.name),
      queue: QUEUE,
      metadata: {
        description: tool.description,
        schema: JSON.stringify(tool.schema),
        idempotent: String(Boolean(tool.idempotent)),
        exclusive: "false",
      },
      handler: (err, msg) => {
        if (err) { console.error(`tah-tool-${tool.name}:`, err.message); return; }
        handle(tool, srv, msg).catch((e) => {
          console.error(`tah-tool-${tool.name}: call failed:`, e);
          try { msg.respondError(500, "internal error: " + e.message); } catch { /* connection gone */ }
        });
      },
    });
  }
  console.log(JSON.stringify({ ready: true, tools: tools.map((t) => t.name), ...(tenant ? { tenant } : {}) }));

  // Drain first (the calls in flight finish and end their spans), then flush the spans.
  const stop = async () => { await nc.drain(); await stopTracing(); process.exit(0); };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  await nc.closed();
}

main().catch((e) => {
  console.error("tool service failed:", e);
  process.exit(1);
});
