package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// The GenAI operation names TAH's spans use (gen_ai.operation.name); a span's
// name is the operation, then its subject ("chat gpt-4o", "execute_tool
// read_file", "invoke_agent tah").
const (
	OperationInvokeAgent = "invoke_agent" // a turn
	OperationChat        = "chat"         // an LLM call
	OperationExecuteTool = "execute_tool" // a tool call
)

// TAH's own attributes, under "tah.".
const (
	KeySession   = attribute.Key("tah.session.id") // beside gen_ai.conversation.id, for searches by TAH's name
	KeyTurn      = attribute.Key("tah.turn")
	KeyStep      = attribute.Key("tah.step.id")
	KeyNode      = attribute.Key("tah.node")
	KeyEpoch     = attribute.Key("tah.epoch")
	KeyInput     = attribute.Key("tah.input.id")
	KeyRunner    = attribute.Key("tah.tool.runner")
	KeyStatus    = attribute.Key("tah.turn.status")
	KeyCode      = attribute.Key("tah.turn.code")
	KeyCostUSD   = attribute.Key("tah.cost.usd")
	KeyUnpriced  = attribute.Key("tah.cost.unpriced")
	KeyTTFT      = attribute.Key("tah.llm.time_to_first_token_ms")
	KeyResumedBy = attribute.Key("tah.resumed.node")
	// The limit a turn reached, on its tah.budget.reached event.
	KeyBudgetScope = attribute.Key("tah.budget.scope")
	KeyBudgetKind  = attribute.Key("tah.budget.kind")
	KeyBudgetFrom  = attribute.Key("tah.budget.from")
	KeyBudgetLimit = attribute.Key("tah.budget.limit")
	KeyBudgetSpent = attribute.Key("tah.budget.spent")
)

// Node is the tah.node attribute.
func Node(id string) attribute.KeyValue { return KeyNode.String(id) }

// The GenAI attributes TAH sets, re-exported so that callers import one
// package for them.
var (
	KeyOperation     = semconv.GenAIOperationNameKey
	KeyProvider      = semconv.GenAIProviderNameKey
	KeyConversation  = semconv.GenAIConversationIDKey
	KeyAgentName     = semconv.GenAIAgentNameKey
	KeyRequestModel  = semconv.GenAIRequestModelKey
	KeyResponseModel = semconv.GenAIResponseModelKey
	KeyInputTokens   = semconv.GenAIUsageInputTokensKey
	KeyOutputTokens  = semconv.GenAIUsageOutputTokensKey
	KeyCacheRead     = semconv.GenAIUsageCacheReadInputTokensKey
	KeyFinish        = semconv.GenAIResponseFinishReasonsKey
	KeyToolName      = semconv.GenAIToolNameKey
	KeyToolCallID    = semconv.GenAIToolCallIDKey
	KeyToolType      = semconv.GenAIToolTypeKey
	KeyInputMessages = semconv.GenAIInputMessagesKey
	KeyOutput        = semconv.GenAIOutputMessagesKey
	KeyToolArguments = semconv.GenAIToolCallArgumentsKey
	KeyToolResult    = semconv.GenAIToolCallResultKey
	KeyErrorType     = semconv.ErrorTypeKey
)

// SchemaURL is the semantic conventions' schema TAH's spans follow.
const SchemaURL = semconv.SchemaURL
