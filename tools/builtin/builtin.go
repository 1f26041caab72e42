package builtin

import "github.com/tah-dev/tah/tools"

// Config chooses the built-in tools of a runtime.
type Config struct {
	// Root is the directory the tools are confined to.
	Root string
	// Limits bound the tools; zero fields mean DefaultLimits.
	Limits Limits
	// Write offers write_file too. Off by default.
	Write bool
	// Artifacts receives a copy of what write_file writes; nil leaves it to
	// the store of the executor that runs it, if any.
	Artifacts tools.ArtifactStore
	// Protect names what the tools refuse inside Root (the node's data directory,
	// a deny list) besides SecretPatterns, which they always refuse.
	Protect Protect
}

// Tools returns list_files and read_file, and write_file when cfg.Write is set.
func Tools(cfg Config) []tools.Tool {
	ts := []tools.Tool{
		&ListFilesTool{Root: cfg.Root, Limits: cfg.Limits, Protect: cfg.Protect},
		&ReadFileTool{Root: cfg.Root, Limits: cfg.Limits, Protect: cfg.Protect},
	}
	if cfg.Write {
		ts = append(ts, &WriteFileTool{Root: cfg.Root, Limits: cfg.Limits, Artifacts: cfg.Artifacts, Protect: cfg.Protect})
	}
	return ts
}
