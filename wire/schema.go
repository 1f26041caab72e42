package wire

// Schema names a payload of the contract and the file of its JSON Schema
// under docs/schema/messages/ (the event envelope and payloads are under
// docs/schema/, named by event type).
type Schema struct {
	// File is the schema's file name, e.g. "input.json".
	File string
	// Title says what the payload is the body of.
	Title string
	// Value is a zero value of the payload's type.
	Value any
}

// Schemas lists every payload of the contract but the events'. The schemas
// in docs/schema/messages are generated from it (make schema) and tests keep
// them in step.
func Schemas() []Schema {
	out := []Schema{
		{"input.json", "Input (body of a message on tah.sess.<sid>.in; the command is the Tah-Command header)", Input{}},
		{"outcome.json", "Outcome (body of the message on an input's Tah-Reply-To subject, and of a refusal on tah.sess.<sid>.err)", Outcome{}},
		{"delta.json", "Token delta (body of a message on tah.sess.<sid>.delta)", Delta{}},
		{"node.json", "Node presence (body of a message on tah.nodes.<node>, and a tah_nodes entry)", NodeRecord{}},
		{"node.claimed.json", "Claim notice (body of a message on tah.nodes.<node>.claimed, from the node that claimed a session to its previous owner)", ClaimNotice{}},
		{"tool.request.json", "Tool request (body of a request to tah.tool.<name>)", ToolRequest{}},
		{"tool.result.json", "Tool result (body of a tool service's reply, and a stored call's result)", ToolResult{}},
		{"tool.cancel.json", "Tool cancel (body of a message on tah.tool.cancel.<call token>)", ToolCancel{}},
		{"tool.stored.json", "Stored tool call (a value of the KV bucket tah_tool_results)", StoredCall{}},
		{"credential.json", "Credential (a value of the KV bucket tah_creds, and an entry of tah.api.creds.ls)", Credential{}},
		{"quota.error.json", "Quota error (body of an API error of code 429: over a tenant's quota)", QuotaError{}},
	}
	for _, e := range append(Endpoints(), CredsEndpoints()...) {
		out = append(out,
			Schema{"api." + e.Name + ".request.json", "Request of tah.api." + e.Name, e.Request},
			Schema{"api." + e.Name + ".reply.json", "Reply of tah.api." + e.Name, e.Reply})
	}
	return out
}
