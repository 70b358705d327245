package api

import (
	"context"
	"time"
)

// CtlListener is Conn.Listener on the CONTROLLER listener, which is not one
// of the advertised client listeners.
const CtlListener = -1

// Conn is what a handler knows of the request's connection.
type Conn struct {
	Ctx        context.Context
	ClientID   string
	ClientHost string
	// Listener is the index of the client listener among the node's
	// advertised listeners, or CtlListener.
	Listener int
	Version  int16
	// Principal is the connection's principal, "User:<name>" (from
	// protocol.Request.Principal); "" counts as User:ANONYMOUS.
	Principal string
	// Fail closes the connection after the responses already owed; for
	// failures that cannot be answered (acks=0 produce errors, as Kafka does).
	Fail func(error)
	// Mute stops reading the connection for a while (quota throttling);
	// nil when the front end offers none.
	Mute func(time.Duration)
}

// Throttle mutes the connection for ms milliseconds (a quota's throttle
// time); nothing when ms <= 0 or the front end cannot mute.
func (cc *Conn) Throttle(ms int64) {
	if ms > 0 && cc.Mute != nil {
		cc.Mute(time.Duration(ms) * time.Millisecond)
	}
}
