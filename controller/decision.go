package controller

import "github.com/twmb/franz-go/pkg/kmsg"

// Decision is one controller request being decided: all of the active
// controller's work on it but the I/O. The driver (controller/active, or a
// test) runs it in rounds:
//
//	for {
//		recs, ok := d.Next(img)   // img: the applied image now
//		if !ok { break }
//		code := propose(recs)     // one batch; wait until it applies
//		d.Proposed(code)
//	}
//	resp, notes := d.Answer(img)  // img: the applied image after the last round
//
// Most requests are one round. AlterPartition and CreatePartitions take
// more: a partition named again, or the next topic, is decided against the
// image with the earlier round applied (see DecideAlterPartition and
// DecideCreatePartitions). A round may have no records; the driver then
// proposes nothing and reports code 0.
//
// A Decision reads no clock and draws no randomness: the time (now, in
// milliseconds) and the fresh ids it needs are its constructor's
// arguments, drawn by the driver. It holds the request until Answer; the
// driver must not change it meanwhile. A Decision is used once, by one
// goroutine.
type Decision interface {
	// Next decides the next round against img, which has every earlier
	// round's records applied, and returns its records to propose as one
	// batch; ok is false when every round has been decided.
	Next(img *Image) (recs []Record, ok bool)
	// Proposed reports how the round Next just returned went: 0 if its
	// records applied (or it had none), else the Kafka error code its
	// proposal failed with (NOT_CONTROLLER, REQUEST_TIMED_OUT), which the
	// answer gives for every part of the request that round decided.
	Proposed(code int16)
	// Answer is the response, read from the decisions and from img (the
	// applied image after the last round), and the notes worth a log line.
	// The caller owns the response.
	Answer(img *Image) (kmsg.Response, []Note)
}

// Note is a change a decision made, worth one log line: the driver logs
// Msg with Fields (alternating keys and values) at Info, or at Warn.
type Note struct {
	Warn   bool
	Msg    string
	Fields []any
}

func info(msg string, fields ...any) Note { return Note{Msg: msg, Fields: fields} }
func warn(msg string, fields ...any) Note { return Note{Warn: true, Msg: msg, Fields: fields} }

// single is a Decision of one round: decide runs at the first Next, and
// answer builds the response from the round's proposal code and the image
// after it.
type single struct {
	decide  func(img *Image) []Record
	answer  func(img *Image, code int16) (kmsg.Response, []Note)
	decided bool
	code    int16
}

func oneRound(decide func(img *Image) []Record, answer func(img *Image, code int16) (kmsg.Response, []Note)) *single {
	return &single{decide: decide, answer: answer}
}

func (s *single) Next(img *Image) ([]Record, bool) {
	if s.decided {
		return nil, false
	}
	s.decided = true
	return s.decide(img), true
}

func (s *single) Proposed(code int16) { s.code = code }

func (s *single) Answer(img *Image) (kmsg.Response, []Note) { return s.answer(img, s.code) }

// recordsOf is what a one-round decision proposes: the records of its
// results, in order, or none when propose is false (the request only
// validates, or what it asks is disabled).
func recordsOf[R any](results []R, propose bool, records func(R) []Record) []Record {
	if !propose {
		return nil
	}
	var recs []Record
	for _, r := range results {
		recs = append(recs, records(r)...)
	}
	return recs
}

// codeOr is the code a part of a request answers: its own decision's
// error, else the proposal's.
func codeOr(own, proposal int16) int16 {
	if own != 0 {
		return own
	}
	return proposal
}

// message is msg as a response's nullable error message: nil when empty.
func message(msg string) *string {
	if msg == "" {
		return nil
	}
	return &msg
}
