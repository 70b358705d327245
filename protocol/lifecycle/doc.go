// Package lifecycle holds the three building blocks every long-running part
// of Fjord shares, one of each:
//
//   - group.go: Group, the one way a package starts the goroutines it owns.
//     Go refuses once Stop (or Cancel) has begun; Stop cancels the group's
//     context and waits for every goroutine Go started, and Stopped gives
//     the same wait as a channel, to bound it (house style 8: every
//     goroutine is tracked).
//   - backoff.go: Backoff, a pure retry schedule (Initial, doubling up to
//     Max) as a function of the number of failures in a row.
//   - sleep.go: Sleep, a pause that ends early when a context does.
//
// # Where it lives
//
// The top-level folders are fixed, and these blocks must be importable by
// broker/..., controller/... and protocol itself (its accept loop backs
// off). protocol is the one package the dependency rule lets every layer
// import (broker, controller and group "may also import protocol"), so a
// subpackage of it that imports nothing of Fjord adds no edge the rule
// forbids: whatever may import protocol may import this. Under storage
// instead, protocol would have to import storage/..., an edge between two
// packages the rule keeps apart; and storage starts no goroutines.
//
// It must stay a leaf: it imports only the standard library (deps_test.go
// checks), so nothing it is built into can form a cycle.
package lifecycle
