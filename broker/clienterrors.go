package broker

import (
	"reflect"
	"slices"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/protocol"
)

// noteResponseErrors records the error codes a response carries in its
// connection's client record (protocol.Client), for the console's clients
// page: at most maxNotedErrors per response, each with what it was about.
// Produce and Fetch, the hot paths, are read directly; other responses,
// by reflection over their ErrorCode fields (a plan per type, errorPlan),
// within a bound of visited values.
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
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return
	}
	if p := planFor(v.Elem().Type()); p != nil {
		budget := maxVisitedValues
		walkErrors(p, v.Elem(), "", -1, &budget, 0, note)
	}
}

const (
	maxNotedErrors   = 4
	maxVisitedValues = 4096
	maxWalkDepth     = 5
)

func partitionName(topic string, p int32) string { return topic + "-" + strconv.Itoa(int(p)) }

// errorPlan is where a response struct type keeps its error code, its
// name and partition, and the fields that lead to more error codes:
// worked out once per type, so a walk costs field loads, not name lookups.
type errorPlan struct {
	code, name, partition int  // field indices; -1 when absent
	namePtr               bool // the name field is a *string
	// children are the slice or pointer fields whose elements may hold
	// error codes, with the elements' plan.
	children []childPlan
}

type childPlan struct {
	field int
	ptr   bool // a pointer to one struct, else a slice of structs
	plan  *errorPlan
}

var (
	errorPlans sync.Map // reflect.Type (a struct type) -> *errorPlan; nil when no error code is reachable
	int16Type  = reflect.TypeFor[int16]()
)

// planFor returns t's plan, nil when no ErrorCode field is reachable from
// t. Response types do not recurse, so the recursion ends.
func planFor(t reflect.Type) *errorPlan {
	if p, ok := errorPlans.Load(t); ok {
		return p.(*errorPlan)
	}
	p := &errorPlan{code: -1, name: -1, partition: -1}
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case f.Name == "ErrorCode" && f.Type == int16Type:
			p.code = i
		case f.Name == "Partition" && f.Type.Kind() == reflect.Int32:
			p.partition = i
		case p.name < 0 && slices.Contains(nameFields, f.Name) && f.Type.Kind() == reflect.String:
			p.name = i
		case p.name < 0 && slices.Contains(nameFields, f.Name) && f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.String:
			p.name, p.namePtr = i, true
		case f.Type.Kind() == reflect.Slice || f.Type.Kind() == reflect.Pointer:
			if e := f.Type.Elem(); e.Kind() == reflect.Struct {
				if ep := planFor(e); ep != nil {
					p.children = append(p.children, childPlan{i, f.Type.Kind() == reflect.Pointer, ep})
				}
			}
		}
	}
	if p.code < 0 && len(p.children) == 0 {
		p = nil
	}
	errorPlans.Store(t, p)
	return p
}

// nameFields are the fields that say what a response element is about.
var nameFields = []string{"Topic", "Group", "ResourceName", "TransactionalID", "Name"}

// walkErrors visits the error codes of v, a struct of plan p, and of its
// elements, naming each by the nearest name and partition (part, -1 for
// none; the name is only built for an error). It stops when note says so
// or budget runs out.
func walkErrors(p *errorPlan, v reflect.Value, where string, part int32, budget *int, depth int, note func(int16, string) bool) bool {
	if depth > maxWalkDepth || *budget <= 0 {
		return false
	}
	*budget--
	if p.name >= 0 {
		f := v.Field(p.name)
		if p.namePtr {
			if !f.IsNil() {
				where = f.Elem().String()
			}
		} else if f.String() != "" {
			where = f.String()
		}
	}
	if p.partition >= 0 && where != "" {
		part = int32(v.Field(p.partition).Int())
	}
	if p.code >= 0 {
		if code := int16(v.Field(p.code).Int()); code != 0 {
			w := where
			if part >= 0 {
				w = partitionName(where, part)
			}
			if !note(code, w) {
				return false
			}
		}
	}
	for _, c := range p.children {
		f := v.Field(c.field)
		if c.ptr {
			if !f.IsNil() && !walkErrors(c.plan, f.Elem(), where, part, budget, depth+1, note) {
				return false
			}
			continue
		}
		for j := range f.Len() {
			if !walkErrors(c.plan, f.Index(j), where, part, budget, depth+1, note) {
				return false
			}
		}
	}
	return true
}
