package protocol

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFrameGrowsAsBytesArrive: a frame announcing 100 MB of which 1 MiB
// arrives holds about what arrived, never the announced size; a whole frame
// read through the growth steps keeps its bytes.
func TestFrameGrowsAsBytesArrive(t *testing.T) {
	b := NewBudget(1 << 30)
	g := &grant{b: b, ctx: context.Background()}
	in := binary.BigEndian.AppendUint32(nil, 100_000_000)
	in = append(in, make([]byte, 1<<20)...)
	_, err := readFrame(bufio.NewReader(bytes.NewReader(in)), 200_000_000, true, g)
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: err = %v", err)
	}
	if held := g.held + startBuf; held > 1<<20 {
		t.Errorf("a 100 MB frame with 1 MiB sent holds %d bytes", held)
	}
	g.release()
	if b.Used() != 0 {
		t.Errorf("released grant leaves %d bytes used", b.Used())
	}

	body := make([]byte, 3<<20+17)
	for i := range body {
		body[i] = byte(i * 7)
	}
	g = &grant{b: b, ctx: context.Background()}
	got, err := readFrame(bufio.NewReader(bytes.NewReader(frame(body))), 4<<20, true, g)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("3 MiB frame: err %v, equal %v", err, bytes.Equal(got, body))
	}
	if g.held != int64(len(body)-startBuf) {
		t.Errorf("grant holds %d, want %d", g.held, len(body)-startBuf)
	}
	g.release()
}

// TestBudgetRules: a grant that is not the oldest waits past the budget or
// its share; the oldest may pass the budget; giving bytes back wakes the
// waiters.
func TestBudgetRules(t *testing.T) {
	b := NewBudget(1 << 20) // share 256 KiB
	ctx := context.Background()
	g1 := &grant{b: b, ctx: ctx}
	g2 := &grant{b: b, ctx: ctx}
	g3 := &grant{b: b, ctx: ctx}
	if err := g1.grow(200 << 10); err != nil {
		t.Fatal(err)
	}
	if err := g2.grow(200 << 10); err != nil {
		t.Fatal(err)
	}
	if err := g1.grow(2 << 20); err != nil { // the oldest passes the budget
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g3.grow(100 << 10) }() // over the budget: waits
	select {
	case err := <-done:
		t.Fatalf("granted over the budget (err %v); used %d", err, b.Used())
	case <-time.After(100 * time.Millisecond):
	}
	g1.release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter was not woken when the budget was given back")
	}
	// g2 is now the oldest: past its share is fine for it.
	if err := g2.grow(500 << 10); err != nil {
		t.Fatal(err)
	}
	// g3 is not: 100 KiB + 200 KiB passes its 256 KiB share.
	cctx, cancel := context.WithCancel(ctx)
	g3.ctx = cctx
	go func() { done <- g3.grow(200 << 10) }()
	cancel()
	if err := <-done; !errors.Is(err, errBudgetWait) {
		t.Fatalf("over its share and cancelled: err %v", err)
	}
	if g3.held != 0 {
		t.Errorf("a cancelled wait keeps %d bytes", g3.held)
	}
	g2.release()
	if b.Used() != 0 {
		t.Errorf("used %d after every release", b.Used())
	}
}

// bigMetadata is a Metadata v1 request of about n bytes (topic names).
func bigMetadata(n int) []byte {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(1)
	for i := 0; i*1000 < n; i++ {
		name := strings.Repeat("t", 990) + string(rune('a'+i%26))
		req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: &name})
	}
	return frame(encodeRequest(req, 1, "big"))
}

func smallMetadata() []byte {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(1)
	return frame(encodeRequest(req, 2, "small"))
}

func startBudgetServer(t *testing.T, budget int64, idle time.Duration) (*Server, net.Listener) {
	t.Helper()
	srv := NewServer(ServerConfig{MaxFrameBytes: 8 << 20, MaxInFlight: 4, IdleTimeout: idle, Budget: NewBudget(budget)},
		&muteHandler{}, testVersions{}, zerolog.Nop())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Serve(ln)
	t.Cleanup(func() { ln.Close(); srv.Close() })
	return srv, ln
}

// roundTrip sends a request frame and reads its response frame.
func roundTrip(t *testing.T, addr string, req []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFrame(c, 1<<20); err != nil {
		t.Fatalf("no response: %v", err)
	}
}

// TestBudgetBackpressure: connections holding partly sent large requests
// spend the budget; a small request on another connection is still served,
// a request larger than the whole budget is served once they are gone, and
// none of it deadlocks.
func TestBudgetBackpressure(t *testing.T) {
	srv, ln := startBudgetServer(t, 1<<20, 0)
	addr := ln.Addr().String()
	var hostile []net.Conn
	for range 8 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		hostile = append(hostile, c)
		c.Write(binary.BigEndian.AppendUint32(nil, 6<<20))
		go c.Write(make([]byte, 512<<10)) // may block: reading stopped
	}
	// Wait (bounded) until the hostile connections have spent the budget.
	for i := 0; srv.cfg.Budget.Used() < 768<<10; i++ {
		if i > 1000 {
			t.Fatalf("hostile connections hold only %d bytes", srv.cfg.Budget.Used())
		}
		time.Sleep(10 * time.Millisecond)
	}
	roundTrip(t, addr, smallMetadata())
	if used := srv.cfg.Budget.Used(); used > 1<<20+512<<10 {
		t.Errorf("budget of 1 MiB holds %d bytes: more than the budget plus the oldest request", used)
	}
	for _, c := range hostile {
		c.Close()
	}
	roundTrip(t, addr, bigMetadata(3<<20)) // three times the budget
}

// TestIdleCountsFromTheLastRequest: a connection trickling a request one
// byte at a time is closed connections.max.idle.ms after its last complete
// request, however often bytes arrive.
func TestIdleCountsFromTheLastRequest(t *testing.T) {
	_, ln := startBudgetServer(t, 1<<20, 300*time.Millisecond)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		c.Write(binary.BigEndian.AppendUint32(nil, 1000))
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := c.Write([]byte{0}); err != nil {
					return
				}
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(20 * time.Second)) // 1000 bytes take 50 s to trickle
	_, err = c.Read(make([]byte, 1))
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("trickling connection not closed: %v", err)
	}
}

// TestConnCounter: the total and per-ip bounds, a refusal reported first
// once per episode, and release given back once.
func TestConnCounter(t *testing.T) {
	cc := NewConnCounter()
	r1, why, _ := cc.Acquire("10.0.0.1", 3, 2)
	r2, _, _ := cc.Acquire("10.0.0.1", 3, 2)
	if why != "" || r1 == nil || r2 == nil {
		t.Fatalf("first two refused: %q", why)
	}
	if _, why, first := cc.Acquire("10.0.0.1", 3, 2); why != "max.connections.per.ip" || !first {
		t.Fatalf("third from one ip: %q first %v", why, first)
	}
	if _, _, first := cc.Acquire("10.0.0.1", 3, 2); first {
		t.Error("a second refusal in one episode reported as first")
	}
	r3, why, _ := cc.Acquire("10.0.0.2", 3, 2)
	if why != "" {
		t.Fatalf("other ip refused: %q", why)
	}
	if _, why, _ := cc.Acquire("10.0.0.3", 3, 2); why != "max.connections" {
		t.Fatalf("fourth in all: %q", why)
	}
	r1()
	r1()
	if total, from := cc.Open("10.0.0.1"); total != 2 || from != 1 {
		t.Fatalf("after one release (twice): total %d, from ip %d", total, from)
	}
	if _, why, first := cc.Acquire("10.0.0.1", -1, 1); why == "" || !first {
		t.Fatalf("after a close, a new refusal episode: %q first %v", why, first)
	}
	r2()
	r3()
	if total, _ := cc.Open(""); total != 0 {
		t.Fatalf("total %d after every release", total)
	}
}

// FuzzReadFrame: any byte stream read as frames (growing, under a small
// budget) either yields frames of exactly their announced size, which then
// parse or fail cleanly, or fails; the budget is whole again afterwards.
func FuzzReadFrame(f *testing.F) {
	f.Add(smallMetadata())
	f.Add(append(binary.BigEndian.AppendUint32(nil, 200<<10), make([]byte, 70<<10)...))
	f.Add(bigMetadata(150 << 10))
	f.Fuzz(func(t *testing.T, b []byte) {
		budget := NewBudget(256 << 10)
		br := bufio.NewReader(bytes.NewReader(b))
		for {
			g := &grant{b: budget, ctx: context.Background()}
			fr, err := readFrame(br, 1<<20, true, g)
			g.release()
			if err != nil {
				break
			}
			if r, err := ParseRequest(fr, testVersions{}); err == nil && r.Body != nil {
				_ = r.Body.AppendTo(nil)
			}
			recycleFrame(fr)
		}
		if u := budget.Used(); u != 0 {
			t.Fatalf("budget holds %d after every grant was released", u)
		}
	})
}
