// Package config is the one configuration of a TAH node: defaults, then a JSON
// file, then environment variables (TAH_*), then command-line flags, each
// overriding the one before; Validate names the setting at fault.
//
//	cfg := config.Default()
//	if err := cfg.Load(path, os.LookupEnv); err != nil { ... } // file + env
//	fs := flag.NewFlagSet("tah-node", flag.ContinueOnError)
//	cfg.RegisterFlags(fs)
//	fs.Parse(os.Args[1:])
//	if err := cfg.Validate(); err != nil { ... }
package config
