package share

// SetTimeouts replaces the group's session timeout and heartbeat interval
// (a group config's override, or the broker's default when it is
// removed). They apply from each member's next heartbeat: a session
// deadline already set stands until then, as in Kafka. Values that
// cannot work (heartbeat < 1, session <= heartbeat) are ignored; the
// config layer refuses them before they get here.
func (g *Group) SetTimeouts(sessionMs, heartbeatMs int32) {
	if heartbeatMs < 1 || sessionMs <= heartbeatMs {
		return
	}
	g.cfg.SessionTimeoutMs, g.cfg.HeartbeatIntervalMs = sessionMs, heartbeatMs
}

// Timeouts are the session timeout and heartbeat interval in force.
func (g *Group) Timeouts() (sessionMs, heartbeatMs int32) {
	return g.cfg.SessionTimeoutMs, g.cfg.HeartbeatIntervalMs
}
