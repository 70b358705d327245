package controller

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quotas (KIP-546): the ClientQuota record, the image's part, and
// the active controller's AlterClientQuotas decision.

// The entity types of a client quota, as Kafka names them.
const (
	QuotaUser     = "user"
	QuotaClientID = "client-id"
	QuotaIP       = "ip"
)

// The quota keys Kafka knows (QuotaConfigs). The first four apply to user,
// client-id and (user, client-id) entities, the last to ip entities only.
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
	QuotaConnectionCreationRate = "connection_creation_rate"
)

// quotaKind is how Kafka types a quota key's value: its value is a double
// on the wire, but a long or int key must hold a whole number in range.
type quotaKind uint8

const (
	kindDouble quotaKind = iota
	kindLong
	kindInt
)

var clientQuotaKeys = map[string]quotaKind{
	QuotaProducerByteRate:       kindLong,
	QuotaConsumerByteRate:       kindLong,
	QuotaRequestPercentage:      kindDouble,
	QuotaControllerMutationRate: kindDouble,
}

var ipQuotaKeys = map[string]quotaKind{QuotaConnectionCreationRate: kindInt}

// QuotaEntityPart is one (entity type, name) pair of a quota entity; Name
// nil is the default entity of the type (Kafka's <default>).
type QuotaEntityPart struct {
	Type string
	Name *string
}

// ClientQuota sets (Value non-nil) or removes (Value nil) one quota key of
// one entity. Entity is given as the client sent it; Apply accepts it only
// if QuotaEntityOf does.
type ClientQuota struct {
	Entity []QuotaEntityPart
	Key    string
	Value  *float64
}

func (ClientQuota) Type() RecordType { return TypeClientQuota }

// String shows the names and the value by value.
func (c ClientQuota) String() string {
	v := "<remove>"
	if c.Value != nil {
		v = strconv.FormatFloat(*c.Value, 'g', -1, 64)
	}
	return fmt.Sprintf("{Entity:%s Key:%q Value:%s}", partsString(c.Entity), c.Key, v)
}

func partsString(ps []QuotaEntityPart) string {
	var s []string
	for _, p := range ps {
		n := "<default>"
		if p.Name != nil {
			n = strconv.Quote(*p.Name)
		}
		s = append(s, p.Type+"="+n)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// QuotaName is one entity type's part of a QuotaEntity.
//
// Invariant: Default implies Name == ""; neither Default nor a Name means
// nothing unless Set.
type QuotaName struct {
	Set     bool   // the entity has this type
	Default bool   // the type's default entity
	Name    string // the specific name (may be "") when !Default
}

// QuotaEntity is a quota entity in comparable form, the image's map key.
//
// Invariant: at least one type is Set, and IP is Set only alone (Kafka
// never combines ip with the others). QuotaEntityOf builds only these.
type QuotaEntity struct {
	User, ClientID, IP QuotaName
}

// Named and DefaultName build QuotaNames.
func Named(n string) QuotaName { return QuotaName{Set: true, Name: n} }
func DefaultName() QuotaName   { return QuotaName{Set: true, Default: true} }

// QuotaEntityOf checks an entity as a client gave it: not empty, known
// types, none twice, ip alone, an ip name an IP address.
func QuotaEntityOf(parts []QuotaEntityPart) (QuotaEntity, error) {
	var e QuotaEntity
	if len(parts) == 0 {
		return e, fmt.Errorf("invalid empty client quota entity")
	}
	for _, p := range parts {
		var dst *QuotaName
		switch p.Type {
		case QuotaUser:
			dst = &e.User
		case QuotaClientID:
			dst = &e.ClientID
		case QuotaIP:
			dst = &e.IP
			if p.Name != nil {
				if _, err := netip.ParseAddr(*p.Name); err != nil {
					return QuotaEntity{}, fmt.Errorf("%q is not a valid IP address", *p.Name)
				}
			}
		default:
			return QuotaEntity{}, fmt.Errorf("unknown client quota entity type %q", p.Type)
		}
		if dst.Set {
			return QuotaEntity{}, fmt.Errorf("entity type %q given twice", p.Type)
		}
		if p.Name == nil {
			*dst = DefaultName()
		} else {
			*dst = Named(*p.Name)
		}
	}
	if e.IP.Set && (e.User.Set || e.ClientID.Set) {
		return QuotaEntity{}, fmt.Errorf("an ip entity cannot be combined with user or client-id")
	}
	return e, nil
}

// Parts returns e as (type, name) pairs, in the order user, client-id, ip.
func (e QuotaEntity) Parts() []QuotaEntityPart {
	var out []QuotaEntityPart
	for _, x := range []struct {
		typ string
		n   QuotaName
	}{{QuotaUser, e.User}, {QuotaClientID, e.ClientID}, {QuotaIP, e.IP}} {
		if !x.n.Set {
			continue
		}
		p := QuotaEntityPart{Type: x.typ}
		if !x.n.Default {
			name := x.n.Name
			p.Name = &name
		}
		out = append(out, p)
	}
	return out
}

func (e QuotaEntity) String() string { return partsString(e.Parts()) }

func compareNames(a, b QuotaName) int {
	return cmp.Or(compareBool(a.Set, b.Set), compareBool(a.Default, b.Default), cmp.Compare(a.Name, b.Name))
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// QuotaEntities returns every entity with a quota, in a fixed order. The
// caller owns the slice.
func (img *Image) QuotaEntities() []QuotaEntity {
	es := slices.Collect(maps.Keys(img.quotas))
	slices.SortFunc(es, func(a, b QuotaEntity) int {
		return cmp.Or(compareNames(a.User, b.User), compareNames(a.ClientID, b.ClientID), compareNames(a.IP, b.IP))
	})
	return es
}

// ClientQuotas returns the quotas of exactly that entity, nil when none.
// Read-only: the map is shared with other images.
func (img *Image) ClientQuotas(e QuotaEntity) map[string]float64 { return img.quotas[e] }

// HasClientQuotas reports whether any entity has a quota, so the data path
// can skip quota work entirely on a cluster without any.
func (img *Image) HasClientQuotas() bool { return len(img.quotas) > 0 }

// setClientQuota applies a ClientQuota to img (a shallow copy Apply made).
func (img *Image) setClientQuota(b ClientQuota) error {
	e, err := QuotaEntityOf(b.Entity)
	if err != nil {
		return fmt.Errorf("%w: client quota: %v", ErrNotApplicable, err)
	}
	if b.Key == "" {
		return fmt.Errorf("%w: client quota %s: empty key", ErrNotApplicable, e)
	}
	m := maps.Clone(img.quotas[e])
	if b.Value == nil {
		delete(m, b.Key)
	} else {
		if m == nil {
			m = map[string]float64{}
		}
		m[b.Key] = *b.Value
	}
	img.quotas = maps.Clone(img.quotas)
	if len(m) == 0 {
		delete(img.quotas, e)
		if len(img.quotas) == 0 {
			img.quotas = nil
		}
		return nil
	}
	if img.quotas == nil {
		img.quotas = map[QuotaEntity]map[string]float64{}
	}
	img.quotas[e] = m
	return nil
}

// QuotaOp is one operation of an AlterClientQuotas entry.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// QuotaAlteration is one entry of an AlterClientQuotas request.
type QuotaAlteration struct {
	Entity []QuotaEntityPart
	Ops    []QuotaOp
}

// QuotaResult is the decision for one QuotaAlteration: its records (none
// when ErrorCode is set), or Kafka's error code and a message.
type QuotaResult struct {
	Records   []Record
	ErrorCode int16
	Message   string
}

// AlterClientQuotas decides each entry on its own, as Kafka's controller
// does: an invalid entity, an unknown key for the entity (SCRAM credentials
// are not quotas: AlterUserScramCredentials sets those), a key given twice,
// or a value that is not positive, finite and of the key's type makes the
// entry INVALID_REQUEST and changes nothing of it; the other entries stand.
// Removing a key that is not set is allowed and changes nothing.
func AlterClientQuotas(img *Image, entries []QuotaAlteration) []QuotaResult {
	out := make([]QuotaResult, len(entries))
	for i, a := range entries {
		recs, msg := alterOne(a)
		if msg != "" {
			out[i] = QuotaResult{ErrorCode: kerr.InvalidRequest.Code, Message: msg}
			continue
		}
		out[i] = QuotaResult{Records: recs}
	}
	return out
}

func alterOne(a QuotaAlteration) ([]Record, string) {
	e, err := QuotaEntityOf(a.Entity)
	if err != nil {
		return nil, err.Error()
	}
	keys := clientQuotaKeys
	if e.IP.Set {
		keys = ipQuotaKeys
	}
	parts := e.Parts() // canonical order; never the request's slices
	seen := map[string]bool{}
	var recs []Record
	for _, op := range a.Ops {
		kind, ok := keys[op.Key]
		if !ok {
			return nil, fmt.Sprintf("invalid quota key %q for entity %s", op.Key, e)
		}
		if seen[op.Key] {
			return nil, fmt.Sprintf("quota key %q given twice for entity %s", op.Key, e)
		}
		seen[op.Key] = true
		if op.Remove {
			recs = append(recs, NewRecord(ClientQuota{Entity: parts, Key: op.Key}))
			continue
		}
		if msg := checkQuotaValue(op.Key, op.Value, kind); msg != "" {
			return nil, msg
		}
		v := op.Value
		recs = append(recs, NewRecord(ClientQuota{Entity: parts, Key: op.Key, Value: &v}))
	}
	return recs, ""
}

func checkQuotaValue(key string, v float64, kind quotaKind) string {
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return fmt.Sprintf("quota %s must be a positive number, not %v", key, v)
	}
	switch kind {
	case kindLong, kindInt:
		limit := float64(math.MaxInt64)
		if kind == kindInt {
			limit = math.MaxInt32
		}
		if v != math.Trunc(v) || v > limit {
			return fmt.Sprintf("quota %s must be a whole number up to %.0f, not %v", key, limit, v)
		}
	}
	return ""
}

// DecideAlterClientQuotas decides an AlterClientQuotas (KIP-546) in one
// round: each entry on its own (AlterClientQuotas), the valid ones in one
// batch unless the request only validates.
func DecideAlterClientQuotas(req *kmsg.AlterClientQuotasRequest) Decision {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	var (
		results []QuotaResult
		changes int
	)
	return oneRound(func(img *Image) []Record {
		entries := make([]QuotaAlteration, len(req.Entries))
		for i, re := range req.Entries {
			for _, e := range re.Entity {
				entries[i].Entity = append(entries[i].Entity, QuotaEntityPart{Type: e.Type, Name: e.Name})
			}
			for _, op := range re.Ops {
				entries[i].Ops = append(entries[i].Ops, QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
			}
		}
		results = AlterClientQuotas(img, entries)
		var recs []Record
		for _, r := range results {
			recs = append(recs, r.Records...)
		}
		changes = len(recs)
		if req.ValidateOnly {
			return nil
		}
		return recs
	}, func(_ *Image, code int16) (kmsg.Response, []Note) {
		for i, r := range results {
			se := kmsg.NewAlterClientQuotasResponseEntry()
			for _, e := range req.Entries[i].Entity {
				re := kmsg.NewAlterClientQuotasResponseEntryEntity()
				re.Type, re.Name = e.Type, e.Name
				se.Entity = append(se.Entity, re)
			}
			if r.ErrorCode != 0 {
				se.ErrorCode, se.ErrorMessage = r.ErrorCode, kmsg.StringPtr(r.Message)
			} else {
				se.ErrorCode = code
			}
			resp.Entries = append(resp.Entries, se)
		}
		if changes == 0 || code != 0 || req.ValidateOnly {
			return resp, nil
		}
		return resp, []Note{info("client quotas altered", "changes", changes)}
	})
}
