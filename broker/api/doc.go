// Package api is the registry of the Kafka API keys a node serves, and
// what every key's registration needs: the versions each kind of listener
// serves, the handler, the authorization rule and the helpers rules are
// built from, whether the key mutates (and so is always audited), and the
// error response a forwarding broker or a non-active controller answers
// with.
//
// Why a package of its own: the broker is built as rooms, a package per
// concern (groups, transactions, administration, the data path), and each
// room registers its keys here, bound to the narrow host it runs on. The
// broker's one dispatch (broker/dispatch.go) reads nothing but a Registry,
// on the client listeners and on the CONTROLLER listener alike, so no room
// can serve a key without a rule and no listener can skip the authorizer.
//
// Files:
//   - doc.go: this comment.
//   - registry.go: Entry, Range, Handler, Registry and its version tables.
//   - conn.go: Conn, what a handler knows of the request's connection.
//   - forward.go: Forward, the one way an admin request reaches the
//     active controller and its answer waits for this node's image.
//   - authz.go: Rule, Authz and the building blocks of rules (whole-request
//     denials, per-resource sifting, fixes that add denials back).
//   - audit.go: Audit, the audit log: a line per denial and per mutating
//     request, written by one goroutine apart from the requests.
package api
