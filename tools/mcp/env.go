package mcp

import (
	"bytes"
	"log/slog"
	"os"
	"sync"
)

// inheritedEnv names the variables a stdio server inherits from the
// process that runs the bridge: what a program needs to start, never the
// node's secrets (an LLM API key). The server's own "env" comes on top.
var inheritedEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE",
	"TMPDIR", "TZ", "SYSTEMROOT", "APPDATA", "LOCALAPPDATA", "USERPROFILE", "PROGRAMFILES",
	"NODE_PATH", "NPM_CONFIG_CACHE", "npm_config_cache", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
}

// serverEnv is the environment of a stdio server: inheritedEnv, then extra.
func serverEnv(extra map[string]string) []string {
	var env []string
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// logWriter turns what a stdio server writes on its stderr into log records,
// a line each: servers print their banners and failures there.
type logWriter struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

// maxLine bounds a line kept waiting for its end.
const maxLine = 4096

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) > maxLine {
				w.log.Info("mcp server stderr", "line", string(w.buf))
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		if line := bytes.TrimSpace(w.buf[:i]); len(line) > 0 {
			w.log.Info("mcp server stderr", "line", string(line))
		}
		w.buf = w.buf[i+1:]
	}
}
