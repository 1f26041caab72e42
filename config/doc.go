// Package config is the one configuration of a TAH node: defaults, then a JSON
// file, then environment variables (TAH_*), then command-line flags, each
// overriding the one before; Validate names the setting at fault. It imports
// none of the parts it configures (no NATS server): node.Configure turns the
// settings into a node, and node.Check adds to Validate the checks only the
// parts can make (the deny globs, the approval policy, the MCP servers' file,
// the bus).
//
//	cfg := config.Default()
//	if err := cfg.Load(path, os.LookupEnv); err != nil { ... } // file + env
//	fs := flag.NewFlagSet("tah-node", flag.ContinueOnError)
//	cfg.RegisterFlags(fs)
//	fs.Parse(os.Args[1:])
//	if err := node.Check(cfg); err != nil { ... } // cfg.Validate and the parts' checks
package config
