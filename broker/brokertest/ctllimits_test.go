package brokertest

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
)

// The CONTROLLER listener is a front door too: anyone who reaches the port
// can connect, so max.connections.per.ip bounds its Kafka half as it bounds
// the client listeners (counted apart from them). A stranger holding the
// allowance gets its next connection closed unanswered.
func TestControllerListenerConnectionLimit(t *testing.T) {
	c, err := Start(Options{Nodes: 1, Dir: t.TempDir(), Configure: func(_ int32, cfg *config.Config) {
		cfg.MaxConnectionsPerIP = 3
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	m, err := c.member(1)
	if err != nil {
		t.Fatal(err)
	}
	// The clients' allowance is the clients' own: three client
	// connections held do not use the controller listener's.
	var held []net.Conn
	defer func() {
		for _, h := range held {
			h.Close()
		}
	}()
	for range 3 {
		conn, err := answered(c.Addr(1))
		if err != nil {
			t.Fatalf("client connection: %v", err)
		}
		held = append(held, conn)
	}
	for i := range 3 {
		conn, err := answered(m.ctlAddr)
		if err != nil {
			t.Fatalf("controller connection %d of the allowance: %v", i+1, err)
		}
		held = append(held, conn)
	}
	if conn, err := answered(m.ctlAddr); err == nil {
		conn.Close()
		t.Fatal("a fourth connection from one ip was served on the CONTROLLER listener; the allowance is 3")
	}
}

// answered opens a connection to addr and returns it once an ApiVersions
// v0 request on it is answered.
func answered(addr string) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	body := req.AppendTo(nil)
	frame := binary.BigEndian.AppendUint32(nil, uint32(8+len("t")+2+len(body)))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, 0)
	frame = binary.BigEndian.AppendUint32(frame, 1) // correlation id
	frame = binary.BigEndian.AppendUint16(frame, 1)
	frame = append(frame, 't')
	frame = append(frame, body...)
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(frame); err != nil {
		conn.Close()
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		conn.Close()
		return nil, err
	}
	if _, err := io.CopyN(io.Discard, conn, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}
