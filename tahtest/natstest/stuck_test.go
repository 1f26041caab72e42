package natstest

import (
	"strings"
	"testing"
)

func TestWaitedHeaders(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]string{
		"goroutine 7 [semacquire, 3 minutes]:":                             "semacquire 3",
		"goroutine 12 [sync.Mutex.Lock, 1 minutes]:":                       "sync.Mutex.Lock 1",
		"goroutine 9 [chan send, 2 minutes, locked to thread]:":            "chan send 2",
		"goroutine 3 [sync.RWMutex.RLock, 10 minutes]:":                    "sync.RWMutex.RLock 10",
		"goroutine 4 [select]:":                                            "",
		"goroutine 5 [running]:":                                           "",
		"goroutine 6 [chan receive (nil chan), 4 minutes]:":                "chan receive (nil chan) 4",
		"goroutine 8 [sync.WaitGroup.Wait, synctest bubble 1, 2 minutes]:": "sync.WaitGroup.Wait 2",
	} {
		got := ""
		if m := waitedRE.FindStringSubmatch(header); m != nil {
			got = m[1] + " " + m[2]
		}
		if got != want {
			t.Errorf("%q: %q, want %q", header, got, want)
		}
	}
	if blocked("select") || blocked("IO wait") || blocked("chan receive") || !blocked("sync.Mutex.Lock") || !blocked("semacquire") {
		t.Error("blocked: the waits of a deadlock only")
	}
	stack := "github.com/nats-io/nats-server/v2/server.(*stream).info(0xc000123, 0x1)\n\t/go/pkg/mod/x/stream.go:1234 +0x1f\ncreated by main.main in goroutine 1\n\t/src/main.go:9 +0x2a"
	if got := normalizeStack(stack); strings.Contains(got, "0xc000123") || strings.Contains(got, "+0x") || !strings.Contains(got, "server.(*stream).info") || !strings.Contains(got, "stream.go:1234") {
		t.Errorf("normalized: %q", got)
	}
}
