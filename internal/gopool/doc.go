// Package gopool runs functions on goroutines that it keeps for a while
// after their last one.
//
// A new goroutine starts with the smallest stack (8 KB) and grows it by
// copying the whole stack each time a call goes deeper than it: a goroutine
// started for one short job that reaches encoding/json, a tool's input
// check or an LLM provider's stream pays those copies every time. Measured
// on TAH's hot paths: a third of what the tool runner cost a call to a tool
// that does nothing (actors/toolrunner's BenchmarkExecute), and 5-6% of a
// node's CPU under bench row 3's load, where each LLM call ran on a goroutine
// of its own. A worker of a Pool keeps the stack it grew.
//
// Go's runtime offers adaptive starting stacks (GODEBUG
// adaptivestackstart=1); measured on the same benchmark it made the runner
// slower (every goroutine of the process starts bigger), so TAH does not
// set it.
//
// A Pool never makes a function wait for a worker: it starts a new one when
// none is idle, so it bounds nothing; what bounds the work is its caller's.
// Every worker has an owner and a stop: the Pool's owner calls Stop (idle
// workers end at once, busy ones after their function) and Wait.
package gopool
