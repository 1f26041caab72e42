package inspector

import "testing"

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{"/s/s_1": "/s/s_1", "//evil.example/": "/", "https://evil.example": "/", "/\\evil": "/", "": "/"} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLoopback(t *testing.T) {
	for host, want := range map[string]bool{"127.0.0.1:9464": true, "localhost": true, "[::1]:80": true, "LOCALHOST:1": true,
		":9464": false, "0.0.0.0:9464": false, "evil.example": false, "10.0.0.1:9464": false, "": false} {
		if got := Loopback(host); got != want {
			t.Errorf("Loopback(%q) = %v", host, got)
		}
	}
}
