package mock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/llmtest"
	"github.com/tah-dev/tah/llm/mock"
)

// reply turns an answer of the suite into a scripted reply.
func reply(a llmtest.Answer) mock.Reply {
	if a.Status != 0 && a.Status != 200 {
		return mock.Fail(a.Status, a.Message)
	}
	r := mock.Stream(a.Text...)
	if len(a.Text) == 0 {
		r = mock.Reply{}
	}
	if len(a.Reasoning) > 0 {
		r = r.WithReasoning(strings.Join(a.Reasoning, ""))
	}
	for _, c := range a.Calls {
		r = r.AndCall(c.Name, strings.Join(c.Args, ""))
		r.ToolCalls[len(r.ToolCalls)-1].ID = c.ID
	}
	if a.Usage != (llmtest.Usage{}) {
		r = r.WithUsage(llm.Usage{InputTokens: a.Usage.Input, OutputTokens: a.Usage.Output, CacheReadTokens: a.Usage.CacheRead})
	}
	if a.Model != "" {
		r = r.WithModel(a.Model)
	}
	switch a.Fault {
	case llmtest.FaultError:
		r = r.ThenFail(0, a.Message)
	case llmtest.FaultHang:
		r = r.Holding(time.Hour)
	}
	return r
}

func TestSuite(t *testing.T) {
	const noTransport = "the mock has no transport: nothing to retry or to drop"
	llmtest.Run(t, llmtest.Harness{
		Start: func(t *testing.T, answers ...llmtest.Answer) llmtest.Backend {
			var replies []mock.Reply
			for _, a := range answers {
				replies = append(replies, reply(a))
			}
			p := mock.Scripted(replies...)
			return llmtest.Backend{Provider: p, Requests: func() int { return len(p.Calls()) }}
		},
		Skip: map[string]string{
			"ErrorFrameBeforeOutputRetried":    noTransport,
			"RateLimitedRetryAfterThenSuccess": noTransport,
			"ServerErrorBackoffThenSuccess":    noTransport,
			"RetriesExhausted":                 noTransport,
			"DroppedMidStream":                 noTransport,
			"DroppedBeforeOutputRetried":       noTransport,
			"DroppedGenerateRetried":           noTransport,
			"KeyRedactedFromErrors":            "the mock has no key to send or to leak",
		},
	})
}
