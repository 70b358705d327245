package consumer

import (
	"errors"
	"fmt"
)

// respError is an error answered in a response: a sentinel of package
// group, which gives the Kafka error code (group.ErrorCode), and the
// message Kafka sends with it.
type respError struct {
	code error
	msg  string
}

func (e *respError) Error() string { return "consumer: " + e.msg }
func (e *respError) Unwrap() error { return e.code }

// KafkaMessage is the ErrorMessage Kafka sends with the error, for a
// caller that answers it outside a response this package built (an
// Upgrade refused).
func (e *respError) KafkaMessage() string { return e.msg }

func errf(code error, format string, args ...any) error {
	return &respError{code: code, msg: fmt.Sprintf(format, args...)}
}

// errorMessage is the ErrorMessage a response carries for err.
func errorMessage(err error) *string {
	var re *respError
	if errors.As(err, &re) {
		return &re.msg
	}
	s := err.Error()
	return &s
}
