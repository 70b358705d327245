package compattests

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kcatPath finds kcat: skip when absent, unless FJORD_REQUIRE_KCAT is set.
func kcatPath(t *testing.T) string {
	t.Helper()
	return toolPath(t, "kcat", "FJORD_REQUIRE_KCAT")
}

// runKcat runs one bounded kcat invocation and returns its stdout.
func runKcat(t *testing.T, kcat string, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kcat %s: timed out after 30s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), tail(stdout.String()), tail(stderr.String()))
	}
	if err != nil {
		t.Fatalf("kcat %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, tail(stdout.String()), tail(stderr.String()))
	}
	if s := stderr.String(); s != "" {
		t.Logf("kcat %s stderr:\n%s", strings.Join(args, " "), tail(s))
	}
	return stdout.String()
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// TestKcat: metadata listing, keyed produce/consume, and every codec.
func TestKcat(t *testing.T) {
	kcat := kcatPath(t)
	b := startBroker(t, t.TempDir())
	adm := newAdmin(t, b.Addr)

	lines := func(prefix string, n int) []string {
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, fmt.Sprintf("%s-key-%d:%s value %d %s", prefix, i%7, prefix, i, strings.Repeat("x", i%50)))
		}
		return out
	}
	produce := func(t *testing.T, topic string, msgs []string, extra ...string) {
		args := append([]string{"-P", "-b", b.Addr, "-t", topic, "-K:", "-X", "acks=all"}, extra...)
		runKcat(t, kcat, strings.Join(msgs, "\n")+"\n", args...)
	}
	consume := func(t *testing.T, topic string) []string {
		out := runKcat(t, kcat, "", "-C", "-b", b.Addr, "-t", topic, "-o", "beginning", "-e", "-q", "-f", `%k:%s\n`)
		return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	}

	t.Run("Metadata", func(t *testing.T) {
		createTopic(t, adm, "kcat-listed", 2, nil)
		out := runKcat(t, kcat, "", "-L", "-b", b.Addr)
		if !strings.Contains(out, " at "+b.Addr) {
			t.Errorf("kcat -L does not list the broker at %s:\n%s", b.Addr, out)
		}
		if !strings.Contains(out, `topic "kcat-listed" with 2 partitions`) {
			t.Errorf("kcat -L does not list topic kcat-listed with 2 partitions:\n%s", out)
		}
	})

	t.Run("Keyed", func(t *testing.T) {
		createTopic(t, adm, "kcat-keyed", 1, nil)
		msgs := lines("plain", 200)
		produce(t, "kcat-keyed", msgs)
		got := consume(t, "kcat-keyed")
		if strings.Join(got, "\n") != strings.Join(msgs, "\n") {
			t.Errorf("kcat read back %d lines, differing from the %d produced:\nfirst got:  %q\nfirst want: %q", len(got), len(msgs), first(got), first(msgs))
		}
	})

	t.Run("KeyedMultiPartition", func(t *testing.T) {
		createTopic(t, adm, "kcat-multi", 4, nil)
		msgs := lines("multi", 300)
		produce(t, "kcat-multi", msgs)
		got := consume(t, "kcat-multi")
		g, w := append([]string(nil), got...), append([]string(nil), msgs...)
		sort.Strings(g)
		sort.Strings(w)
		if strings.Join(g, "\n") != strings.Join(w, "\n") {
			t.Errorf("kcat read back %d lines from 4 partitions, differing from the %d produced", len(got), len(msgs))
		}
		// Per key, order is kept.
		idx := map[string]int{}
		for i, m := range msgs {
			idx[m] = i
		}
		last := map[string]int{}
		for _, g := range got {
			k := strings.SplitN(g, ":", 2)[0]
			if i, ok := last[k]; ok && idx[g] < i {
				t.Errorf("key %s out of order: %q", k, g)
			}
			last[k] = idx[g]
		}
	})

	t.Run("IdempotentProducer", func(t *testing.T) {
		createTopic(t, adm, "kcat-idem", 1, nil)
		msgs := lines("idem", 300)
		produce(t, "kcat-idem", msgs, "-X", "enable.idempotence=true", "-z", "zstd")
		got := consume(t, "kcat-idem")
		if strings.Join(got, "\n") != strings.Join(msgs, "\n") {
			t.Errorf("kcat (idempotent) read back %d lines, differing from the %d produced", len(got), len(msgs))
		}
	})

	t.Run("OffsetByTimestamp", func(t *testing.T) {
		// Records with timestamps 1000..5000 via franz-go; kcat -o s@2500
		// starts at the first record at or after 2500 ms.
		createTopic(t, adm, "kcat-ts", 1, nil)
		cl := newClient(t, b.Addr, kgo.DefaultProduceTopic("kcat-ts"))
		for i := int64(1); i <= 5; i++ {
			r := &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("ts%d", i*1000)), Timestamp: time.UnixMilli(i * 1000)}
			if _, err := cl.ProduceSync(testCtx(t, 10*time.Second), r).First(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		out := runKcat(t, kcat, "", "-C", "-b", b.Addr, "-t", "kcat-ts", "-o", "s@2500", "-e", "-q", "-f", `%o:%s\n`)
		if want := "2:ts3000\n3:ts4000\n4:ts5000\n"; out != want {
			t.Errorf("kcat -o s@2500 printed %q, want %q", out, want)
		}
	})

	codecIDs := map[string]int8{"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		t.Run("Codec_"+codec, func(t *testing.T) {
			topic := "kcat-" + codec
			createTopic(t, adm, topic, 1, nil)
			msgs := lines(codec, 500)
			produce(t, topic, msgs, "-z", codec)
			got := consume(t, topic)
			if strings.Join(got, "\n") != strings.Join(msgs, "\n") {
				t.Errorf("%s: kcat read back %d lines, differing from the %d produced:\nfirst got:  %q\nfirst want: %q", codec, len(got), len(msgs), first(got), first(msgs))
			}
			// The batches were stored compressed with that codec.
			what := "kcat -z " + codec
			if codec == "lz4" {
				// librdkafka's rd_kafka_feature_map: its LZ4 feature depends
				// on FindCoordinator (key 10) being listed in ApiVersions;
				// without it, it logs "Broker does not support compression
				// type lz4: not compressing batch".
				what += " (librdkafka compresses with lz4 only if the broker advertises FindCoordinator, api key 10)"
			}
			checkStoredCodec(t, batchCodecs(t, b.Addr, topic, 0), codecIDs[codec], what)
			// And franz-go reads kcat's batches too.
			recs := consumeAll(t, b.Addr, topic, len(msgs), 15*time.Second)
			for i, r := range recs {
				if want := msgs[i]; string(r.Key)+":"+string(r.Value) != want {
					t.Errorf("franz-go record %d: %q:%q, want %q", i, r.Key, r.Value, want)
					break
				}
			}
		})
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
