package localnode

import "fmt"

// LockFile is the file a running node holds locked in its data directory
// (Lock), with its process id in it.
const LockFile = "node.lock"

// InUseError is Lock's error when another process holds the data
// directory's lock.
type InUseError struct {
	Dir string
	PID int // the holder's process id, 0 when unknown
}

func (e *InUseError) Error() string {
	who := "another node"
	if e.PID > 0 {
		who = fmt.Sprintf("another node (pid %d)", e.PID)
	}
	return fmt.Sprintf("%s already uses the data directory %s", who, e.Dir)
}
