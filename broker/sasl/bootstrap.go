package sasl

import (
	"fmt"
	"strconv"
	"strings"
)

// ScramBootstrap is one credential of fjord.sasl.scram.bootstrap, Fjord's
// counterpart of kafka-storage.sh format --add-scram.
type ScramBootstrap struct {
	Mechanism  string // SCRAM-SHA-256 or SCRAM-SHA-512
	User       string
	Password   string
	Iterations int32 // 4096 unless given
}

// ParseScramBootstrap parses entries in --add-scram's form, separated by
// ';' or ',' between them:
// SCRAM-SHA-256=[name=admin,password=admin-secret(,iterations=8192)].
// Messages never show a password.
func ParseScramBootstrap(s string) ([]ScramBootstrap, error) {
	var out []ScramBootstrap
	rest := strings.TrimSpace(s)
	for rest != "" {
		mech, after, ok := strings.Cut(rest, "=[")
		mech = strings.ToUpper(strings.TrimSpace(mech))
		if !ok || scramHash(mech) == nil {
			return nil, fmt.Errorf("want SCRAM-SHA-256=[name=...,password=...] or SCRAM-SHA-512=[...], got %q", trunc(rest))
		}
		body, tail, ok := strings.Cut(after, "]")
		if !ok {
			return nil, fmt.Errorf("%s: no closing ']'", mech)
		}
		b := ScramBootstrap{Mechanism: mech, Iterations: 4096}
		for kv := range strings.SplitSeq(body, ",") {
			k, v, ok := strings.Cut(kv, "=")
			k = strings.TrimSpace(k)
			switch {
			case !ok:
				return nil, fmt.Errorf("%s: want key=value, got a bare %q", mech, trunc(k))
			case k == "name":
				b.User = strings.Trim(strings.TrimSpace(v), `"`)
			case k == "password":
				b.Password = strings.Trim(strings.TrimSpace(v), `"`)
			case k == "iterations":
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
				if err != nil || n < 4096 || n > 16384 {
					return nil, fmt.Errorf("%s: iterations %q: want 4096 to 16384", mech, v)
				}
				b.Iterations = int32(n)
			default:
				return nil, fmt.Errorf("%s: unknown key %q (name, password, iterations)", mech, trunc(k))
			}
		}
		if b.User == "" || b.Password == "" {
			return nil, fmt.Errorf("%s: name and password are both needed", mech)
		}
		out = append(out, b)
		rest = strings.TrimLeft(strings.TrimSpace(tail), ",;")
		rest = strings.TrimSpace(rest)
	}
	return out, nil
}
