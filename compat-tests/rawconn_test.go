package compattests

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn speaks the Kafka wire protocol by hand over one TCP connection,
// at exactly the request version asked for (kgo always picks its own).
type rawConn struct {
	net.Conn
	corr int32
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c}
}

// frame encodes req (at its set version) with a request header, size first.
func (c *rawConn) frame(req kmsg.Request) []byte {
	c.corr++
	b := make([]byte, 4, 256)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(c.corr))
	const clientID = "fjord-compat-raw"
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0) // no tagged fields
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// readFrame reads one size-prefixed response frame.
func (c *rawConn) readFrame(timeout time.Duration) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(sz[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("response frame of %d bytes", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// parseResponse checks the correlation id and decodes the body into resp.
// flexibleHeader says whether a response header v1 (tagged fields) follows
// the correlation id: ApiVersions never has one.
func parseResponse(frame []byte, corr int32, resp kmsg.Response, flexibleHeader bool) error {
	if len(frame) < 4 {
		return fmt.Errorf("response frame of %d bytes", len(frame))
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		return fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	body := frame[4:]
	if flexibleHeader {
		var err error
		if body, err = skipTags(body); err != nil {
			return err
		}
	}
	return resp.ReadFrom(body)
}

func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("bad tagged field count")
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		_, k = binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[k:]
		sz, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < sz {
			return nil, errors.New("bad tag size")
		}
		b = b[k+int(sz):]
	}
	return b, nil
}

// roundTrip sends req and decodes its response.
func (c *rawConn) roundTrip(t testing.TB, req kmsg.Request) kmsg.Response {
	t.Helper()
	return c.roundTripFrame(t, req, c.frame(req))
}

// roundTripFrame sends an already-encoded (maybe corrupted) frame of req.
func (c *rawConn) roundTripFrame(t testing.TB, req kmsg.Request, frame []byte) kmsg.Response {
	t.Helper()
	if _, err := c.Write(frame); err != nil {
		t.Fatalf("write %T: %v", req, err)
	}
	buf, err := c.readFrame(15 * time.Second)
	if err != nil {
		t.Fatalf("reading response to %T v%d: %v", req, req.GetVersion(), err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := parseResponse(buf, c.corr, resp, req.IsFlexible() && req.Key() != 18); err != nil {
		t.Fatalf("parsing response to %T v%d: %v", req, req.GetVersion(), err)
	}
	return resp
}

// expectClosed waits for the broker to close the connection.
func (c *rawConn) expectClosed(t testing.TB, what string, timeout time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("%s: connection still open after %v", what, timeout)
			}
			return // EOF or reset: closed
		}
		if n > 0 {
			t.Logf("%s: broker sent %d bytes before closing: %q", what, n, buf[:min(n, 64)])
		}
	}
}
