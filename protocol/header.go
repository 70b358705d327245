package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/protocol/fjordmsg"
)

// Request is one decoded client request.
type Request struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string // empty when the client sent null
	ClientHost    string // the peer's address as Kafka reports it: "/" + IP
	// Body is the decoded request, nil only for an ApiVersions request of a
	// version newer than this broker knows (answered by the front end itself).
	// Byte fields of Body alias the frame.
	Body kmsg.Request
	// Recycle is set by a handler, before Handle returns, to say nothing
	// refers to the request's bytes any more, so the frame can be reused.
	Recycle bool
	// Mute stops the connection's reader for d from now on (a later call
	// can only extend it): KIP-219's muted channel, by which a broker
	// throttles a client over its quota after answering at once. Set by
	// the front end; safe from any goroutine.
	Mute func(d time.Duration)
	// Principal is who the connection authenticated as when the request
	// was read, in Kafka's "User:<name>" form (AnonymousPrincipal when
	// nobody did).
	Principal string
	// Client is the connection's record in the client registry
	// (clients.go), for the handler to note the errors it returns.
	Client *Client

	frame []byte
}

// ErrUnknownKey and ErrUnsupportedVersion close the connection, as Kafka does:
// the body of such a request cannot be parsed, so nothing can be answered.
var (
	ErrUnknownKey         = errors.New("protocol: unknown api key")
	ErrUnsupportedVersion = errors.New("protocol: unsupported api version")
	ErrMalformed          = errors.New("protocol: malformed request")
)

const apiVersionsKey = 18

// Versions tells the front end which keys and versions the broker serves.
type Versions interface {
	// Supported returns the version range served for key; ok is false for
	// keys not served at all.
	Supported(key int16) (min, max int16, ok bool)
	// All lists every served key with its range, for ApiVersions.
	All() []kmsg.ApiVersionsResponseApiKey
}

// ParseRequest decodes a frame body (without its size prefix). It never
// panics on bad input; every failure is an error that closes the connection.
func ParseRequest(frame []byte, vs Versions) (req *Request, err error) {
	defer func() {
		// kmsg checks lengths, but a decoder bug must cost one connection,
		// not the process.
		if r := recover(); r != nil {
			req, err = nil, fmt.Errorf("%w: decoder panic: %v", ErrMalformed, r)
		}
	}()
	if len(frame) < minRequestFrame {
		return nil, fmt.Errorf("%w: %d byte header", ErrMalformed, len(frame))
	}
	r := &Request{
		Key:           int16(binary.BigEndian.Uint16(frame[0:])),
		Version:       int16(binary.BigEndian.Uint16(frame[2:])),
		CorrelationID: int32(binary.BigEndian.Uint32(frame[4:])),
	}
	rest := frame[8:]
	// client_id: every request header from v1 on has it; header v0 is only
	// used by ControlledShutdown v0, which Fjord does not serve.
	if len(rest) < 2 {
		return nil, fmt.Errorf("%w: no client id", ErrMalformed)
	}
	idLen := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if idLen >= 0 {
		if int(idLen) > len(rest) {
			return nil, fmt.Errorf("%w: client id length %d", ErrMalformed, idLen)
		}
		r.ClientID = string(rest[:idLen])
		rest = rest[idLen:]
	}

	min, max, ok := vs.Supported(r.Key)
	if !ok {
		return r, fmt.Errorf("%w %d (client %q)", ErrUnknownKey, r.Key, r.ClientID)
	}
	if r.Key == apiVersionsKey && r.Version > max {
		// KIP-511: answer with our own range so the client can retry lower.
		return r, nil
	}
	if r.Version < min || r.Version > max {
		return r, fmt.Errorf("%w: key %d version %d, serving %d-%d (client %q)",
			ErrUnsupportedVersion, r.Key, r.Version, min, max, r.ClientID)
	}
	body := kmsg.RequestForKey(r.Key)
	if body == nil {
		body = fjordmsg.RequestForKey(r.Key) // Fjord's private keys
	}
	if body == nil {
		return r, fmt.Errorf("%w %d", ErrUnknownKey, r.Key)
	}
	body.SetVersion(r.Version)
	if body.IsFlexible() {
		if rest, err = skipTags(rest); err != nil {
			return r, err
		}
	}
	if err := body.ReadFrom(rest); err != nil {
		return r, fmt.Errorf("%w: key %d v%d: %v", ErrMalformed, r.Key, r.Version, err)
	}
	r.Body = body
	r.frame = frame
	return r, nil
}

// skipTags skips a tagged-field section: uvarint count, then per field a
// uvarint tag, a uvarint size and that many bytes. No header tag is used by
// any request Fjord serves.
func skipTags(b []byte) ([]byte, error) {
	n, used := binary.Uvarint(b)
	if used <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: bad tag count", ErrMalformed)
	}
	b = b[used:]
	for range n {
		_, used = binary.Uvarint(b)
		if used <= 0 {
			return nil, fmt.Errorf("%w: bad tag", ErrMalformed)
		}
		b = b[used:]
		sz, used := binary.Uvarint(b)
		if used <= 0 || sz > uint64(len(b)-used) {
			return nil, fmt.Errorf("%w: bad tag size", ErrMalformed)
		}
		b = b[used+int(sz):]
	}
	return b, nil
}

// AppendResponse appends a complete response frame (size prefix included).
func AppendResponse(dst []byte, key int16, correlationID int32, resp kmsg.Response) []byte {
	if dst, ok := rawTokenFrame(dst, resp); ok {
		return dst
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && key != apiVersionsKey {
		dst = append(dst, 0) // no header tags
	}
	dst = resp.AppendTo(dst)
	fillSize(dst[start:])
	return dst
}

// UnsupportedAPIVersions is the answer to an ApiVersions request newer than
// the broker: a v0 response carrying UNSUPPORTED_VERSION and the broker's
// ranges.
func UnsupportedAPIVersions(vs Versions) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = 35 // UNSUPPORTED_VERSION
	resp.ApiKeys = vs.All()
	return resp
}
