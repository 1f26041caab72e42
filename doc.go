// Package tah is the Go API of TAH, mirroring the specification's Runtime usage
// (../shared/spec/agent-session.en.md):
//
//	rt := tah.New()
//	rt.Use(tah.Storage(tah.StorageOptions{Driver: "sqlite", Path: ".tah/data.db"}))
//	rt.Use(tah.LLM(tah.LLMOptions{Provider: "mock"}))
//	rt.Use(tah.Tools(builtin.ListFiles("."), builtin.ReadFile(".")))
//	rt.Use(tah.Agent(tah.AgentOptions{}))
//	if err := rt.Start(ctx); err != nil { ... }
//	defer rt.Close(ctx)
//
//	sessions := tah.Get(rt, tah.SessionKey)
//	s, err := sessions.Create(ctx)
//	result, err := s.Run(ctx, "分析这个项目的目录结构")
//
// Start brings up a node: an embedded NATS server (or a connection to an
// external one, see NATS), the durable log, the SQLite read model, the session
// actors and the API service. Connect instead uses nodes that run elsewhere:
//
//	rt, err := tah.Connect(ctx, "nats://10.0.0.1:4222", tah.CredsFile("client.creds"))
//
// The embedded server is protected as tah-node's is (NATS operator mode; see
// docs/security.md): Start writes the data directory's trust material, its
// credentials (admin.creds for local clients) and node.json, so that tahctl
// in the same directory finds the node by itself.
//
// Either way a Session's methods go through NATS like any client's (they are a
// thin layer over package client): Run publishes the input to the session's
// input subject and waits for the owner (this node, or another node of a
// cluster) to report the turn's outcome, so a session survives the crash of the
// process that runs it and resumes wherever it is opened next.
//
// Budgets limit what turns spend (tokens, cost, wall time): the node's
// (AgentOptions.Budget), a session's own (CreateWith, Session.SetBudget)
// and a turn's (WithBudget), the tightest winning. A turn stopped at one
// runs on once it is raised:
//
//	r, err := s.Run(ctx, "…", tah.WithBudget(tah.Limits{Tokens: 50_000}))
//	if r.Code == "budget_exceeded" { // r.Budget says which limit, at what figure
//		err = s.SetBudget(ctx, tah.BudgetChange{Turn: &tah.LimitsChange{Tokens: new(int64(200_000))}})
//		r, err = s.Resume(ctx)
//	}
package tah
