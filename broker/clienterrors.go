package broker

import (
	"reflect"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/protocol"
)

// noteResponseErrors records the error codes a response carries in its
// connection's client record (protocol.Client), for the console's clients
// page: at most maxNotedErrors per response, each with what it was about.
// Produce and Fetch, the hot paths, are read directly; other responses,
// by reflection over their ErrorCode fields, within a bound of visited
// values.
func noteResponseErrors(c *protocol.Client, key, version int16, resp kmsg.Response) {
	if c == nil || resp == nil {
		return
	}
	n := 0
	note := func(code int16, where string) bool {
		if code == 0 {
			return true
		}
		c.NoteError(key, version, code, where)
		n++
		return n < maxNotedErrors
	}
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 && !note(p.ErrorCode, partitionName(t.Topic, p.Partition)) {
					return
				}
			}
		}
		return
	case *kmsg.FetchResponse:
		if !note(r.ErrorCode, "") {
			return
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 && !note(p.ErrorCode, partitionName(t.Topic, p.Partition)) {
					return
				}
			}
		}
		return
	}
	budget := maxVisitedValues
	walkErrors(reflect.ValueOf(resp), "", &budget, 0, note)
}

const (
	maxNotedErrors   = 4
	maxVisitedValues = 4096
	maxWalkDepth     = 5
)

func partitionName(topic string, p int32) string { return topic + "-" + strconv.Itoa(int(p)) }

var int16Type = reflect.TypeOf(int16(0))

// walkErrors visits v's ErrorCode fields, in structs and slices of
// structs, naming each by the nearest Topic, Group or resource name and
// Partition around it. It stops when note says so or budget runs out.
func walkErrors(v reflect.Value, where string, budget *int, depth int, note func(int16, string) bool) bool {
	if depth > maxWalkDepth || *budget <= 0 {
		return false
	}
	*budget--
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return true
		}
		return walkErrors(v.Elem(), where, budget, depth, note)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.Struct {
			return true
		}
		for i := range v.Len() {
			if !walkErrors(v.Index(i), where, budget, depth+1, note) {
				return false
			}
		}
		return true
	case reflect.Struct:
	default:
		return true
	}
	t := v.Type()
	if w := nameOf(v); w != "" {
		where = w
	}
	if p := v.FieldByName("Partition"); p.IsValid() && p.Kind() == reflect.Int32 && where != "" {
		where = partitionName(where, int32(p.Int()))
	}
	if f := v.FieldByName("ErrorCode"); f.IsValid() && f.Type() == int16Type && f.Int() != 0 {
		if !note(int16(f.Int()), where) {
			return false
		}
	}
	for i := range t.NumField() {
		if k := t.Field(i).Type.Kind(); k == reflect.Slice || k == reflect.Pointer {
			if !walkErrors(v.Field(i), where, budget, depth+1, note) {
				return false
			}
		}
	}
	return true
}

// nameOf is what a response element is about: its topic, group or
// resource name; "" when it names none.
func nameOf(v reflect.Value) string {
	for _, name := range []string{"Topic", "Group", "ResourceName", "TransactionalID", "Name"} {
		f := v.FieldByName(name)
		switch {
		case !f.IsValid():
		case f.Kind() == reflect.String:
			return f.String()
		case f.Kind() == reflect.Pointer && !f.IsNil() && f.Elem().Kind() == reflect.String:
			return f.Elem().String()
		}
	}
	return ""
}
