// Command fjord runs a Fjord node: a Kafka-compatible broker. With no flags it
// is a single node on 127.0.0.1:9092 keeping its data in ./fjord-data.
//
//	fjord [--config server.properties] [--override key=value ...]
//	fjord health [--brokers N] [--wait] [--timeout 60s] [--bootstrap host:port] [-X key=value ...]
//	fjord topic|group|produce|consume|cluster|broker|verify ... (a Kafka client; see usage())
//
// Configuration uses Kafka's property names; see docs/configuration.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"

	"github.com/fjordlog/fjord/broker"
	"github.com/fjordlog/fjord/broker/remotestore"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) > 0 {
		if code, ok := runClient(args[0], args[1:]); ok {
			return code
		}
	}
	l, err := loadConfig(args, os.Environ())
	if errors.Is(err, errHelp) {
		fmt.Fprint(os.Stdout, usage())
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fjord: %v\n", err)
		return 2
	}
	log := newLogger(l.logLevel)
	if len(l.ignored) > 0 {
		log.Warn().Strs("keys", l.ignored).Msg("configuration with no meaning for Fjord, ignored (JVM, ZooKeeper, thread and buffer sizes, metric reporters, vendor settings)")
	}
	for _, w := range l.warnings {
		log.Warn().Str("key", w.key).Str("from", w.origin).Str("why", w.why).Msg("configuration not supported yet, ignored: " + w.key)
	}
	l.cfg.Static = l.static
	// Tiered storage: a missing bucket or refused credentials stop
	// start-up here, before the node joins the cluster.
	if err := remotestore.Check(context.Background(), &l.cfg, log); err != nil {
		log.Error().Err(err).Msg("start-up failed")
		return 1
	}
	b, err := broker.New(l.cfg, log)
	if err != nil {
		log.Error().Err(err).Msg("start-up failed")
		return 1
	}
	b.Start()

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	s := <-sigs
	log.Info().Str("signal", s.String()).Msg("shutting down: finishing in-flight requests, flushing logs")
	go func() {
		// A second signal means: stop now.
		<-sigs
		log.Warn().Msg("second signal: exiting without a clean shutdown")
		os.Exit(1)
	}()
	start := time.Now()
	if err := b.Close(); err != nil {
		log.Error().Err(err).Msg("shutdown")
		return 1
	}
	log.Info().Dur("took", time.Since(start)).Msg("stopped")
	return 0
}

// runClient runs a client subcommand; ok is false when name is not one.
func runClient(name string, args []string) (code int, ok bool) {
	switch name {
	case "health":
		return health(args, os.Environ(), os.Stdout), true
	case "topic":
		return topicCmd(args, os.Stdout, os.Stderr), true
	case "group":
		return groupCmd(args, os.Stdout, os.Stderr), true
	case "produce":
		return produceCmd(args, os.Stdin, os.Stdout, os.Stderr), true
	case "consume":
		return consumeCmd(args, os.Stdout, os.Stderr), true
	case "cluster":
		return clusterCmd(args, os.Stdout, os.Stderr), true
	case "broker":
		return brokerCmd(args, os.Stdout, os.Stderr), true
	case "verify":
		return verifyCmd(args, os.Stdout, os.Stderr, term.IsTerminal(int(os.Stdout.Fd()))), true
	}
	return 0, false
}

// newLogger writes JSON lines, or readable lines when stderr is a terminal.
// The level is FJORD_LOG_LEVEL, else the image convention's (configured,
// a zerolog level name), else info.
func newLogger(configured string) zerolog.Logger {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	level := zerolog.InfoLevel
	for _, v := range []string{os.Getenv("FJORD_LOG_LEVEL"), configured} {
		if l, err := zerolog.ParseLevel(v); v != "" && err == nil {
			level = l
			break
		}
	}
	var w = zerolog.New(os.Stderr)
	if term.IsTerminal(int(os.Stderr.Fd())) {
		w = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"})
	}
	// The broker takes this level as its node's, which
	// IncrementalAlterConfigs on the BROKER_LOGGER "root" changes at run
	// time (broker/loggers.go).
	return w.Level(level).With().Timestamp().Logger()
}
