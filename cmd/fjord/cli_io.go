package main

// `fjord produce` and the record formats of `fjord consume`: kcat-like, a
// line per record.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produce reads stdin, a record per line (key SEP value with -k SEP), and
// writes them idempotently with acks=all; it exits 1 if any failed. Like
// kcat it lets the brokers create a topic that does not exist yet, when
// they do that (auto.create.topics.enable).
func produceCmd(args []string, in io.Reader, out, errOut io.Writer) int {
	c := newCLI("fjord produce", out, errOut)
	topic := c.fs.String("t", "", "topic")
	part := c.fs.Int("p", -1, "partition (-1: by key, else sticky)")
	keySep := c.fs.String("k", "", "key separator: each line is KEY<sep>VALUE")
	if code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	if *topic == "" {
		return c.usageErr("-t topic is required")
	}
	opts := []kgo.Opt{kgo.DefaultProduceTopic(*topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		// A Metadata request that creates the topic may answer it with no
		// partitions yet (LEADER_NOT_AVAILABLE, as Kafka does); franz-go
		// asks again until it has them.
		kgo.AllowAutoTopicCreation()}
	if *part >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := c.client(opts...)
	if err != nil {
		return c.fail(err)
	}
	defer cl.Close()
	ctx, cancel := c.ctx()
	defer cancel()
	var mu sync.Mutex
	var n, failed int
	var firstErr error
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		r := &kgo.Record{Value: []byte(line), Partition: int32(*part)}
		if *keySep != "" {
			if k, v, ok := strings.Cut(line, *keySep); ok {
				r.Key, r.Value = []byte(k), []byte(v)
			}
		}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			n++
		})
	}
	if err := sc.Err(); err != nil {
		return c.fail(fmt.Errorf("reading stdin: %w", err))
	}
	if err := cl.Flush(ctx); err != nil {
		return c.fail(err)
	}
	if *c.json {
		json.NewEncoder(out).Encode(map[string]int{"produced": n, "failed": failed})
	}
	if failed > 0 {
		return c.fail(fmt.Errorf("%d of %d records failed, first: %w", failed, failed+n, firstErr))
	}
	return exitOK
}

type jsonRecord struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp int64             `json:"timestamp_ms"`
	Key       *string           `json:"key"`
	Value     *string           `json:"value"`
	Headers   map[string]string `json:"headers,omitempty"`
}

func recordJSON(r *kgo.Record) jsonRecord {
	j := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli()}
	if r.Key != nil {
		k := string(r.Key)
		j.Key = &k
	}
	if r.Value != nil {
		v := string(r.Value)
		j.Value = &v
	}
	for _, h := range r.Headers {
		if j.Headers == nil {
			j.Headers = map[string]string{}
		}
		j.Headers[h.Key] = string(h.Value)
	}
	return j
}

func formatRecord(f string, r *kgo.Record) string {
	if f == "" {
		return string(r.Value) + "\n"
	}
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		ch := f[i]
		if (ch != '%' && ch != '\\') || i+1 == len(f) {
			b.WriteByte(ch)
			continue
		}
		i++
		if ch == '\\' {
			switch f[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(f[i])
			}
			continue
		}
		switch f[i] {
		case 't':
			b.WriteString(r.Topic)
		case 'p':
			b.WriteString(strconv.Itoa(int(r.Partition)))
		case 'o':
			b.WriteString(strconv.FormatInt(r.Offset, 10))
		case 'k':
			b.Write(r.Key)
		case 'v':
			b.Write(r.Value)
		case 'K':
			b.WriteString(strconv.Itoa(len(r.Key)))
		case 'S':
			b.WriteString(strconv.Itoa(len(r.Value)))
		case 'T':
			b.WriteString(strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
		case 'h':
			for j, h := range r.Headers {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString(h.Key + "=" + string(h.Value))
			}
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}
