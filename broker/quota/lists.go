package quota

import (
	"strconv"
	"strings"
	"sync"
)

// Topic config keys of the replication throttles' lists (the rates are
// broker keys).
const (
	LeaderReplicas   = "leader.replication.throttled.replicas"
	FollowerReplicas = "follower.replication.throttled.replicas"
)

// List is a parsed leader/follower.replication.throttled.replicas value:
// every replica ("*"), or a set of partition:broker pairs.
type List struct {
	all   bool
	pairs map[[2]int32]bool
}

// Has reports whether l names partition on broker.
func (l List) Has(partition, broker int32) bool {
	return l.all || l.pairs[[2]int32{partition, broker}]
}

// ParseList parses "*" or "p:b,p:b,..." (spaces allowed around items). ok
// is false for anything else.
func ParseList(v string) (l List, ok bool) {
	v = strings.TrimSpace(v)
	if v == "*" {
		return List{all: true}, true
	}
	l = List{pairs: map[[2]int32]bool{}}
	if v == "" {
		return l, true
	}
	for _, item := range strings.Split(v, ",") {
		ps, bs, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return List{}, false
		}
		p, err1 := strconv.ParseInt(strings.TrimSpace(ps), 10, 32)
		b, err2 := strconv.ParseInt(strings.TrimSpace(bs), 10, 32)
		if err1 != nil || err2 != nil || p < 0 || b < 0 {
			return List{}, false
		}
		l.pairs[[2]int32{int32(p), int32(b)}] = true
	}
	return l, true
}

// CheckList validates a throttled-replicas topic config value.
func CheckList(v string) error {
	if _, ok := ParseList(v); !ok {
		return listError(v)
	}
	return nil
}

type listError string

func (e listError) Error() string {
	return strconv.Quote(string(e)) + ` is not "*" or a list of partition:broker pairs`
}

// Lists caches parsed lists by their text (a topic's config value), so
// the fetch path parses each value once. Safe for concurrent use.
type Lists struct {
	m sync.Map // string → List
}

// Listed reports whether the list under key in configs names partition on
// broker. An unparsable value lists nothing (validation refuses one; an
// image could hold one written by other code).
func (ls *Lists) Listed(configs map[string]string, key string, partition, broker int32) bool {
	v, ok := configs[key]
	if !ok {
		return false
	}
	if l, ok := ls.m.Load(v); ok {
		return l.(List).Has(partition, broker)
	}
	l, _ := ParseList(v)
	ls.m.Store(v, l)
	return l.Has(partition, broker)
}
