package active

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"math/big"
	"net"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/node"
	"github.com/fjordlog/fjord/protocol"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"go.etcd.io/raft/v3/raftpb"
)

// plainUsers is a PLAIN authenticator over a user → password map, the
// shape of a listener's JAAS user_<name> options.
type plainUsers map[string]string

func (plainUsers) Mechanisms() []string { return []string{"PLAIN"} }

func (u plainUsers) Start(string, net.Addr, *tls.ConnectionState) (protocol.SASLExchange, error) {
	return u, nil
}

func (u plainUsers) Step(msg []byte) ([]byte, bool, string, time.Duration, error) {
	f := bytes.Split(msg, []byte{0})
	if len(f) != 3 || len(f[1]) == 0 {
		return nil, false, "", 0, errors.New("malformed PLAIN message")
	}
	if pw, ok := u[string(f[1])]; !ok || pw != string(f[2]) {
		return nil, false, "", 0, errors.New("bad credentials")
	}
	return nil, true, "User:" + string(f[1]), 0, nil
}

// decisions records what AuthorizeRaft was asked.
type decisions struct {
	mu  sync.Mutex
	got []string // "principal@host"
}

func (d *decisions) add(principal, host string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, principal+"@"+host)
}

func (d *decisions) has(s string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.got, s)
}

// startVoters starts n controllers (node ids 0..n-1) over CONTROLLER
// listeners on loopback, cfg adjusting each config, and waits until they
// agree on a leader.
func startVoters(t *testing.T, n int, adjust func(*Config)) []*Controller {
	t.Helper()
	lns := make([]net.Listener, n)
	voters := map[int32]string{}
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], voters[int32(i)] = ln, ln.Addr().String()
	}
	cs := make([]*Controller, n)
	for i := range cs {
		cfg := testConfig()
		cfg.NodeID, cfg.ClusterID, cfg.Voters = int32(i), "test-cluster", voters
		cfg.Dir, cfg.Listener, cfg.TickInterval = t.TempDir(), lns[i], 10*time.Millisecond
		cfg.KafkaHandler, cfg.KafkaVersions = testFront{&cs[i]}, testFront{}
		adjust(&cfg)
		c, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.Serve()
		cs[i] = c
	}
	checkFor(t, 10*time.Second, "a leader all agree on", func() bool {
		l := cs[0].Leader()
		for _, c := range cs {
			if c.Leader() != l || l < 0 {
				return false
			}
		}
		return cs[l].node.IsLeader()
	})
	return cs
}

type raftState struct {
	term   uint64
	leader int32
}

func raftStates(cs []*Controller) []raftState {
	out := make([]raftState, len(cs))
	for i, c := range cs {
		out[i] = raftState{c.node.Term(), c.Leader()}
	}
	return out
}

// settleQuorum proves the quorum still commits (every voter applies a new
// record) and that no voter's term or leader moved since before.
func settleQuorum(t *testing.T, cs []*Controller, before []raftState, broker int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	l := cs[before[0].leader]
	idx, err := l.node.Propose(ctx, controller.NewRecord(controller.RegisterBroker{ID: broker, Incarnation: [16]byte{byte(broker)}}))
	if err != nil {
		t.Fatalf("propose on the leader: %v", err)
	}
	for i, c := range cs {
		if err := c.WaitFor(ctx, func(img *controller.Image) bool { return img.Version() >= idx }); err != nil {
			t.Fatalf("voter %d: %v", i, err)
		}
	}
	if got := raftStates(cs); !slices.Equal(got, before) {
		t.Fatalf("term/leader per voter %+v, was %+v", got, before)
	}
}

// rawRaft opens a raft connection to addr by hand: the preamble, then the
// SASL exchange as user (none when user is "").
func rawRaft(t *testing.T, addr, user, pass string) (net.Conn, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(node.Preamble[:]); err != nil {
		t.Fatal(err)
	}
	if user == "" {
		return c, nil
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	return c, raftAuthenticator(plain.Auth{User: user, Pass: pass}.AsMechanism())(t.Context(), c)
}

// sendFrames writes ms as raft frames (node's wire format).
func sendFrames(t *testing.T, c net.Conn, ms ...raftpb.Message) {
	t.Helper()
	var b []byte
	for _, m := range ms {
		body, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
		b = append(b, body...)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// closedByPeer reports whether the listener closed c within 10 s (a raft
// connection carries nothing back).
func closedByPeer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestRaftOnSASLListener: on a SASL CONTROLLER listener, raft frames reach
// raft only over a connection that authenticated, as a principal
// AuthorizeRaft accepts, from a voter, one voter per connection. Each
// refused frame is a heartbeat with a far higher term, which would depose
// the leader if raft saw it: no voter's term or leader moves, and the
// quorum keeps committing. A heartbeat whose commit index is past the log
// (one packet killed the node before) is dropped and the node lives on.
func TestRaftOnSASLListener(t *testing.T) {
	var asked decisions
	cs := startVoters(t, 3, func(c *Config) {
		c.SASL = plainUsers{"admin": "admin-secret", "bob": "bob-secret"}
		c.RaftSASL = plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()
		c.AuthorizeRaft = func(principal, host string) bool {
			asked.add(principal, host)
			return principal == "User:admin"
		}
	})
	before := raftStates(cs)
	lead := before[0].leader
	f := (lead + 1) % 3     // a follower, the target
	third := (lead + 2) % 3 // the other follower
	addr := cs[f].cfg.Listener.Addr().String()
	term := before[f].term
	hb := func(from int32, term, commit uint64) raftpb.Message {
		return raftpb.Message{Type: raftpb.MsgHeartbeat, From: raftID(from), To: raftID(f), Term: term, Commit: commit}
	}
	depose := hb(third, term+100, 0)

	t.Run("unauthenticated", func(t *testing.T) {
		c, _ := rawRaft(t, addr, "", "")
		sendFrames(t, c, depose)
		if !closedByPeer(c) {
			t.Fatal("a raft connection that skipped SASL is open")
		}
		settleQuorum(t, cs, before, 10)
	})
	t.Run("wrong password", func(t *testing.T) {
		c, err := rawRaft(t, addr, "admin", "guess")
		if err == nil {
			t.Fatal("a wrong password authenticated")
		}
		if !closedByPeer(c) {
			t.Fatal("a raft connection that failed SASL is open")
		}
		settleQuorum(t, cs, before, 11)
	})
	t.Run("not authorized", func(t *testing.T) {
		c, err := rawRaft(t, addr, "bob", "bob-secret")
		if err != nil {
			t.Fatalf("bob authenticates (authorization comes after): %v", err)
		}
		sendFrames(t, c, depose)
		if !closedByPeer(c) {
			t.Fatal("a raft connection of a principal AuthorizeRaft refuses is open")
		}
		if !asked.has("User:bob@127.0.0.1") || !asked.has("User:admin@127.0.0.1") {
			t.Fatalf("AuthorizeRaft was asked %v", asked.got)
		}
		settleQuorum(t, cs, before, 12)
	})
	t.Run("not a voter", func(t *testing.T) {
		c, err := rawRaft(t, addr, "admin", "admin-secret")
		if err != nil {
			t.Fatal(err)
		}
		sendFrames(t, c, hb(7, term+100, 0))
		if !closedByPeer(c) {
			t.Fatal("a raft connection whose frames come from node 7 (not a voter) is open")
		}
		settleQuorum(t, cs, before, 13)
	})
	t.Run("second sender", func(t *testing.T) {
		c, err := rawRaft(t, addr, "admin", "admin-secret")
		if err != nil {
			t.Fatal(err)
		}
		sendFrames(t, c, hb(lead, term, 0), depose)
		if !closedByPeer(c) {
			t.Fatal("a raft connection carrying two senders is open")
		}
		settleQuorum(t, cs, before, 14)
	})
	t.Run("commit past the log", func(t *testing.T) {
		c, err := rawRaft(t, addr, "admin", "admin-secret")
		if err != nil {
			t.Fatal(err)
		}
		sendFrames(t, c, hb(lead, term, 1000000), hb(lead, term+100, 1000000))
		settleQuorum(t, cs, before, 15)
	})
	t.Run("huge length prefix", func(t *testing.T) {
		// Before authentication the SASL frames are bounded (512 KiB).
		c, _ := rawRaft(t, addr, "", "")
		if _, err := c.Write([]byte{0x7f, 0xff, 0xff, 0xff}); err != nil {
			t.Fatal(err)
		}
		if !closedByPeer(c) {
			t.Fatal("a 2 GiB SASL frame did not close the connection")
		}
		// After it raft's bound applies, and a frame under that bound
		// costs what arrives, not what its prefix claims.
		c, err := rawRaft(t, addr, "admin", "admin-secret")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte{0x7f, 0xff, 0xff, 0xff}); err != nil {
			t.Fatal(err)
		}
		if !closedByPeer(c) {
			t.Fatal("a 2 GiB raft frame did not close the connection")
		}
		c, err = rawRaft(t, addr, "admin", "admin-secret")
		if err != nil {
			t.Fatal(err)
		}
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		b := binary.BigEndian.AppendUint32(nil, node.MaxFrameSize-1)
		if _, err := c.Write(append(b, make([]byte, 1000)...)); err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).CloseWrite()
		if !closedByPeer(c) {
			t.Fatal("a truncated frame did not close the connection")
		}
		runtime.ReadMemStats(&ms1)
		if got := ms1.TotalAlloc - ms0.TotalAlloc; got > 16<<20 {
			t.Fatalf("a frame claiming %d bytes and carrying 1000 cost %d bytes of allocation", node.MaxFrameSize-1, got)
		}
		settleQuorum(t, cs, before, 16)
	})
}

// A PLAINTEXT listener's raft connections are User:ANONYMOUS to
// AuthorizeRaft, and a refused one never reaches raft: here every voter
// refuses the others, so no leader is ever elected.
func TestRaftAuthorizePlaintext(t *testing.T) {
	var asked decisions
	lns := make([]net.Listener, 3)
	voters := map[int32]string{}
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], voters[int32(i)] = ln, ln.Addr().String()
	}
	var cs []*Controller
	for i := range lns {
		cfg := testConfig()
		cfg.NodeID, cfg.Voters, cfg.Dir, cfg.Listener, cfg.TickInterval = int32(i), voters, t.TempDir(), lns[i], 10*time.Millisecond
		cfg.KafkaHandler, cfg.KafkaVersions = testFront{}, testFront{}
		cfg.AuthorizeRaft = func(principal, host string) bool {
			asked.add(principal, host)
			return false
		}
		c, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	// Each voter redials the others with a backoff of at most 500 ms, and
	// campaigns every 10-20 ticks (100-200 ms): a dozen refused
	// connections take several election timeouts, none won.
	checkFor(t, 10*time.Second, "a dozen refused raft connections", func() bool {
		asked.mu.Lock()
		defer asked.mu.Unlock()
		return len(asked.got) >= 12
	})
	if !asked.has("User:ANONYMOUS@127.0.0.1") {
		t.Fatalf("AuthorizeRaft was asked %v", asked.got)
	}
	for i, c := range cs {
		if c.Leader() >= 0 {
			t.Fatalf("voter %d follows %d though every raft connection was refused", i, c.Leader())
		}
	}
}

// The mux counts raft connections from the preamble to the close and
// refuses more than maxRaft; a close makes room again.
func TestRaftConnectionsBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := newConnMux(ln, nil, testConfig().Logger)
	m.maxRaft = 2
	done := make(chan struct{})
	go func() { m.run(); close(done) }()
	defer func() { ln.Close(); <-done }()

	var held []net.Conn
	for range 2 {
		rawRaft(t, ln.Addr().String(), "", "")
		got, err := m.raft.Accept()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, got)
	}
	c, _ := rawRaft(t, ln.Addr().String(), "", "")
	if !closedByPeer(c) {
		t.Fatal("a third raft connection is open with maxRaft 2")
	}
	held[0].Close()
	held[0].Close() // raft may close twice: counted out once
	rawRaft(t, ln.Addr().String(), "", "")
	got, err := m.raft.Accept()
	if err != nil {
		t.Fatal(err)
	}
	got.Close()
	m.raftConns.Lock()
	open := m.raftConns.open
	m.raftConns.Unlock()
	if open != 1 {
		t.Fatalf("%d raft connections counted open, want 1", open)
	}
}

// certificate is a throwaway self-signed certificate named cn.
func certificate(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}

// On a TLS listener AuthorizeRaft gets the client certificate's principal
// as TLSPrincipal maps it; a connection without a certificate is
// User:ANONYMOUS.
func TestRaftAuthorizeTLSPrincipal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &tls.Config{Certificates: []tls.Certificate{certificate(t, "controller")}, ClientAuth: tls.RequestClientCert}
	m := newConnMux(ln, func() *tls.Config { return srv }, testConfig().Logger)
	m.tlsPrincipal = func(cs *tls.ConnectionState) string {
		if len(cs.PeerCertificates) == 0 {
			return ""
		}
		return "User:" + cs.PeerCertificates[0].Subject.CommonName
	}
	var asked decisions
	m.authorize = func(principal, host string) bool {
		asked.add(principal, host)
		return principal == "User:voter-1"
	}
	done := make(chan struct{})
	go func() { m.run(); close(done) }()
	defer func() { ln.Close(); <-done }()

	dial := func(cn string) net.Conn {
		cfg := &tls.Config{InsecureSkipVerify: true}
		if cn != "" {
			cfg.Certificates = []tls.Certificate{certificate(t, cn)}
		}
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write(node.Preamble[:]); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, cn := range []string{"mallory", ""} {
		if c := dial(cn); !closedByPeer(c) {
			t.Fatalf("raft connection with certificate %q is open", cn)
		}
	}
	dial("voter-1")
	got, err := m.raft.Accept()
	if err != nil {
		t.Fatal(err)
	}
	got.Close()
	for _, want := range []string{"User:mallory", "User:ANONYMOUS", "User:voter-1"} {
		if !asked.has(want + "@127.0.0.1") {
			t.Errorf("AuthorizeRaft not asked about %s: %v", want, asked.got)
		}
	}
}
