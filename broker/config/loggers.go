package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/controller"
)

// Fjord's loggers as Kafka's BROKER_LOGGER resources. There is one logger,
// "root": the node's level (APIHost.LogLevel), which every logger the node
// derives from its own obeys (broker/loggers.go says how). Levels use
// log4j's names, which Kafka's tools send. Like Kafka's, a level set at
// run time is not stored and lasts until the process restarts.

const rootLogger = "root"

// log4jLevels maps log4j's level names to zerolog's.
var log4jLevels = map[string]zerolog.Level{
	"OFF": zerolog.Disabled, "FATAL": zerolog.FatalLevel, "ERROR": zerolog.ErrorLevel,
	"WARN": zerolog.WarnLevel, "INFO": zerolog.InfoLevel, "DEBUG": zerolog.DebugLevel,
	"TRACE": zerolog.TraceLevel, "ALL": zerolog.TraceLevel,
}

// log4jName is a zerolog level's log4j name.
func log4jName(l zerolog.Level) string {
	switch l {
	case zerolog.Disabled, zerolog.NoLevel:
		return "OFF"
	case zerolog.FatalLevel, zerolog.PanicLevel:
		return "FATAL"
	case zerolog.ErrorLevel:
		return "ERROR"
	case zerolog.WarnLevel:
		return "WARN"
	case zerolog.InfoLevel:
		return "INFO"
	case zerolog.DebugLevel:
		return "DEBUG"
	}
	return "TRACE"
}

// loggerOp is one IncrementalAlterConfigs operation on a logger.
type loggerOp struct {
	name  string
	op    controller.ConfigOp
	value *string
}

// alterLoggers applies (unless validateOnly) the operations on h's
// loggers, all or none, answering as Kafka does.
func alterLoggers(h APIHost, resource string, ops []loggerOp, validateOnly bool) (int16, *string) {
	fail := func(e *kerr.Error, format string, args ...any) (int16, *string) {
		m := fmt.Sprintf(format, args...)
		return e.Code, &m
	}
	if id := h.Static().NodeID; resource != strconv.Itoa(int(id)) {
		return fail(kerr.InvalidRequest, "BROKER_LOGGER %q: this is broker %d; send it to the broker it names", resource, id)
	}
	level := h.LogLevel()
	for _, o := range ops {
		if o.name != rootLogger {
			return fail(kerr.InvalidConfig, "logger %q does not exist (Fjord has one logger: %q)", o.name, rootLogger)
		}
		switch o.op {
		case controller.OpSet:
			if o.value == nil {
				return fail(kerr.InvalidConfig, "logger %s: SET needs a level", o.name)
			}
			l, ok := log4jLevels[strings.ToUpper(strings.TrimSpace(*o.value))]
			if !ok {
				return fail(kerr.InvalidConfig, "logger %s: %q is not a log level (OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE, ALL)", o.name, *o.value)
			}
			level = l
		case controller.OpDelete:
			return fail(kerr.InvalidConfig, "removing the level of the root logger is not allowed")
		default:
			return fail(kerr.InvalidConfig, "logger %s: only SET applies to a logger", o.name)
		}
	}
	if !validateOnly && level != h.LogLevel() {
		h.Log().Info().Str("logger", rootLogger).Str("level", log4jName(level)).Msg("log level changed")
		h.SetLogLevel(level)
	}
	return 0, nil
}
