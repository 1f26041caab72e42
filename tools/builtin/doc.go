// Package builtin holds TAH's built-in tools, confined to a root directory:
// list_files and read_file (the specification's listFilesTool(".") and
// readFileTool(".")), and write_file, which is off unless configured.
//
// Confinement: every file operation goes through an os.Root, which refuses by
// construction any path that leaves the root, by "..", an absolute path, or a
// symlink (checked at each step of the resolution, so a symlink swapped in during
// the call cannot escape either). Before that, paths are refused with a clear
// message when they contain NUL bytes, backslashes, URL escapes such as %2e%2e,
// invisible or control characters, characters that look like '.' or '/', or
// invalid UTF-8. An absolute path is accepted only when it lies inside the root.
// Named pipes and devices are never opened for reading.
//
// Secrets: inside the root, the tools refuse the node's data directory and every
// credential file (SecretPatterns: credentials.json, node.json, *.creds, *.nk,
// *.seed, *.jwt, and any directory named .tah), plus a deny list of globs
// (Protect). A refused path is refused however it is named ("..", an absolute
// path, a symlink to it or into the data directory, another case), for writing
// too; the model reads an ordinary tool error ("path "x" is not readable by
// tools: protected by the node") that does not say what the path holds. Listings
// leave protected entries out, without a note: a name can be a secret too.
//
// Determinism and limits: listings are sorted by name, and cut at Limits with an
// explicit marker line in square brackets; read_file returns at most a number of
// lines and bytes and says which offset to continue from; binary files are
// described (size and a type guess) rather than dumped.
//
// The smallest use:
//
//	reg := tools.MustRegistry(builtin.ListFiles("."), builtin.ReadFile("."))
//
// or, with write_file, artifacts and the node's data directory kept out of reach:
//
//	reg := tools.MustRegistry(builtin.Tools(builtin.Config{Root: ".", Write: true, Artifacts: store,
//		Protect: builtin.Protect{DataDir: ".tah", Deny: []string{"*.pem"}}})...)
package builtin
