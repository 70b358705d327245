// Command composeclient is the Kafka client the compose tests
// (compat-tests/compose_test.go) run INSIDE a container on a compose
// project's network: the upstream compose files advertise in-network host
// names (broker:29092, kafka-1:19092, or with Bitnami's PLAINTEXT://:9092
// the container's own host name) that the host cannot resolve. It is built
// with CGO_ENABLED=0 into a FROM scratch image.
//
//	composeclient roundtrip --bootstrap host:port[,...] --topic T --partitions P --rf R --records N --brokers B --timeout D
//	composeclient workload  --bootstrap host:port[,...] --topic T --rf 3 --duration D --out /dev/stdout
//	composeclient authcheck --bootstrap host:port --sasl-user U --sasl-password P
//
// Each takes --tls-ca/--tls-cert/--tls-key (TLS) and --sasl-mechanism
// (PLAIN by default)/--sasl-user/--sasl-password (SASL).
//
// Each writes one JSON object (its result) to stdout (workload: to --out)
// and exits 0 only on success. Progress goes to stderr; the workload writes
// the marker lines "TOPIC {json}" (the partition leaders once the topic is
// ready) and "FIRST_ACK" (when producing has begun) there for the test to
// time a broker kill.
//
// Every client call is bounded: franz-go's produce and group calls can
// outlive their context when brokers vanish, so each runs under bounded(),
// which gives up on it a little after its deadline.
package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: composeclient roundtrip|workload|authcheck [flags]")
		os.Exit(2)
	}
	var code int
	switch os.Args[1] {
	case "roundtrip":
		code = roundtrip(os.Args[2:], os.Stdout)
	case "workload":
		code = workload(os.Args[2:])
	case "authcheck":
		code = authcheck(os.Args[2:], os.Stdout)
	default:
		fmt.Fprintf(os.Stderr, "composeclient: unknown subcommand %q\n", os.Args[1])
		code = 2
	}
	os.Exit(code)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s composeclient: %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// bounded runs fn with a context ending at d from now (or at ctx's end) and
// returns its error; if fn has not returned 2 s after the deadline it is
// abandoned (left running) and a timeout error is returned.
func bounded(ctx context.Context, d time.Duration, what string, fn func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(cctx) }()
	select {
	case err := <-done:
		return err
	case <-cctx.Done():
		select {
		case err := <-done:
			return err
		case <-time.After(2 * time.Second):
			return fmt.Errorf("%s: no answer %v after its deadline (abandoned)", what, 2*time.Second)
		}
	}
}

func splitSeeds(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func runID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// baseOpts are the client options both subcommands share: short dials and
// request timeouts so that a dead broker is noticed in seconds, and
// frequent metadata refreshes so that a moved leader is found quickly.
func baseOpts(seeds []string) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.DialTimeout(3 * time.Second),
		kgo.RequestTimeoutOverhead(5 * time.Second),
		kgo.RetryTimeout(10 * time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.MetadataMaxAge(5 * time.Second),
	}, slices.Concat(tlsOpts, saslOpts)...)
}

// tlsOpts dial with TLS (the --tls-* flags) and saslOpts authenticate
// with SASL (the --sasl-* flags); empty: plaintext. Set once from the
// flags, before any client.
var tlsOpts, saslOpts []kgo.Opt

// securityFlags registers the --tls-* and --sasl-* flags on fs; the
// returned function, called after fs.Parse, sets tlsOpts and saslOpts.
func securityFlags(fs *flag.FlagSet) func() error {
	tlsCA := fs.String("tls-ca", "", "PEM CA file: dial with TLS trusting it")
	tlsCert := fs.String("tls-cert", "", "PEM client certificate chain, with --tls-key")
	tlsKey := fs.String("tls-key", "", "PEM private key of --tls-cert")
	mech := fs.String("sasl-mechanism", "PLAIN", "with --sasl-user: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	user := fs.String("sasl-user", "", "authenticate with SASL as this user (with --sasl-password)")
	pass := fs.String("sasl-password", "", "password of --sasl-user")
	return func() error {
		tlsOpts, saslOpts = nil, nil
		if *tlsCA != "" {
			o, err := tlsOpt(*tlsCA, *tlsCert, *tlsKey)
			if err != nil {
				return fmt.Errorf("--tls-ca: %w", err)
			}
			tlsOpts = []kgo.Opt{o}
		}
		if *user != "" {
			m, err := saslMechanism(*mech, *user, *pass)
			if err != nil {
				return err
			}
			saslOpts = []kgo.Opt{kgo.SASL(m)}
		}
		return nil
	}
}

// saslMechanism is franz-go's mechanism name for user and pass.
func saslMechanism(name, user, pass string) (sasl.Mechanism, error) {
	switch strings.ToUpper(name) {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", name)
}

// tlsOpt trusts the PEM CA at caPath and, with certPath and keyPath,
// presents that client certificate.
func tlsOpt(caPath, certPath, keyPath string) (kgo.Opt, error) {
	ca, err := os.ReadFile(caPath)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s: no PEM certificate", caPath)
	}
	cfg := &tls.Config{RootCAs: roots}
	if certPath != "" {
		c, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return kgo.DialTLSConfig(cfg), nil
}

type brokerJSON struct {
	ID   int32  `json:"id"`
	Host string `json:"host"`
	Port int32  `json:"port"`
}

// waitBrokers polls metadata, with backoff, until it lists at least want
// brokers or ctx ends.
func waitBrokers(ctx context.Context, adm *kadm.Client, want int) ([]brokerJSON, error) {
	backoff := 100 * time.Millisecond
	var last error
	var seen []brokerJSON
	for attempt := 1; ; attempt++ {
		var md kadm.Metadata
		err := bounded(ctx, 5*time.Second, "metadata", func(c context.Context) error {
			var err error
			md, err = adm.BrokerMetadata(c)
			return err
		})
		if err == nil {
			seen = seen[:0]
			for _, b := range md.Brokers {
				seen = append(seen, brokerJSON{ID: b.NodeID, Host: b.Host, Port: b.Port})
			}
			if len(seen) >= want {
				logf("metadata lists %d brokers (attempt %d): %+v", len(seen), attempt, seen)
				// An advertised listener is configuration, not a passing
				// state: a broker advertised with no host (Kafka's
				// PLAINTEXT://:9092 means the machine's host name) would
				// be dialled as ":port", the client's own host. Say so now
				// rather than time out dialling it.
				for _, b := range seen {
					if b.Host == "" {
						return seen, fmt.Errorf("metadata advertises broker %d with an empty host (%q): clients would dial themselves", b.ID, fmt.Sprintf(":%d", b.Port))
					}
				}
				return seen, nil
			}
			last = fmt.Errorf("metadata lists %d brokers %+v, want %d", len(seen), seen, want)
		} else {
			last = err
		}
		if attempt == 1 || attempt%10 == 0 {
			logf("waiting for %d brokers: %v", want, last)
		}
		select {
		case <-ctx.Done():
			return seen, fmt.Errorf("waiting for %d brokers: %w (last: %v)", want, ctx.Err(), last)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// createTopic creates the topic, tolerating TOPIC_ALREADY_EXISTS and
// retrying retriable errors until ctx ends.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, rf int16) error {
	backoff := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		var resp kadm.CreateTopicResponse
		err := bounded(ctx, 10*time.Second, "create topic", func(c context.Context) error {
			var err error
			resp, err = adm.CreateTopic(c, partitions, rf, nil, topic)
			return err
		})
		if err == nil {
			err = resp.Err
		}
		var kafkaErr *kerr.Error
		switch {
		case err == nil:
			logf("created topic %s (%d partitions, rf %d)", topic, partitions, rf)
			return nil
		case errors.Is(err, kerr.TopicAlreadyExists):
			logf("topic %s already exists", topic)
			return nil
		case errors.As(err, &kafkaErr) && !kafkaErr.Retriable && !errors.Is(err, kerr.InvalidReplicationFactor):
			// A definite refusal. (INVALID_REPLICATION_FACTOR is retried: the
			// controller may not count every broker yet although metadata
			// already lists them.)
			return fmt.Errorf("create topic %s: %w (%s)", topic, err, resp.ErrMessage)
		}
		// Retriable, a transport error, or a timeout: try again.
		logf("create topic %s (attempt %d): %v %s", topic, attempt, err, resp.ErrMessage)
		select {
		case <-ctx.Done():
			return fmt.Errorf("create topic %s: %w (last: %v %s)", topic, ctx.Err(), err, resp.ErrMessage)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// waitLeaders waits until metadata shows every partition of the topic with
// a leader and returns partition -> leader.
func waitLeaders(ctx context.Context, adm *kadm.Client, topic string, partitions int) (map[int32]int32, error) {
	var last error
	for {
		var md kadm.Metadata
		err := bounded(ctx, 5*time.Second, "metadata", func(c context.Context) error {
			var err error
			md, err = adm.Metadata(c, topic)
			return err
		})
		if err == nil {
			td, ok := md.Topics[topic]
			switch {
			case !ok:
				err = fmt.Errorf("topic %s not in metadata", topic)
			case td.Err != nil:
				err = td.Err
			case len(td.Partitions) != partitions:
				err = fmt.Errorf("topic %s has %d partitions, want %d", topic, len(td.Partitions), partitions)
			default:
				leaders := map[int32]int32{}
				for _, p := range td.Partitions {
					if p.Err != nil || p.Leader < 0 {
						err = fmt.Errorf("partition %d: leader %d, %v", p.Partition, p.Leader, p.Err)
						break
					}
					leaders[p.Partition] = p.Leader
				}
				if err == nil {
					return leaders, nil
				}
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for leaders of %s: %w (last: %v)", topic, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// endOffsets lists the end offset of every partition of topic, retrying
// until ctx ends.
func endOffsets(ctx context.Context, adm *kadm.Client, topic string, partitions int) (map[int32]int64, error) {
	var last error
	for {
		var lo kadm.ListedOffsets
		err := bounded(ctx, 5*time.Second, "list offsets", func(c context.Context) error {
			var err error
			lo, err = adm.ListEndOffsets(c, topic)
			return err
		})
		if err == nil {
			out := map[int32]int64{}
			lo.Each(func(o kadm.ListedOffset) {
				if o.Err != nil {
					err = fmt.Errorf("partition %d: %w", o.Partition, o.Err)
					return
				}
				out[o.Partition] = o.Offset
			})
			if err == nil && len(out) != partitions {
				err = fmt.Errorf("end offsets of %d partitions, want %d", len(out), partitions)
			}
			if err == nil {
				return out, nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("list end offsets of %s: %w (last: %v)", topic, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// readRecord is a record read back: where it was and the sequence number
// its value carries (-1 if it is not one of this run's).
type readRecord struct {
	Partition int32
	Offset    int64
	Seq       int64
}

// readBack reads every partition of topic from the start up to its end
// offset in ends, keeping records whose value is "<run>/<seq>". It returns
// what it read, per partition in offset order, and an error if it could
// not reach every end offset by ctx's end.
func readBack(ctx context.Context, seeds []string, topic, run string, ends map[int32]int64, extra ...kgo.Opt) (map[int32][]readRecord, int, error) {
	parts := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range ends {
		parts[topic][p] = kgo.NewOffset().AtStart()
	}
	opts := append(baseOpts(seeds), kgo.ConsumePartitions(parts), kgo.FetchMaxWait(500*time.Millisecond))
	opts = append(opts, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, 0, err
	}
	defer func() { go cl.Close() }() // Close can block on a dead broker
	out := map[int32][]readRecord{}
	next := map[int32]int64{}
	foreign := 0
	done := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		var fs kgo.Fetches
		perr := bounded(ctx, 5*time.Second, "poll", func(c context.Context) error {
			fs = cl.PollFetches(c)
			return nil
		})
		if perr != nil {
			return out, foreign, perr
		}
		if ctx.Err() != nil {
			break
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				logf("fetch %s[%d]: %v", t, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			seq := int64(-1)
			if rid, s, ok := strings.Cut(string(r.Value), "/"); ok && rid == run {
				if n, err := strconv.ParseInt(s, 10, 64); err == nil {
					seq = n
				}
			}
			if seq < 0 {
				foreign++
				return
			}
			out[r.Partition] = append(out[r.Partition], readRecord{Partition: r.Partition, Offset: r.Offset, Seq: seq})
		})
	}
	if !done() {
		var missing []string
		for p, end := range ends {
			if next[p] < end {
				missing = append(missing, fmt.Sprintf("%d: at %d of %d", p, next[p], end))
			}
		}
		sort.Strings(missing)
		return out, foreign, fmt.Errorf("read back %s: %w before reaching the end offsets (%s)", topic, context.DeadlineExceeded, strings.Join(missing, ", "))
	}
	return out, foreign, nil
}

func writeJSON(w io.Writer, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Fprintf(os.Stderr, "composeclient: encoding result: %v\n", err)
		return
	}
	fmt.Fprintf(w, "%s\n", b)
}

// report sets a result's ok and error fields from err, writes the result
// to w as JSON and returns the exit code.
func report(w io.Writer, what string, err error, ok *bool, msg *string, res any) int {
	if err != nil {
		*msg = err.Error()
		logf("%s failed: %v", what, err)
	}
	*ok = err == nil
	writeJSON(w, res)
	if !*ok {
		return 1
	}
	return 0
}

// ---- roundtrip ----

type roundtripResult struct {
	OK            bool             `json:"ok"`
	Error         string           `json:"error,omitempty"`
	Bootstrap     string           `json:"bootstrap"`
	Brokers       []brokerJSON     `json:"brokers"`
	Topic         string           `json:"topic"`
	Partitions    int              `json:"partitions"`
	RF            int              `json:"rf"`
	Leaders       map[int32]int32  `json:"leaders,omitempty"`
	Produced      int              `json:"produced"`
	Acked         int              `json:"acked"`
	Consumed      int              `json:"consumed"`
	GroupConsumed int              `json:"group_consumed"`
	Group         string           `json:"group"`
	EndOffsets    map[int32]int64  `json:"end_offsets,omitempty"`
	Committed     map[int32]int64  `json:"committed,omitempty"`
	PerPartition  map[int32]int    `json:"per_partition,omitempty"`
	Problems      []string         `json:"problems,omitempty"`
	ElapsedMs     int64            `json:"elapsed_ms"`
	StepsMs       map[string]int64 `json:"steps_ms"`
}

func roundtrip(args []string, stdout io.Writer) int {
	fs := flag.NewFlagSet("roundtrip", flag.ContinueOnError)
	bootstrap := fs.String("bootstrap", "", "host:port[,host:port...]")
	topic := fs.String("topic", "", "topic to create and use")
	partitions := fs.Int("partitions", 3, "partitions of the topic")
	rf := fs.Int("rf", 1, "replication factor of the topic")
	records := fs.Int("records", 100, "records to produce")
	brokers := fs.Int("brokers", 1, "brokers the metadata must list before starting")
	timeout := fs.Duration("timeout", 90*time.Second, "bound on the whole run")
	group := fs.String("group", "", "consumer group (default: <topic>-group)")
	security := securityFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := security(); err != nil {
		fmt.Fprintf(os.Stderr, "roundtrip: %v\n", err)
		return 2
	}
	if *bootstrap == "" || *topic == "" {
		fmt.Fprintln(os.Stderr, "roundtrip: --bootstrap and --topic are required")
		return 2
	}
	if *group == "" {
		*group = *topic + "-group"
	}
	res := &roundtripResult{Bootstrap: *bootstrap, Topic: *topic, Partitions: *partitions, RF: *rf, Group: *group, StepsMs: map[string]int64{}}
	start := time.Now()
	err := runRoundtrip(res, splitSeeds(*bootstrap), *topic, *group, *partitions, *rf, *records, *brokers, *timeout)
	res.ElapsedMs = time.Since(start).Milliseconds()
	if err == nil && len(res.Problems) > 0 {
		err = fmt.Errorf("%d problems: %s", len(res.Problems), strings.Join(res.Problems[:min(len(res.Problems), 5)], "; "))
	}
	return report(stdout, "roundtrip", err, &res.OK, &res.Error, res)
}

func runRoundtrip(res *roundtripResult, seeds []string, topic, group string, partitions, rf, n, brokers int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	step := func(name string, t0 time.Time) { res.StepsMs[name] = time.Since(t0).Milliseconds() }
	run := runID()

	cl, err := kgo.NewClient(append(baseOpts(seeds),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is on by default with acks=all
		kgo.RecordDeliveryTimeout(30*time.Second),
		kgo.ProducerLinger(5*time.Millisecond),
	)...)
	if err != nil {
		return err
	}
	defer func() { go cl.Close() }()
	adm := kadm.NewClient(cl)

	t0 := time.Now()
	res.Brokers, err = waitBrokers(ctx, adm, brokers)
	step("wait_brokers", t0)
	if err != nil {
		return err
	}
	t0 = time.Now()
	if err := createTopic(ctx, adm, topic, int32(partitions), int16(rf)); err != nil {
		return err
	}
	if res.Leaders, err = waitLeaders(ctx, adm, topic, partitions); err != nil {
		return err
	}
	step("create_topic", t0)

	// Produce n keyed records, acks=all, idempotent.
	t0 = time.Now()
	type ack struct {
		partition int32
		offset    int64
		err       error
	}
	acks := make([]ack, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%d", i%23)), Value: []byte(fmt.Sprintf("%s/%d", run, i))}
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			acks[i] = ack{r.Partition, r.Offset, err}
			wg.Done()
		})
	}
	res.Produced = n
	if err := bounded(ctx, time.Until(deadlineOf(ctx)), "produce", func(c context.Context) error {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
			return nil
		case <-c.Done():
			return c.Err()
		}
	}); err != nil {
		return fmt.Errorf("produce: not every record acknowledged: %w", err)
	}
	step("produce", t0)
	want := map[int64]ack{}
	for i, a := range acks {
		if a.err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("record %d: produce failed: %v", i, a.err))
			continue
		}
		res.Acked++
		want[int64(i)] = a
	}
	if res.Acked != n {
		return fmt.Errorf("produce: %d of %d records acknowledged (first problem: %s)", res.Acked, n, res.Problems[0])
	}

	// Read back every partition from the start: each record exactly once,
	// at its acknowledged offset, in order per partition.
	t0 = time.Now()
	res.EndOffsets, err = endOffsets(ctx, adm, topic, partitions)
	if err != nil {
		return err
	}
	got, _, err := readBack(ctx, seeds, topic, run, res.EndOffsets)
	if err != nil {
		return err
	}
	step("consume", t0)
	res.PerPartition = map[int32]int{}
	seen := map[int64]int{}
	for p, rs := range got {
		res.PerPartition[p] = len(rs)
		last := int64(-1)
		for _, r := range rs {
			res.Consumed++
			seen[r.Seq]++
			if r.Seq <= last {
				res.Problems = append(res.Problems, fmt.Sprintf("partition %d offset %d: record %d after record %d", p, r.Offset, r.Seq, last))
			}
			last = max(last, r.Seq)
			if a, ok := want[r.Seq]; ok && (a.partition != r.Partition || a.offset != r.Offset) {
				res.Problems = append(res.Problems, fmt.Sprintf("record %d acknowledged at %d/%d, read at %d/%d", r.Seq, a.partition, a.offset, r.Partition, r.Offset))
			}
		}
	}
	for i := range int64(n) {
		switch c := seen[i]; {
		case c == 0:
			res.Problems = append(res.Problems, fmt.Sprintf("record %d never read back", i))
		case c > 1:
			res.Problems = append(res.Problems, fmt.Sprintf("record %d read back %d times", i, c))
		}
	}
	if len(res.Problems) > 0 {
		return nil // reported by the caller
	}

	// Consume again through a consumer group, commit, and check the
	// committed offsets through kadm.
	t0 = time.Now()
	gcl, err := kgo.NewClient(append(baseOpts(seeds),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.SessionTimeout(10*time.Second),
	)...)
	if err != nil {
		return err
	}
	defer func() { go gcl.Close() }()
	gseen := map[int64]bool{}
	for len(gseen) < n {
		var fs kgo.Fetches
		if err := bounded(ctx, 10*time.Second, "group poll", func(c context.Context) error {
			fs = gcl.PollFetches(c)
			return nil
		}); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("group %s: read %d of %d records: %w", group, len(gseen), n, ctx.Err())
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				logf("group fetch %s[%d]: %v", t, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if rid, s, ok := strings.Cut(string(r.Value), "/"); ok && rid == run {
				if i, err := strconv.ParseInt(s, 10, 64); err == nil {
					gseen[i] = true
				}
			}
		})
	}
	res.GroupConsumed = len(gseen)
	if err := bounded(ctx, 15*time.Second, "commit", gcl.CommitUncommittedOffsets); err != nil {
		return fmt.Errorf("group %s: commit: %w", group, err)
	}
	var offs kadm.OffsetResponses
	if err := bounded(ctx, 10*time.Second, "fetch offsets", func(c context.Context) error {
		var err error
		offs, err = adm.FetchOffsets(c, group)
		return err
	}); err != nil {
		return fmt.Errorf("group %s: fetch offsets: %w", group, err)
	}
	res.Committed = map[int32]int64{}
	for p, end := range res.EndOffsets {
		o, ok := offs.Lookup(topic, p)
		switch {
		case !ok:
			if end > 0 {
				res.Problems = append(res.Problems, fmt.Sprintf("group %s: no committed offset for partition %d (end %d)", group, p, end))
			}
		case o.Err != nil:
			res.Problems = append(res.Problems, fmt.Sprintf("group %s: partition %d: %v", group, p, o.Err))
		default:
			res.Committed[p] = o.At
			if o.At != end {
				res.Problems = append(res.Problems, fmt.Sprintf("group %s: partition %d committed at %d, end offset %d", group, p, o.At, end))
			}
		}
	}
	_ = bounded(ctx, 10*time.Second, "leave group", gcl.LeaveGroupContext)
	step("group", t0)
	return nil
}

func deadlineOf(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(time.Hour)
	}
	return d
}

// ---- workload ----

type workloadResult struct {
	OK               bool             `json:"ok"`
	Error            string           `json:"error,omitempty"`
	Bootstrap        string           `json:"bootstrap"`
	Topic            string           `json:"topic"`
	Partitions       int              `json:"partitions"`
	RF               int              `json:"rf"`
	LeadersAtStart   map[int32]int32  `json:"leaders_at_start,omitempty"`
	LeadersAtEnd     map[int32]int32  `json:"leaders_at_end,omitempty"`
	Sent             int64            `json:"sent"`
	Acked            int              `json:"acked"`
	Failed           int              `json:"failed"`
	Unresolved       int              `json:"unresolved"` // neither acknowledged nor failed when the run ended
	FailureSample    map[string]int   `json:"failure_sample,omitempty"`
	ReadBack         int              `json:"read_back"`
	ReadBackComplete bool             `json:"read_back_complete"`
	Lost             int              `json:"lost"`       // acknowledged, never read back
	Duplicated       int              `json:"duplicated"` // read back more than once
	Reordered        int              `json:"reordered"`  // read after a record produced later to the same partition
	Misplaced        int              `json:"misplaced"`  // read back elsewhere than its acknowledged partition/offset
	ProblemSample    []string         `json:"problem_sample,omitempty"`
	EndOffsets       map[int32]int64  `json:"end_offsets,omitempty"`
	StartUnixMs      int64            `json:"start_unix_ms"` // first produce
	FirstAckUnixMs   int64            `json:"first_ack_unix_ms"`
	LastAckUnixMs    int64            `json:"last_ack_unix_ms"`
	MaxAckGapMs      int64            `json:"max_ack_gap_ms"`
	MaxAckGapFromMs  int64            `json:"max_ack_gap_from_unix_ms"`
	AcksPerSecond    []int            `json:"acks_per_second"` // bucket i: [start+i s, start+i+1 s)
	StepsMs          map[string]int64 `json:"steps_ms"`
}

func workload(args []string) int {
	fs := flag.NewFlagSet("workload", flag.ContinueOnError)
	bootstrap := fs.String("bootstrap", "", "host:port[,host:port...]")
	topic := fs.String("topic", "", "topic to create and use")
	partitions := fs.Int("partitions", 3, "partitions of the topic")
	rf := fs.Int("rf", 3, "replication factor of the topic")
	brokers := fs.Int("brokers", 0, "brokers the metadata must list before starting (default: --rf)")
	duration := fs.Duration("duration", 15*time.Second, "how long to produce, from the first produced record")
	rate := fs.Int("rate", 400, "records per second to offer (at most --inflight unacknowledged)")
	inflight := fs.Int("inflight", 64, "most records not yet acknowledged or failed")
	setup := fs.Duration("setup-timeout", 90*time.Second, "bound on waiting for brokers and creating the topic")
	out := fs.String("out", "/dev/stdout", "where to write the JSON result")
	security := securityFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := security(); err != nil {
		fmt.Fprintf(os.Stderr, "workload: %v\n", err)
		return 2
	}
	if *bootstrap == "" || *topic == "" {
		fmt.Fprintln(os.Stderr, "workload: --bootstrap and --topic are required")
		return 2
	}
	if *brokers == 0 {
		*brokers = *rf
	}
	res := &workloadResult{Bootstrap: *bootstrap, Topic: *topic, Partitions: *partitions, RF: *rf, StepsMs: map[string]int64{}}
	err := runWorkload(res, splitSeeds(*bootstrap), *topic, *partitions, *rf, *brokers, *duration, *rate, *inflight, *setup)
	if err == nil {
		switch {
		case res.Acked == 0:
			err = errors.New("no record was acknowledged")
		case !res.ReadBackComplete:
			err = errors.New("read back incomplete")
		case res.Lost+res.Duplicated+res.Reordered+res.Misplaced > 0:
			err = fmt.Errorf("lost %d, duplicated %d, reordered %d, misplaced %d", res.Lost, res.Duplicated, res.Reordered, res.Misplaced)
		}
	}
	if err != nil {
		res.Error = err.Error()
		logf("workload failed: %v", err)
	}
	res.OK = err == nil
	w := io.Writer(os.Stdout)
	if *out != "/dev/stdout" && *out != "-" {
		f, ferr := os.Create(*out)
		if ferr != nil {
			fmt.Fprintf(os.Stderr, "workload: %v\n", ferr)
			return 1
		}
		defer f.Close()
		w = f
	}
	writeJSON(w, res)
	if !res.OK {
		return 1
	}
	return 0
}

type wack struct {
	seq       int64
	partition int32
	offset    int64
	at        time.Time
}

func runWorkload(res *workloadResult, seeds []string, topic string, partitions, rf, brokers int, duration time.Duration, rate, inflight int, setup time.Duration) error {
	run := runID()
	cl, err := kgo.NewClient(append(baseOpts(seeds),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent by default
		kgo.ProduceRequestTimeout(5*time.Second),
		kgo.RecordDeliveryTimeout(20*time.Second),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.UnknownTopicRetries(-1),
	)...)
	if err != nil {
		return err
	}
	defer func() { go cl.Close() }() // Close can block on a dead broker
	adm := kadm.NewClient(cl)

	t0 := time.Now()
	sctx, scancel := context.WithTimeout(context.Background(), setup)
	defer scancel()
	if _, err := waitBrokers(sctx, adm, brokers); err != nil {
		return err
	}
	if err := createTopic(sctx, adm, topic, int32(partitions), int16(rf)); err != nil {
		return err
	}
	if res.LeadersAtStart, err = waitLeaders(sctx, adm, topic, partitions); err != nil {
		return err
	}
	res.StepsMs["setup"] = time.Since(t0).Milliseconds()
	lj, _ := json.Marshal(res.LeadersAtStart)
	fmt.Fprintf(os.Stderr, "TOPIC %s\n", lj)

	// Produce: a record every 1/rate s while fewer than inflight are
	// outstanding, until duration has passed since the first.
	var (
		mu       sync.Mutex
		acks     []wack
		failures = map[string]int{}
		failed   int
		wg       sync.WaitGroup
		firstAck sync.Once
	)
	sem := make(chan struct{}, inflight)
	start := time.Now()
	res.StartUnixMs = start.UnixMilli()
	end := start.Add(duration)
	tick := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
	defer tick.Stop()
	stop := time.NewTimer(time.Until(end))
	defer stop.Stop()
	var seq int64
produce:
	for {
		select {
		case <-stop.C:
			break produce
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // too many outstanding: skip this tick
		}
		s := seq
		seq++
		wg.Add(1)
		r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", s%101)), Value: []byte(fmt.Sprintf("%s/%d", run, s))}
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			now := time.Now()
			mu.Lock()
			if err != nil {
				failed++
				msg := err.Error()
				if len(failures) < 20 || failures[msg] > 0 {
					failures[msg]++
				}
			} else {
				acks = append(acks, wack{seq: s, partition: r.Partition, offset: r.Offset, at: now})
			}
			mu.Unlock()
			if err == nil {
				firstAck.Do(func() { fmt.Fprintln(os.Stderr, "FIRST_ACK") })
			}
			<-sem
			wg.Done()
		})
	}
	res.Sent = seq
	res.StepsMs["produce"] = time.Since(start).Milliseconds()
	logf("stopped producing after %d records; waiting for outstanding acks", seq)

	// Wait (bounded) for the outstanding records.
	t0 = time.Now()
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		logf("records still outstanding 30s after the end")
	}
	res.StepsMs["drain"] = time.Since(t0).Milliseconds()
	mu.Lock()
	ackList := append([]wack(nil), acks...)
	res.Failed = failed
	res.FailureSample = failures
	mu.Unlock()
	res.Acked = len(ackList)
	res.Unresolved = int(res.Sent) - res.Acked - res.Failed

	// The ack timeline.
	sort.Slice(ackList, func(i, j int) bool { return ackList[i].at.Before(ackList[j].at) })
	if len(ackList) > 0 {
		res.FirstAckUnixMs = ackList[0].at.UnixMilli()
		res.LastAckUnixMs = ackList[len(ackList)-1].at.UnixMilli()
		prev := start
		for _, a := range ackList {
			if g := a.at.Sub(prev).Milliseconds(); g > res.MaxAckGapMs {
				res.MaxAckGapMs, res.MaxAckGapFromMs = g, prev.UnixMilli()
			}
			prev = a.at
			b := int(a.at.Sub(start) / time.Second)
			for len(res.AcksPerSecond) <= b {
				res.AcksPerSecond = append(res.AcksPerSecond, 0)
			}
			res.AcksPerSecond[b]++
		}
	}

	// Read the topic back.
	t0 = time.Now()
	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	if leaders, err := waitLeaders(rctx, adm, topic, partitions); err == nil {
		res.LeadersAtEnd = leaders
	} else {
		logf("leaders at the end: %v", err)
	}
	res.EndOffsets, err = endOffsets(rctx, adm, topic, partitions)
	if err != nil {
		return err
	}
	got, _, rerr := readBack(rctx, seeds, topic, run, res.EndOffsets)
	res.ReadBackComplete = rerr == nil
	if rerr != nil {
		logf("%v", rerr)
	}
	res.StepsMs["read_back"] = time.Since(t0).Milliseconds()

	problem := func(format string, args ...any) {
		if len(res.ProblemSample) < 20 {
			res.ProblemSample = append(res.ProblemSample, fmt.Sprintf(format, args...))
		}
	}
	where := map[int64][]readRecord{}
	for p, rs := range got {
		last := int64(-1)
		for _, r := range rs {
			res.ReadBack++
			where[r.Seq] = append(where[r.Seq], r)
			if r.Seq < last {
				res.Reordered++
				problem("partition %d offset %d: seq %d after seq %d", p, r.Offset, r.Seq, last)
			}
			last = max(last, r.Seq)
		}
	}
	for s, rs := range where {
		if len(rs) > 1 {
			res.Duplicated++
			problem("seq %d read %d times: %+v", s, len(rs), rs)
		}
	}
	for _, a := range ackList {
		rs := where[a.seq]
		switch {
		case len(rs) == 0:
			res.Lost++
			problem("seq %d acknowledged at %d/%d (%s) never read back", a.seq, a.partition, a.offset, a.at.UTC().Format("15:04:05.000"))
		case rs[0].Partition != a.partition || rs[0].Offset != a.offset:
			res.Misplaced++
			problem("seq %d acknowledged at %d/%d, read at %d/%d", a.seq, a.partition, a.offset, rs[0].Partition, rs[0].Offset)
		}
	}
	return nil
}
