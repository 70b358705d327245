// Package httpserve is the plumbing the node's HTTP listeners share (the
// metrics port and the web console): a server per listener, its
// goroutines started through the owner's lifecycle.Group, closed when
// that group stops.
//
// It takes the group and a logger, not the broker, so a listener can be
// served by whoever owns one; it knows nothing of what it serves.
//
// Files:
//
//   - serve.go: Listen and Serve.
package httpserve
