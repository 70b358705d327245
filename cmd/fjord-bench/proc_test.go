package main

import "testing"

// TestFreePortsDistinct: a cluster's nodes are given ports from one call,
// and no two may be the same (closing each listener before the next ask
// lets the kernel repeat one).
func TestFreePortsDistinct(t *testing.T) {
	ports, err := freePorts(64)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("port %d given twice or invalid in %v", p, ports)
		}
		seen[p] = true
	}
	if len(ports) != 64 {
		t.Fatalf("%d ports, want 64", len(ports))
	}
}
