package main

// The client subcommands (topic, group, produce, consume, cluster, broker,
// verify) share these: the connection flags (--bootstrap, with kcat's -b
// and the Kafka tools' --bootstrap-server; kcat's -X key=value client
// properties and -F/--command-config files of them, cli_props.go), --json
// and --timeout, flags after positional arguments, tables for people and
// JSON for scripts, and the exit codes.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Exit codes of the client subcommands (listed in usage()).
const (
	exitOK    = 0 // done
	exitFail  = 1 // the operation failed (an error from the cluster, a refusal, verify found a problem)
	exitUsage = 2 // bad command line
)

// cli is one client subcommand's invocation: its flags and where it writes.
type cli struct {
	name      string // "fjord topic create", for messages
	fs        *flag.FlagSet
	bootstrap *string
	props     *clientProps // -X and -F/--command-config
	connOpts  []kgo.Opt    // what props ask for, built by parse
	json      *bool
	timeout   *time.Duration
	out, err  io.Writer
	args      []string // positional arguments, after parse
}

func newCLI(name string, out, errOut io.Writer) *cli {
	c := &cli{name: name, out: out, err: errOut}
	c.fs = flag.NewFlagSet(name, flag.ContinueOnError)
	c.fs.SetOutput(errOut)
	c.bootstrap, c.props = connFlags(c.fs, "127.0.0.1:9092")
	c.json = c.fs.Bool("json", false, "write JSON instead of a table")
	c.timeout = c.fs.Duration("timeout", 30*time.Second, "bound on the whole operation")
	return c
}

// connFlags registers the connection flags on fs: the bootstrap brokers
// under the three names people bring from other tools (default
// $FJORD_BOOTSTRAP, else def), and the client properties (-X, and -F or
// --command-config files, applied in command-line order).
func connFlags(fs *flag.FlagSet, def string) (*string, *clientProps) {
	if env := os.Getenv("FJORD_BOOTSTRAP"); env != "" {
		def = env
	}
	bootstrap := new(string)
	fs.StringVar(bootstrap, "bootstrap", def, "comma-separated host:port of brokers to start from ($FJORD_BOOTSTRAP)")
	fs.StringVar(bootstrap, "b", def, "the same as --bootstrap (kcat's spelling)")
	fs.StringVar(bootstrap, "bootstrap-server", def, "the same as --bootstrap (the Kafka tools' spelling)")
	props := &clientProps{}
	fs.Func("X", "client property `key=value` (kcat's -X): security.protocol, sasl.*, ssl.*, client.id; repeatable", props.setFlag)
	fs.Func("F", "read client properties (key=value lines) from `file`", props.readFile)
	fs.Func("command-config", "the same as -F (the Kafka tools' spelling)", props.readFile)
	return bootstrap, props
}

// parse parses flags placed anywhere among the positional arguments
// (`topic create orders --partitions 6`), as the Kafka tools accept them.
// It returns false, with the exit code to use, when parsing stopped.
func (c *cli) parse(args []string, minArgs, maxArgs int) (int, bool) {
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK, false
			}
			return exitUsage, false
		}
		rest := c.fs.Args()
		if len(rest) == 0 {
			break
		}
		c.args = append(c.args, rest[0])
		args = rest[1:]
	}
	if len(c.args) < minArgs || (maxArgs >= 0 && len(c.args) > maxArgs) {
		fmt.Fprintf(c.err, "%s: wrong number of arguments\n", c.name)
		c.fs.Usage()
		return exitUsage, false
	}
	opts, err := c.props.options()
	if err != nil {
		return c.usageErr("%v", err), false
	}
	c.connOpts = opts
	return 0, true
}

func (c *cli) seeds() []string {
	var s []string
	for _, a := range strings.Split(*c.bootstrap, ",") {
		if a = strings.TrimSpace(a); a != "" {
			s = append(s, a)
		}
	}
	return s
}

// client is a franz-go client on the bootstrap brokers; extra options
// (producer or consumer settings) are appended.
func (c *cli) client(opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.DialTimeout(5 * time.Second), kgo.ClientID("fjord-cli")}
	base = append(base, c.connOpts...) // after the default client id, which client.id replaces
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", *c.bootstrap, err)
	}
	return cl, nil
}

func (c *cli) admin() (*kadm.Client, func(), error) {
	cl, err := c.client()
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

func (c *cli) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), *c.timeout)
}

// adminCtx is an admin client and the operation's context (bounded by
// --timeout); done releases both.
func (c *cli) adminCtx() (*kadm.Client, context.Context, func(), error) {
	adm, closeAdm, err := c.admin()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := c.ctx()
	return adm, ctx, func() { cancel(); closeAdm() }, nil
}

// fail reports err and returns exitFail.
func (c *cli) fail(err error) int {
	fmt.Fprintf(c.err, "%s: %v\n", c.name, err)
	return exitFail
}

func (c *cli) usageErr(format string, args ...any) int {
	fmt.Fprintf(c.err, "%s: %s\n", c.name, fmt.Sprintf(format, args...))
	return exitUsage
}

// emit writes v as JSON (with --json) or calls table.
func (c *cli) emit(v any, table func(w *tabwriter.Writer)) {
	if *c.json {
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		enc.Encode(v)
		return
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	table(w)
	w.Flush()
}

// kvFlag collects repeated key=value flags.
type kvFlag struct{ m map[string]*string }

func (f *kvFlag) String() string { return "" }
func (f *kvFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", v)
	}
	if f.m == nil {
		f.m = map[string]*string{}
	}
	f.m[k] = &val
	return nil
}

// listFlag collects repeated string flags.
type listFlag []string

func (f *listFlag) String() string     { return strings.Join(*f, ",") }
func (f *listFlag) Set(v string) error { *f = append(*f, v); return nil }

func joinInt32(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// subcommand dispatches `fjord GROUP VERB ...` to the verb's function.
func subcommand(group string, verbs map[string]func(args []string, out, errOut io.Writer) int, args []string, out, errOut io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(errOut, "usage: fjord %s VERB [flags]; verbs: %s\n", group, strings.Join(sortedKeys(verbs), ", "))
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	fn, ok := verbs[args[0]]
	if !ok {
		fmt.Fprintf(errOut, "fjord %s: unknown verb %q; verbs: %s\n", group, args[0], strings.Join(sortedKeys(verbs), ", "))
		return exitUsage
	}
	return fn(args[1:], out, errOut)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func sortRows[T any](rows []T, less func(a, b T) bool) {
	slices.SortFunc(rows, func(a, b T) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	})
}
