package mcp

import "os"

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
