// Package tools defines what a tool is to TAH and runs tool calls safely.
//
// A Tool has a name, a description, the JSON Schema of its input, and Run. Optional
// abilities are found by type assertion, as hashicorp/raft does with BatchingFSM:
// IdempotentTool (resume may run it again), TimeoutTool (a time limit of its own),
// ExclusiveTool (must run alone within a batch) and RemoteTool (runs elsewhere).
//
// A Registry holds local tools by name and lists their schemas in a stable order;
// tools/remote lists the tools that services offer on NATS; Merge puts catalogs
// side by side. An Executor runs one call: it validates the input against the
// tool's schema (compiled once), applies the timeout, recovers panics, and turns
// every failure into a failed Result with an event.Code* code that the model sees,
// never into a crashed process. An output that is too long is cut to a preview;
// the full output goes to an ArtifactStore when one is configured.
//
// The built-in tools are in tools/builtin, the object-store ArtifactStore in
// tools/artifacts, remote tools in tools/remote and tools/toolservice; the actors
// that run batches of calls concurrently are in actors/toolrunner.
//
// The smallest use:
//
//	reg := tools.MustRegistry(builtin.ListFiles("."), builtin.ReadFile("."))
//	exec := tools.NewExecutor(reg, tools.Options{})
//	res := exec.Execute(ctx, llm.ToolCall{ID: "call_1", Name: "list_files", Arguments: json.RawMessage(`{}`)})
//	fmt.Println(res.Output, res.IsError, res.Code)
//
// A tool of your own:
//
//	type shout struct{}
//
//	func (shout) Name() string            { return "shout" }
//	func (shout) Description() string     { return "Returns the text in capitals." }
//	func (shout) Schema() json.RawMessage { return json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`) }
//	func (shout) Run(ctx context.Context, in json.RawMessage) (tools.Result, error) {
//		var a struct{ Text string }
//		if err := json.Unmarshal(in, &a); err != nil {
//			return tools.Result{}, err
//		}
//		return tools.Text(strings.ToUpper(a.Text)), nil
//	}
package tools
