package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/tlsconf"
)

// health is `fjord health`: exit 0 when the local node serves — its client
// listener answers ApiVersions and Metadata, and that Metadata lists this
// node (registered and unfenced) — for a compose healthcheck in an image
// without a shell. The node's address and id come from the same
// configuration the node reads (--config, KAFKA_* environment,
// --override), so the check needs no flags inside the node's container;
// on a TLS or SASL listener it connects as the node itself (its keystore,
// its own login module's username and password).
//
//	fjord health [--bootstrap host:port] [--brokers N] [--wait] [--timeout 60s] [--config F] [--override k=v ...] [-X key=value ...]
//
// --brokers N also wants N brokers in the cluster's metadata; --wait
// retries (every 250 ms) until the check passes or --timeout ends. -X
// (and -F) client properties, as the client subcommands take them,
// replace the node's own identity.
func health(args []string, environ []string, out io.Writer) int {
	fs := flag.NewFlagSet("fjord health", flag.ContinueOnError)
	fs.SetOutput(out)
	bootstrap := fs.String("bootstrap", "", "host:port of the node to check (default: its first client listener)")
	fs.StringVar(bootstrap, "b", "", "the same as --bootstrap")
	fs.StringVar(bootstrap, "bootstrap-server", "", "the same as --bootstrap")
	props := &clientProps{}
	fs.Func("X", "client property `key=value`, as for the client subcommands; any given replace the node's own identity", props.setFlag)
	fs.Func("F", "read client properties from `file`", props.readFile)
	fs.Func("command-config", "the same as -F", props.readFile)
	brokers := fs.Int("brokers", 0, "also want at least this many brokers in the metadata")
	wait := fs.Bool("wait", false, "retry until healthy or --timeout")
	timeout := fs.Duration("timeout", 60*time.Second, "with --wait: how long to keep trying; else the bound on one check")
	var passthrough []string
	fs.Func("config", "properties file the node reads", func(v string) error {
		passthrough = append(passthrough, "--config", v)
		return nil
	})
	fs.Func("override", "key=value the node reads", func(v string) error {
		passthrough = append(passthrough, "--override", v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg, err := LoadConfig(passthrough, environ)
	if err != nil {
		fmt.Fprintf(out, "fjord health: %v\n", err)
		return 2
	}
	addr := *bootstrap
	var dialOpts []kgo.Opt
	if len(props.m) > 0 {
		// Connect as told, not as the node.
		if dialOpts, err = props.options(); err != nil {
			fmt.Fprintf(out, "fjord health: %v\n", err)
			return 2
		}
	}
	if addr == "" {
		var name string
		if addr, name, err = localAddr(cfg); err != nil {
			fmt.Fprintf(out, "fjord health: %v\n", err)
			return 2
		}
		if len(props.m) == 0 {
			if dialOpts, err = healthTLS(cfg, name); err != nil {
				fmt.Fprintf(out, "fjord health: %v\n", err)
				return 2
			}
			saslOpts, err := healthSASL(cfg, name)
			if err != nil {
				fmt.Fprintf(out, "fjord health: %v\n", err)
				return 2
			}
			dialOpts = append(dialOpts, saslOpts...)
		}
	}
	deadline := time.Now().Add(*timeout)
	for {
		try := time.Now().Add(5 * time.Second)
		if try.After(deadline) {
			try = deadline
		}
		ctx, cancel := context.WithDeadline(context.Background(), try)
		err = checkServing(ctx, addr, cfg.NodeID, *brokers, dialOpts...)
		cancel()
		if err == nil {
			fmt.Fprintf(out, "fjord health: node %d at %s serving\n", cfg.NodeID, addr)
			return 0
		}
		if !*wait || time.Now().After(deadline) {
			fmt.Fprintf(out, "fjord health: %s: %v\n", addr, err)
			return 1
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// localAddr is the address of the node's first client listener, reached
// from inside its own host (an any-address bind is dialled on loopback).
func localAddr(cfg config.Config) (addr, name string, err error) {
	ls, err := config.ParseListeners(cfg.Listeners)
	if err != nil {
		return "", "", err
	}
	for _, l := range ls {
		if slices.Contains(strings.Split(cfg.ControllerListenerNames, ","), l.Name) {
			continue
		}
		host := l.Host
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		return net.JoinHostPort(host, strconv.Itoa(int(l.Port))), l.Name, nil
	}
	return "", "", errors.New("no client listener in listeners")
}

// healthTLS dials a TLS listener as the node's own client: presenting its
// keystore's certificate (for ssl.client.auth=required) and, since it
// dials its own process on loopback, not checking the server's
// certificate, which names the advertised host and may chain to a CA only
// clients hold.
func healthTLS(cfg config.Config, listener string) ([]kgo.Opt, error) {
	if p := cfg.ListenerProtocol(listener); p != "SSL" && p != "SASL_SSL" {
		return nil, nil
	}
	src, err := tlsconf.Load(tlsconf.ForListener(cfg.SSL, listener))
	if err != nil {
		return nil, err
	}
	c := src.Client().Clone()
	c.InsecureSkipVerify, c.VerifyConnection = true, nil //nolint:gosec // our own process on loopback
	return []kgo.Opt{kgo.DialTLSConfig(c)}, nil
}

// healthSASL authenticates on a SASL listener as the node itself: the
// username and password of the listener's login module (the JAAS file
// KAFKA_OPTS names, sasl.jaas.config ...), with the inter-broker mechanism
// when the listener enables it. Without it a SASL listener answers only
// ApiVersions and SaslHandshake, and a healthcheck could never pass.
func healthSASL(cfg config.Config, listener string) ([]kgo.Opt, error) {
	if p := cfg.ListenerProtocol(listener); p != "SASL_PLAINTEXT" && p != "SASL_SSL" {
		return nil, nil
	}
	mech, err := cfg.SASL.SelfMechanism(listener)
	if err != nil {
		return nil, err
	}
	m, _, err := cfg.SASL.ClientMechanism(listener, mech)
	if err != nil {
		return nil, fmt.Errorf("listener %s: the node's own %s identity: %w", listener, mech, err)
	}
	return []kgo.Opt{kgo.SASL(m)}, nil
}

// checkServing asks addr for ApiVersions and Metadata and wants node id
// among the brokers, and at least want brokers.
func checkServing(ctx context.Context, addr string, id int32, want int, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	node := cl.SeedBrokers()[0]
	if _, err := node.Request(ctx, kmsg.NewPtrApiVersionsRequest()); err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // no topics: brokers only
	kresp, err := node.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("Metadata: %w", err)
	}
	resp := kresp.(*kmsg.MetadataResponse)
	listed := slices.ContainsFunc(resp.Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.NodeID == id })
	switch {
	case !listed:
		return fmt.Errorf("node %d is not among the serving brokers yet (registered and unfenced)", id)
	case len(resp.Brokers) < want:
		return fmt.Errorf("%d brokers in the metadata, want %d", len(resp.Brokers), want)
	}
	return nil
}
