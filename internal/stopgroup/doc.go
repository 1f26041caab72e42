// Package stopgroup runs stops that may wait on goroutines of their own, and
// lets their owner wait for them once, when it closes.
//
// nats.go's Stop of an ordered consumer waits for the consumer's lock, which
// its reset holds while it makes the consumer again after a missed heartbeat
// (a request of up to 10 s, tried again while the stream has no leader). A
// bus tail or a client's Follower that stopped its consumers in place waited
// that long to stop, a node's projector 15 s and more beside a dead server.
// Run through a Group, those stops go on in the background; the owner closes
// its connections (which ends any request they wait on) and then calls Wait.
//
// A sync.WaitGroup alone does not do: a stop may be asked for while the owner
// waits (a tail that fails as its Bus closes), and a WaitGroup's Add from zero
// must not race its Wait. A Group runs a stop asked for after Wait in place.
package stopgroup
