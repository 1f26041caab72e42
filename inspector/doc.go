// Package inspector is the step inspector: the web UI that tah-node serves
// on its HTTP port (/, beside /metrics). It lists sessions (live, those
// awaiting a person's approval marked, filtered by status, searched by
// title, id, last answer or the words of their messages, a page at a
// time), shows a session's turns and, inside each, its steps as a timeline
// (thinking, LLM, tool: status, start and duration as a waterfall bar
// across the turn, model, provider and node, tokens and cost, the model's
// answer rendered from Markdown, tool input and output, errors with their
// codes, trims where they happened, compactions as steps marked so with
// the summary they wrote, who approved or denied a call and when, each
// turn's own tokens and cost, the session's total cost and, beside it, its
// budget's limits in force with what each has spent (the one the last turn
// stopped at marked reached), the exact request of an LLM step on demand,
// the artifacts to download), where the session sits in its tree of
// sub-agents (a sub-agent's session names its agent and links to its
// parent's page at the step of the call it answers; a parent lists its
// sub-agents' sessions as a tree, their children nested, each with its agent
// and status, and beside its own tokens and cost the whole tree's; a
// sub-agent call's step links to its child's session and, while it runs,
// says it waits for it; the list marks a sub-agent's session with its
// parent), the session's log
// event by event (filtered by type), streams
// a running turn's tokens and new steps as they are logged, and acts: a new
// session or its next turn, approve (the arguments pretty-printed, to
// edit) or deny, cancel, resume, fork at a turn, compact. An action that
// cannot apply is disabled, and refused here from the log without an input
// (a node refuses it only after loading the session, which writes a
// session.claimed); a node's refusal is said with its failure code.
//
// What a page cannot show: the first tokens of an answer that streamed
// before the page opened (deltas are not stored, and no node keeps a
// step's text before llm.completed: the step says so, and the whole answer
// shows when it completes); the provider of a step whose node is gone (the
// log does not record providers: they come from tah.api.status); the cost
// of a step logged before costs were recorded (it counts as no cost); a
// sub-agent's status, and the tree's totals, between the parent's events
// (the tree comes from the read model, tah.api.get, and is read again when
// the parent's log says a sub-agent's call started or ended, not as a child
// works; a child the read model does not list yet shows as unknown); more
// than 50 sessions of one tree (the rest are counted, not shown).
//
// It is a client like any other: everything goes through package client
// over a connection of its own with a credential of the client role (the
// node issues <data>/ui.creds), never the node's, so NATS's permissions hold
// for it, and it works the same on any node of a cluster. A session's page
// folds the session's log (tah.api.events) with projection.Apply, the one
// fold, and its live stream folds what an ordered consumer (client.Follow)
// delivers with the same code; token deltas come from tah.sess.<sid>.delta.
// An artifact's download streams it from tah.api.artifact a piece at a time
// (client.FetchArtifact), never whole in memory.
//
// Technology, and why: server-rendered HTML (html/template) with one small
// stylesheet and one small script, embedded with go:embed, and Server-Sent
// Events for live updates. A fresh clone's go build needs nothing else: no
// JavaScript build step, no npm package, no CDN, nothing fetched at run
// time; every page works without the script (it only keeps pages live).
// Answers are Markdown made HTML by github.com/yuin/goldmark (CommonMark and
// GitHub's tables, lists of tasks, strikethrough and bare links), with its
// default of rendering no raw HTML and no javascript: link: a maintained,
// widely used parser that passes the CommonMark suite, where one of our own
// would be a second place for an HTML injection to hide. The waterfall bars
// are SVG rectangles placed by their attributes, since the
// Content-Security-Policy allows no inline style. A
// live update is a turn's block rendered again by the same templates as the
// page, so that the page and its updates cannot disagree; the script
// replaces it and keeps open what the reader opened. The list stays live by
// fetching its first page's rows again every two seconds while it is
// visible (one tah.api.list request): the API has no change feed of the
// list, and following every shard of the log for a list would cost far more.
//
// Access: with an empty Options.Token the handler answers only requests for
// a loopback host (a guard against DNS rebinding); with a token (the node
// sets one when its HTTP address is not loopback) every page but /login
// wants the login cookie. Every POST must come from the inspector's own
// origin and carry the CSRF token of its form (double-submitted: a
// SameSite=Strict cookie and a form field). Cookies are HttpOnly; the
// Content-Security-Policy allows only the inspector's own files.
//
// The smallest use:
//
//	c, err := client.Connect(ctx, client.Options{URL: url, CredsFile: ".tah/ui.creds"})
//	h, err := inspector.New(inspector.Options{Client: c})
//	http.ListenAndServe("127.0.0.1:9464", h)
package inspector
