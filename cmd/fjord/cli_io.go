package main

// `fjord produce` and `fjord consume`: kcat-like, a line per record.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produce reads stdin, a record per line (key SEP value with -k SEP), and
// writes them idempotently with acks=all; it exits 1 if any failed.
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
	opts := []kgo.Opt{kgo.DefaultProduceTopic(*topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0)}
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

// consume prints records, a line per record by default ("%v\n"), or per
// a kcat -f format: %t topic, %p partition, %o offset, %k key, %v value,
// %T timestamp (ms), %h headers, %K/%S key and value sizes, \n \t \\.
func consumeCmd(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord consume", out, errOut)
	topic := c.fs.String("t", "", "topic")
	part := c.fs.Int("p", -1, "partition (-1: all)")
	offset := c.fs.String("o", "beginning", "where to start: beginning, end, an offset N, or -N (N before the end)")
	count := c.fs.Int("c", 0, "stop after this many records (0: no limit)")
	exitAtEnd := c.fs.Bool("e", false, "exit once every partition's end (at start-up) is reached")
	format := c.fs.String("f", "", "output format (kcat's -f); default: the value and a newline")
	*c.timeout = 0
	if code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	if *topic == "" {
		return c.usageErr("-t topic is required")
	}
	ctx := context.Background()
	if *c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *c.timeout)
		defer cancel()
	}
	adm, done, err := c.admin()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	starts, err := adm.ListStartOffsets(ctx, *topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return c.fail(fmt.Errorf("topic %s: %w", *topic, err))
	}
	ends, err := adm.ListEndOffsets(ctx, *topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return c.fail(fmt.Errorf("topic %s: %w", *topic, err))
	}
	from := map[int32]kgo.Offset{}
	remaining := map[int32]int64{} // with -e: the end offset still to reach
	var perr error
	starts.Each(func(s kadm.ListedOffset) {
		if *part >= 0 && s.Partition != int32(*part) {
			return
		}
		e, _ := ends.Lookup(s.Topic, s.Partition)
		var first int64
		switch *offset {
		case "beginning":
			first = s.Offset
		case "end":
			first = e.Offset
		default:
			n, err := strconv.ParseInt(*offset, 10, 64)
			if err != nil {
				perr = fmt.Errorf("-o %q: want beginning, end, N or -N", *offset)
				return
			}
			if n < 0 {
				n = e.Offset + n
			}
			first = max(s.Offset, min(n, e.Offset))
		}
		from[s.Partition] = kgo.NewOffset().At(first)
		if first < e.Offset {
			remaining[s.Partition] = e.Offset
		}
	})
	if perr != nil {
		return c.usageErr("%v", perr)
	}
	if len(from) == 0 {
		return c.fail(fmt.Errorf("topic %s has no partition %d", *topic, *part))
	}
	if *exitAtEnd && len(remaining) == 0 {
		return exitOK
	}
	cl, err := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{*topic: from}), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return c.fail(err)
	}
	defer cl.Close()
	w := bufio.NewWriter(out)
	defer w.Flush()
	enc := json.NewEncoder(w)
	seen := 0
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			w.Flush()
			return c.fail(err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("%s[%d]: %w", t, p, err) })
		if ferr != nil {
			w.Flush()
			return c.fail(ferr)
		}
		for _, r := range fs.Records() {
			if *c.json {
				enc.Encode(recordJSON(r))
			} else {
				w.WriteString(formatRecord(*format, r))
			}
			seen++
			if e, ok := remaining[r.Partition]; ok && r.Offset+1 >= e {
				delete(remaining, r.Partition)
			}
			if *count > 0 && seen >= *count {
				return exitOK
			}
		}
		w.Flush()
		if *exitAtEnd && len(remaining) == 0 {
			return exitOK
		}
	}
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
