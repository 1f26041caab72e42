package natstest

import (
	"fmt"
	"net"
	"os"
	"testing"
)

// FreePorts hands out distinct ports, free to bind, below the kernel's
// ephemeral range where the machine has one (Linux): no outgoing connection
// of a parallel suite can take one of them between the pick and the bind.
func TestFreePortsAreDistinctAndOutsideTheEphemeralRange(t *testing.T) {
	t.Parallel()
	lo := 0
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if _, err := fmt.Sscanf(string(raw), "%d", &lo); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int]bool{}
	for range 3 {
		ports, err := FreePorts(6)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
			if lo > portsFrom && (p < portsFrom || p >= lo) {
				t.Errorf("port %d: want one in [%d, %d)", p, portsFrom, lo)
			}
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				t.Fatalf("port %d not free: %v", p, err)
			}
			l.Close()
		}
	}
}
