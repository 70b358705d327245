package protocol

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The client registry: what each open connection has shown of its client
// (software name and version from ApiVersions v3+, KIP-511; the API
// versions it uses; its principal) and the last errors the broker returned
// to it, for an operator asking which service still runs an old client.
// It lives as long as its connection.

// Bounds on what one connection's record holds, whatever the client sends.
const (
	// MaxClientErrors is how many of the latest errors a record keeps.
	MaxClientErrors = 8
	// maxClientString clips the strings a client chooses (client id,
	// software name and version).
	maxClientString = 128
	// maxErrorWhere clips an error's context (a topic-partition, a group).
	maxErrorWhere = 160
)

// ClientError is one error code the broker returned to a client.
type ClientError struct {
	At      time.Time
	Key     int16  // the request's API key
	Version int16  // and version
	Code    int16  // the Kafka error code
	Where   string // what it was about ("topic-3", a group id); may be ""
}

// APIVersion is the version of an API a client last used.
type APIVersion struct {
	Key, Version int16
}

// ClientInfo is a snapshot of one connection's record.
type ClientInfo struct {
	Listener  string // ServerConfig.Name
	Remote    string // the peer's ip:port
	Since     time.Time
	ClientID  string // of its latest request
	Principal string // of its latest request
	// SoftwareName and SoftwareVersion are what its ApiVersions v3+
	// request said; "" before one (older clients never send them).
	SoftwareName, SoftwareVersion string
	Requests                      int64
	Versions                      []APIVersion // by key
	Errors                        []ClientError
}

// Client is one connection's record. The connection's reader updates it
// per request (NoteRequest); a handler adds the errors it returns
// (NoteError) from any goroutine.
//
// Invariant: len(errs) <= MaxClientErrors, versions sorted by key with one
// entry per key; every string within its clip.
type Client struct {
	listener, remote string
	since            time.Time

	mu        sync.Mutex
	clientID  string
	principal string
	swName    string
	swVersion string
	requests  int64
	versions  []APIVersion
	errs      []ClientError // a ring's contents, oldest first
}

func newClient(listener, remote string) *Client {
	return &Client{listener: listener, remote: remote, since: time.Now()}
}

// NoteRequest records a request the connection read.
func (c *Client) NoteRequest(req *Request) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	if req.ClientID != c.clientID {
		c.clientID = clipString(req.ClientID, maxClientString)
	}
	c.principal = req.Principal // the connection's own, not the client's choice
	if av, ok := req.Body.(*kmsg.ApiVersionsRequest); ok && req.Version >= 3 {
		c.swName = clipString(av.ClientSoftwareName, maxClientString)
		c.swVersion = clipString(av.ClientSoftwareVersion, maxClientString)
	}
	i, found := slices.BinarySearchFunc(c.versions, req.Key, func(v APIVersion, k int16) int { return int(v.Key) - int(k) })
	if found {
		c.versions[i].Version = req.Version
	} else {
		// One entry per key the server serves (ParseRequest refused the
		// rest): bounded by the API table.
		c.versions = slices.Insert(c.versions, i, APIVersion{req.Key, req.Version})
	}
}

// NoteError records an error code returned for a request; the oldest of
// MaxClientErrors goes.
func (c *Client) NoteError(key, version, code int16, where string) {
	if c == nil || code == 0 {
		return
	}
	e := ClientError{At: time.Now(), Key: key, Version: version, Code: code, Where: clipString(where, maxErrorWhere)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) >= MaxClientErrors {
		c.errs = append(c.errs[:0], c.errs[len(c.errs)-MaxClientErrors+1:]...)
	}
	c.errs = append(c.errs, e)
}

// Info returns a snapshot; the caller owns it.
func (c *Client) Info() ClientInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ClientInfo{
		Listener: c.listener, Remote: c.remote, Since: c.since,
		ClientID: c.clientID, Principal: c.principal,
		SoftwareName: c.swName, SoftwareVersion: c.swVersion,
		Requests: c.requests,
		Versions: slices.Clone(c.versions),
		Errors:   slices.Clone(c.errs),
	}
}

// Clients returns snapshots of at most limit of the server's open
// connections, and how many are open.
func (s *Server) Clients(limit int) ([]ClientInfo, int) {
	s.mu.Lock()
	total := len(s.mu.conns)
	cs := make([]*Client, 0, min(total, max(limit, 0)))
	for c := range s.mu.conns {
		if len(cs) >= limit {
			break
		}
		cs = append(cs, c.client)
	}
	s.mu.Unlock()
	out := make([]ClientInfo, len(cs))
	for i, c := range cs {
		out[i] = c.Info()
	}
	return out, total
}

// clipString returns s, cut to at most n bytes on a rune boundary and
// copied when cut (so the original's memory is not kept).
func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n])
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
