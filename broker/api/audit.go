package api

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/protocol/fjordmsg"
)

// The audit log: one JSON line per denied authorization and per mutating
// admin request (principal, client address, API, resource, outcome), a
// stream apart from the operational log (fjord.audit.log.file: a file, ""
// for stderr with "audit":true on every line, or off).
//
// Two queues feed one writer goroutine, so a request never does the
// file's I/O itself:
//   - keep carries the lines of mutating requests (and of denied ones):
//     never dropped. When it is full (the file is slow) the request that
//     emits one waits for room: a mutation that cannot be audited is held
//     back rather than done unrecorded. Mutations are admin requests,
//     decided one quorum round trip at a time, so this bounds nothing hot.
//   - ch carries denials and failed logins, which a client can make by
//     the thousand in one request (a Metadata naming 50k forbidden
//     topics): when full, a line is dropped and counted
//     (fjord_audit_dropped_total, and a warning once per burst). The
//     writer drains keep first.

// AuditQueue is the length of each queue.
const AuditQueue = 4096

// Audit is the stream. Nil writes nothing.
//
// Invariant: ch and keep are nil iff the audit log is off; only the
// writer goroutine (Run) touches w after start.
type Audit struct {
	log zerolog.Logger
	// onDrop counts a dropped line (fjord_audit_dropped_total); done is
	// the node's end, when a kept line stops waiting for room.
	onDrop  func()
	done    <-chan struct{}
	ch      chan []byte
	keep    chan []byte
	w       io.WriteCloser
	marker  bool // stderr: mark lines as audit lines
	dropped atomic.Uint64
	warned  atomic.Bool // a drop was logged since the queue last drained
}

// OpenAudit opens the audit stream as fjord.audit.log.file says (dest: a
// file, "" for stderr, "off" for none: a nil Audit); Run writes it.
func OpenAudit(dest string, done <-chan struct{}, log zerolog.Logger, onDrop func()) (*Audit, error) {
	if dest == "off" {
		return nil, nil
	}
	if dest == "" {
		a := NewAudit(nopCloser{os.Stderr}, AuditQueue, AuditQueue, done, log, onDrop)
		a.marker = true
		return a, nil
	}
	f, err := os.OpenFile(dest, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fjord.audit.log.file %s: %w", dest, err)
	}
	return NewAudit(f, AuditQueue, AuditQueue, done, log, onDrop), nil
}

// NewAudit is an audit stream to w with queues of the lengths given (0:
// that queue is off); OpenAudit is the node's, tests make their own.
func NewAudit(w io.WriteCloser, queue, keep int, done <-chan struct{}, log zerolog.Logger, onDrop func()) *Audit {
	a := &Audit{log: log, onDrop: onDrop, done: done, w: w, ch: make(chan []byte, queue)}
	if keep > 0 {
		a.keep = make(chan []byte, keep)
	}
	return a
}

// Dropped is the number of lines dropped so far.
func (a *Audit) Dropped() uint64 { return a.dropped.Load() }

// Queued takes one queued denial line, for tests; nil when none waits.
func (a *Audit) Queued() []byte {
	select {
	case line := <-a.ch:
		return line
	default:
		return nil
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Run is the writer goroutine: it writes lines until the node ends, then
// what is queued, then closes the file. keep's lines go first.
func (a *Audit) Run() {
	defer a.w.Close()
	for {
		select {
		case line := <-a.keep:
			a.write(line)
			continue
		default:
		}
		select {
		case line := <-a.keep:
			a.write(line)
		case line := <-a.ch:
			a.write(line)
		case <-a.done:
			for {
				select {
				case line := <-a.keep:
					a.write(line)
				case line := <-a.ch:
					a.write(line)
				default:
					return
				}
			}
		}
	}
}

func (a *Audit) write(line []byte) {
	if _, err := a.w.Write(line); err != nil && a.warned.CompareAndSwap(false, true) {
		a.log.Warn().Err(err).Msg("audit log write failed; audit lines are being lost")
	}
	if len(a.ch) == 0 {
		a.warned.Store(false)
	}
}

// emit builds one line with fill and queues it: a kept line waits for
// room in keep (or the node's end), any other is dropped when ch is
// full.
func (a *Audit) emit(cc *Conn, key int16, kept bool, fill func(*zerolog.Event)) {
	if a == nil || a.ch == nil {
		return
	}
	var buf bytes.Buffer
	l := zerolog.New(&buf).With().Timestamp().Logger()
	ev := l.Log()
	if a.marker {
		ev = ev.Bool("audit", true)
	}
	listener := "client"
	if cc.Listener == CtlListener {
		listener = "controller"
	}
	ev = ev.Str("principal", cc.Principal).Str("client", strings.TrimPrefix(cc.ClientHost, "/")).Str("client_id", cc.ClientID).
		Str("listener", listener).Int16("api_key", key).Str("api", fjordmsg.AnyNameForKey(key))
	fill(ev)
	ev.Send()
	if kept {
		select {
		case a.keep <- buf.Bytes():
		case <-a.done:
		}
		return
	}
	select {
	case a.ch <- buf.Bytes():
	default:
		a.dropped.Add(1)
		if a.onDrop != nil {
			a.onDrop()
		}
		if a.warned.CompareAndSwap(false, true) {
			a.log.Warn().Msg("audit log queue full: dropping denied-request lines (fjord_audit_dropped_total counts them); mutations are never dropped")
		}
	}
}

// Denied records one denied authorization.
func (a *Audit) Denied(cc *Conn, key int16, op acl.Operation, rt acl.ResourceType, name string) {
	if a == nil {
		return
	}
	a.emit(cc, key, false, func(ev *zerolog.Event) {
		ev.Str("resource", rt.String()+":"+name).Str("operation", op.String()).Str("outcome", "denied")
	})
}

// AuthFailed records a failed SASL authentication on listener (an index
// of the advertised listeners): the mechanism and why, never the secret.
func (a *Audit) AuthFailed(listener int, remote net.Addr, mechanism, reason string) {
	if a == nil {
		return
	}
	cc := &Conn{Listener: listener, Principal: ""}
	if remote != nil {
		cc.ClientHost = remote.String()
		if h, _, err := net.SplitHostPort(remote.String()); err == nil {
			cc.ClientHost = h
		}
	}
	a.emit(cc, 36, false, func(ev *zerolog.Event) {
		ev.Str("mechanism", mechanism).Str("reason", reason).Str("outcome", "denied")
	})
}

// Admin records a mutating admin request and its outcome: "ok", or the
// error names the response carries.
func (a *Audit) Admin(cc *Conn, e *Entry, req kmsg.Request, resp kmsg.Response) {
	if a == nil || !e.Mutates {
		return
	}
	res := resourcesOf(req)
	codes := errorCodesOf(resp)
	var details []string
	if e.AuditDetails != nil {
		details = e.AuditDetails(req)
	}
	a.emit(cc, e.Key, true, func(ev *zerolog.Event) {
		ev.Strs("resources", res)
		if details != nil {
			ev.Strs("details", details)
		}
		if len(codes) == 0 {
			ev.Str("outcome", "ok")
			return
		}
		var names []string
		for _, c := range codes {
			if e := kerr.ErrorForCode(c); e != nil {
				names = append(names, e.(*kerr.Error).Message)
			} else {
				names = append(names, strconv.Itoa(int(c)))
			}
		}
		ev.Str("outcome", "error").Strs("errors", names)
	})
}

// resourceFields are the request fields that name what a request acts on.
var resourceFields = map[string]bool{"Topic": true, "TopicNames": true, "Group": true, "Groups": true,
	"ResourceName": true, "Name": true}

// resourcesOf lists, sorted and distinct, the names a request acts on.
func resourcesOf(req kmsg.Request) []string {
	seen := map[string]bool{}
	var walk func(v reflect.Value, field string)
	walk = func(v reflect.Value, field string) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem(), field)
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i), v.Type().Field(i).Name)
				}
			}
		case reflect.Slice:
			for i := 0; i < v.Len() && i < 1000; i++ {
				walk(v.Index(i), field)
			}
		case reflect.String:
			if resourceFields[field] && v.String() != "" {
				seen[v.String()] = true
			}
		}
	}
	walk(reflect.ValueOf(req), "")
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// errorCodesOf lists the distinct non-zero ErrorCode fields of resp.
func errorCodesOf(resp kmsg.Response) []int16 {
	if resp == nil {
		return nil
	}
	var out []int16
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				if f.Name == "ErrorCode" && v.Field(i).Kind() == reflect.Int16 {
					if c := int16(v.Field(i).Int()); c != 0 && !slices.Contains(out, c) {
						out = append(out, c)
					}
				} else if f.IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(resp))
	return out
}
