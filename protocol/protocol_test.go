package protocol

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testVersions serves ApiVersions 0-4 and Metadata 0-12.
type testVersions struct{}

func (testVersions) Supported(key int16) (int16, int16, bool) {
	switch key {
	case 18:
		return 0, 4, true
	case 3:
		return 0, 12, true
	}
	return 0, 0, false
}

func (testVersions) All() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MaxVersion: 12}, {ApiKey: 18, MaxVersion: 4}}
}

// encodeRequest builds a frame body (no size prefix) the way clients do.
func encodeRequest(req kmsg.Request, corr int32, clientID string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func TestParseRequestRoundTrip(t *testing.T) {
	for v := int16(0); v <= 12; v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		topic := "orders"
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
		got, err := ParseRequest(encodeRequest(req, 7, "client-a"), testVersions{})
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		m := got.Body.(*kmsg.MetadataRequest)
		if got.CorrelationID != 7 || got.ClientID != "client-a" || len(m.Topics) != 1 || *m.Topics[0].Topic != "orders" {
			t.Fatalf("v%d: decoded %+v", v, got)
		}
	}
}

func TestParseRequestRejects(t *testing.T) {
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(13)
	if _, err := ParseRequest(encodeRequest(md, 1, ""), testVersions{}); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("metadata v13: %v", err)
	}
	prod := kmsg.NewPtrProduceRequest()
	if _, err := ParseRequest(encodeRequest(prod, 1, ""), testVersions{}); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("produce: %v", err)
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(99)
	r, err := ParseRequest(encodeRequest(av, 1, ""), testVersions{})
	if err != nil || r.Body != nil {
		t.Fatalf("api versions v99 should be answered by the front end: %v %+v", err, r)
	}
	for _, b := range [][]byte{nil, {0, 3}, {0, 3, 0, 1, 0, 0, 0, 1}, {0, 3, 0, 1, 0, 0, 0, 1, 0, 9, 'a'}} {
		if _, err := ParseRequest(b, testVersions{}); err == nil {
			t.Fatalf("%x: accepted", b)
		}
	}
}

func TestReadFrameLimits(t *testing.T) {
	huge := binary.BigEndian.AppendUint32(nil, 0x7fffffff)
	if _, err := ReadFrame(bytes.NewReader(huge), 1<<20); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("huge: %v", err)
	}
	neg := binary.BigEndian.AppendUint32(nil, 0xffffffff)
	if _, err := ReadFrame(bytes.NewReader(neg), 1<<20); !errors.Is(err, ErrFrameSize) {
		t.Fatalf("negative: %v", err)
	}
	// A large claimed size with few bytes behind it: truncated, and the
	// buffer grows only with what arrived.
	short := append(binary.BigEndian.AppendUint32(nil, 1<<19), make([]byte, 100)...)
	if _, err := ReadFrame(bytes.NewReader(short), 1<<20); err == nil {
		t.Fatal("truncated frame accepted")
	}
}

// slowHandler answers Metadata requests after a delay given by the client id
// ("slow" waits), everything else at once, so responses complete out of order.
type slowHandler struct{}

func (slowHandler) Handle(ctx context.Context, req *Request, respond Responder) {
	resp := req.Body.ResponseKind()
	resp.SetVersion(req.Version)
	if req.ClientID == "slow" {
		go func() {
			time.Sleep(50 * time.Millisecond)
			respond(resp, nil)
		}()
		return
	}
	respond(resp, nil)
}

func TestResponsesInRequestOrder(t *testing.T) {
	_, ln := startServer(t, slowHandler{}, 8)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []byte
	for i := range 6 {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(int16(i * 2))
		id := "fast"
		if i%2 == 0 {
			id = "slow"
		}
		out = append(out, frame(encodeRequest(req, int32(100+i), id))...)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := range 6 {
		f, err := ReadFrame(br, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if corr := int32(binary.BigEndian.Uint32(f)); corr != int32(100+i) {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
	}
}

func TestUnsupportedApiVersionsAnswer(t *testing.T) {
	_, ln := startServer(t, slowHandler{}, 2)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(99)
	c.Write(frame(encodeRequest(av, 5, "new-client")))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := ReadFrame(c, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(f[4:]); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 35 || len(resp.ApiKeys) != 2 {
		t.Fatalf("got %+v", resp)
	}
}

func TestBadFrameClosesConnection(t *testing.T) {
	_, ln := startServer(t, slowHandler{}, 2)
	for _, junk := range [][]byte{[]byte("GET / HTTP/1.1\r\n\r\n"), {0x16, 0x03, 0x01, 0x00, 0x10}, {0, 0, 0, 1, 0}} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(junk)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("%q: read %d bytes, want close", junk, n)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("%q: connection left open", junk)
		}
		c.Close()
	}
}

func FuzzParseRequest(f *testing.F) {
	for v := int16(0); v <= 12; v += 3 {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		topic := "t"
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
		f.Add(encodeRequest(req, 1, "fuzz"))
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "x", "1"
	f.Add(encodeRequest(av, 2, ""))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRequest(b, testVersions{})
		if err != nil || r.Body == nil {
			return
		}
		// Whatever decodes must re-encode without panicking.
		_ = r.Body.AppendTo(nil)
	})
}

// waitHandler parks every request until its connection's context ends, like
// a long poll that nothing wakes.
type waitHandler struct{}

func (waitHandler) Handle(ctx context.Context, req *Request, respond Responder) {
	go func() {
		<-ctx.Done()
		respond(nil, nil)
	}()
}

// A client that hangs up while a request waits must not pin the connection
// (and its goroutines and descriptor) until the wait would have ended.
func TestHangUpCancelsWaitingRequests(t *testing.T) {
	srv, ln := startServer(t, waitHandler{}, 4)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(1)
	c.Write(frame(encodeRequest(req, 1, "x")))
	waitConns(t, srv, 1)
	c.Close()
	waitConns(t, srv, 0)
}

// waitConns polls until srv has n open connections.
func waitConns(t *testing.T, srv *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		srv.mu.Lock()
		got := len(srv.mu.conns)
		srv.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// startServer serves h on a loopback port until the test ends.
func startServer(t *testing.T, h Handler, inFlight int) (*Server, net.Listener) {
	t.Helper()
	srv := NewServer(ServerConfig{MaxFrameBytes: 1 << 20, MaxInFlight: inFlight}, h, testVersions{}, zerolog.Nop())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Serve(ln)
	t.Cleanup(func() { ln.Close(); srv.Close() })
	return srv, ln
}
