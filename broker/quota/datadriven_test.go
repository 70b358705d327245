package quota

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/fjordlog/fjord/controller"
)

// TestQuotaDataDriven runs testdata/*.txt. Times are t=ms; an entity is given
// as user=, client= or ip=, each a name or <default>.
// go test ./broker/quota -run TestQuotaDataDriven -rewrite regenerates the
// expected output; review the diff.
//
//	quota <entity> key=<quota key> (value=v | remove)   sets the image's quota
//	resolve kind=<kind> <entity>          the bound and sensor a request is charged to
//	new [max=n]                           a fresh Quotas (default MaxSensors)
//	record t=ms kind=<kind> <entity> v=v [undo] [n=count]
//	                                      charge v (count times), print the throttles
//	sensors t=ms                          the table, each sensor measured at t (unchanged)
//	rate-record t=ms v=v | rate-measure t=ms          one bare rate
//	throttle observed=v bound=v window=ms             the throttle time
//	list (one value a line, <empty> for "")           parse throttled-replica lists
//	listed key=leader|follower [leader=<list>] [follower=<list>] partition=n broker=n
//	                                      whether a topic with those configs lists the replica
//	check side=leader|follower t=ms rate=n [listed] [isr]
//	send side=leader|follower t=ms rate=n bytes=n      a throttled fetch's bytes
func TestQuotaDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{img: new(controller.Image), q: New(MaxSensors)}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

type harness struct {
	img   *controller.Image
	index uint64
	q     *Quotas
	r     rate
	repl  Replication
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	now := argInt(t, d, "t", 0)
	switch d.Cmd {
	case "quota":
		e := entity(d)
		var key string
		d.ScanArgs(t, "key", &key)
		rec := controller.ClientQuota{Entity: e.Parts(), Key: key}
		if !d.HasArg("remove") {
			v := argFloat(t, d, "value")
			rec.Value = &v
		}
		h.index++
		img, err := h.img.Apply(h.index, controller.NewRecord(rec))
		if err != nil {
			return "error: " + err.Error()
		}
		h.img = img
		var b strings.Builder
		for _, e := range img.QuotaEntities() {
			qs := img.ClientQuotas(e)
			for _, k := range slices.Sorted(maps.Keys(qs)) {
				fmt.Fprintf(&b, "%s %s=%s\n", e, k, num(qs[k]))
			}
		}
		return b.String()
	case "resolve":
		kind := argKind(t, d)
		user, client := who(d, kind)
		bound, k, ok := h.q.Resolve(h.img, kind, user, client)
		// Looking up only the image's shapes finds what looking up all
		// of them does.
		if Active(h.img) {
			if b2, k2, ok2 := resolve(h.img, allShapes, kind, user, client); b2 != bound || k2 != k || ok2 != ok {
				d.Fatalf(t, "resolved %v %v %t, but %v %v %t looking up every shape", bound, k, ok, b2, k2, ok2)
			}
		}
		if !ok {
			return "no quota"
		}
		s := fmt.Sprintf("bound=%s sensor=%s", num(bound), k)
		if kind == Produce || kind == Fetch {
			s += " max-in-window=" + num(MaxInWindow(bound))
		}
		return s
	case "new":
		h.q = New(int(argInt(t, d, "max", MaxSensors)))
		return fmt.Sprintf("max=%d", h.q.mu.s.max)
	case "record":
		kind := argKind(t, d)
		user, client := who(d, kind)
		v := argFloat(t, d, "v")
		var out []string
		for range argInt(t, d, "n", 1) {
			ms := h.q.Record(time.UnixMilli(now), h.img, kind, user, client, v, d.HasArg("undo"))
			out = append(out, strconv.FormatInt(ms, 10)+"ms")
		}
		return "throttle " + runs(out)
	case "sensors":
		s := &h.q.mu.s
		keys := slices.SortedFunc(maps.Keys(s.m), func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
		var b strings.Builder
		for _, k := range keys {
			sn := s.m[k]
			c := rate{samples: slices.Clone(sn.r.samples), current: sn.r.current}
			perSec, w := c.measure(now)
			fmt.Fprintf(&b, "%s: last=%d idle=%t rate=%s/s over %dms\n", k, sn.last, sn.r.idle(now), num(perSec), w)
		}
		return b.String() + fmt.Sprintf("%d/%d sensors", s.Len(), s.max)
	case "rate-record":
		h.r.record(argFloat(t, d, "v"), now)
		return h.rateState()
	case "rate-measure":
		perSec, w := h.r.measure(now)
		return fmt.Sprintf("rate=%s/s over %dms\n%s", num(perSec), w, h.rateState())
	case "throttle":
		return fmt.Sprintf("%dms", throttleMs(argFloat(t, d, "observed"), argFloat(t, d, "bound"), argInt(t, d, "window", 0)))
	case "list":
		var b strings.Builder
		for _, v := range strings.Split(d.Input, "\n") {
			if v == "<empty>" {
				v = ""
			}
			l, ok := ParseList(v)
			fmt.Fprintf(&b, "%q: ", v)
			switch {
			case !ok:
				b.WriteString("error: " + CheckList(v).Error())
			case l.all:
				b.WriteString("all")
			default:
				ps := slices.SortedFunc(maps.Keys(l.pairs), func(a, b [2]int32) int { return slices.Compare(a[:], b[:]) })
				b.WriteString("pairs")
				if len(ps) == 0 {
					b.WriteString(" (none)")
				}
				for _, p := range ps {
					fmt.Fprintf(&b, " %d:%d", p[0], p[1])
				}
			}
			b.WriteString("\n")
		}
		return b.String()
	case "listed":
		var side string
		d.ScanArgs(t, "key", &side)
		cfg := map[string]string{}
		for arg, key := range map[string]string{"leader": LeaderReplicas, "follower": FollowerReplicas} {
			if a, ok := d.Arg(arg); ok {
				cfg[key] = a.Vals[0]
			}
		}
		key := map[string]string{"leader": LeaderReplicas, "follower": FollowerReplicas}[side]
		return strconv.FormatBool(h.repl.Listed(cfg, key, int32(argInt(t, d, "partition", 0)), int32(argInt(t, d, "broker", 0))))
	case "check":
		th := h.side(t, d)
		at, withhold := th.Check(time.UnixMilli(now), d.HasArg("listed"), d.HasArg("isr"), argInt(t, d, "rate", 0))
		switch {
		case at == 0:
			return "not throttled\n" + bucket(th)
		case withhold:
			return fmt.Sprintf("throttled at %d/s: withheld\n%s", at, bucket(th))
		}
		return fmt.Sprintf("throttled at %d/s: sends\n%s", at, bucket(th))
	case "send":
		th := h.side(t, d)
		th.Record(time.UnixMilli(now), argInt(t, d, "rate", 0), int(argInt(t, d, "bytes", 0)))
		return bucket(th)
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

func (h *harness) side(t *testing.T, d *datadriven.TestData) *Throttle {
	var side string
	d.ScanArgs(t, "side", &side)
	switch side {
	case "leader":
		return &h.repl.Leader
	case "follower":
		return &h.repl.Follower
	}
	d.Fatalf(t, "side %q", side)
	return nil
}

func bucket(th *Throttle) string {
	b := &th.mu.b
	if b.last.IsZero() {
		return "> bucket unfilled"
	}
	return fmt.Sprintf("> bucket rate=%d/s avail=%s last=%d", b.rate, num(b.avail), b.last.UnixMilli())
}

// rateState shows the bare rate's samples in ring order as start:value,
// the current one starred.
func (h *harness) rateState() string {
	var b strings.Builder
	b.WriteString(">")
	for i, s := range h.r.samples {
		mark := ""
		if i == h.r.current {
			mark = "*"
		}
		fmt.Fprintf(&b, " %s%d:%s", mark, s.start, num(s.value))
	}
	return b.String()
}

// runs prints a sequence with its repeats counted: "0ms x10, 1000ms x20".
func runs(vs []string) string {
	var out []string
	for i := 0; i < len(vs); {
		j := i
		for j < len(vs) && vs[j] == vs[i] {
			j++
		}
		if j-i == 1 {
			out = append(out, vs[i])
		} else {
			out = append(out, fmt.Sprintf("%s x%d", vs[i], j-i))
		}
		i = j
	}
	return strings.Join(out, ", ")
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func name(d *datadriven.TestData, key string) (controller.QuotaName, bool) {
	a, ok := d.Arg(key)
	if !ok {
		return controller.QuotaName{}, false
	}
	if a.Vals[0] == "<default>" {
		return controller.DefaultName(), true
	}
	return controller.Named(a.Vals[0]), true
}

func entity(d *datadriven.TestData) controller.QuotaEntity {
	var e controller.QuotaEntity
	e.User, _ = name(d, "user")
	e.ClientID, _ = name(d, "client")
	e.IP, _ = name(d, "ip")
	return e
}

// who is the (user, client) a request comes from: the ip for connections;
// a user not given is Kafka's unauthenticated ANONYMOUS.
func who(d *datadriven.TestData, kind Kind) (user, client string) {
	user, client = "ANONYMOUS", ""
	if a, ok := d.Arg("user"); ok {
		user = a.Vals[0]
	}
	key := "client"
	if kind == Connection {
		key = "ip"
	}
	if a, ok := d.Arg(key); ok {
		client = a.Vals[0]
	}
	return user, client
}

func argKind(t *testing.T, d *datadriven.TestData) Kind {
	var s string
	d.ScanArgs(t, "kind", &s)
	for k, n := range kindNames {
		if n == s {
			return Kind(k)
		}
	}
	d.Fatalf(t, "unknown kind %q", s)
	return 0
}

func argInt(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	v := def
	d.MaybeScanArgs(t, key, &v)
	return v
}

func argFloat(t *testing.T, d *datadriven.TestData, key string) float64 {
	var s string
	d.ScanArgs(t, key, &s)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return v
}
