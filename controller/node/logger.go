package node

import (
	"fmt"

	"github.com/rs/zerolog"
)

// raftLogger adapts zerolog to raft.Logger. raft's Info (elections, term
// changes) goes to Debug: the node logs role changes itself at Info.
type raftLogger struct{ l zerolog.Logger }

func (r raftLogger) Debug(v ...any)              { r.l.Debug().Msg(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(f string, v ...any)   { r.l.Debug().Msgf(f, v...) }
func (r raftLogger) Info(v ...any)               { r.l.Debug().Msg(fmt.Sprint(v...)) }
func (r raftLogger) Infof(f string, v ...any)    { r.l.Debug().Msgf(f, v...) }
func (r raftLogger) Warning(v ...any)            { r.l.Warn().Msg(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(f string, v ...any) { r.l.Warn().Msgf(f, v...) }
func (r raftLogger) Error(v ...any)              { r.l.Error().Msg(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(f string, v ...any)   { r.l.Error().Msgf(f, v...) }
func (r raftLogger) Fatal(v ...any)              { r.Panic(v...) }
func (r raftLogger) Fatalf(f string, v ...any)   { r.Panicf(f, v...) }

// Panic logs and panics: raft calls it on broken invariants.
func (r raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	r.l.Error().Msg(s)
	panic(s)
}

// Panicf is Panic with a format.
func (r raftLogger) Panicf(f string, v ...any) { r.Panic(fmt.Sprintf(f, v...)) }
