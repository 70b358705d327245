package broker

import (
	"sync/atomic"

	"github.com/rs/zerolog"
)

// A node's log level: the level of every logger the node derives from
// b.log (nodeLevel, a hook: the loggers themselves pass everything). It is
// the node's, not the process's: zerolog's global level would change
// every node of an in-process cluster (brokertest) at once, and a request
// must not change process-wide state. IncrementalAlterConfigs on the
// BROKER_LOGGER "root" changes it at run time (broker/config/loggers.go).

// nodeLevel is a node's log level, shared by every logger derived from
// the node's: a hook that discards events below it.
type nodeLevel struct{ l atomic.Int32 }

func (n *nodeLevel) get() zerolog.Level  { return zerolog.Level(n.l.Load()) }
func (n *nodeLevel) set(l zerolog.Level) { n.l.Store(int32(l)) }

func (n *nodeLevel) Run(e *zerolog.Event, level zerolog.Level, _ string) {
	if level != zerolog.NoLevel && level < n.get() {
		e.Discard()
	}
}

// nodeLogger is log with its level moved into a nodeLevel the node owns:
// the returned logger passes everything to the hook, which applies the
// level log came with until a BROKER_LOGGER change sets another.
func nodeLogger(log zerolog.Logger, level *nodeLevel) zerolog.Logger {
	level.set(log.GetLevel())
	return log.Level(zerolog.TraceLevel).Hook(level)
}
