package tlsconf

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// rfc2253Keywords are the attribute names Java's X500Principal.getName()
// (RFC 2253 form) writes by keyword; any other attribute is written as its
// OID with the value's DER in hex, as Java does.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// DistinguishedName is cert's subject as Kafka sees it: Java's RFC 2253
// form, most specific RDN first ("CN=alice,OU=eng,O=Fjord,C=NO").
func DistinguishedName(cert *x509.Certificate) string {
	var seq pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &seq); err != nil || len(rest) > 0 {
		return cert.Subject.String()
	}
	parts := make([]string, 0, len(seq))
	for i := len(seq) - 1; i >= 0; i-- {
		avs := make([]string, 0, len(seq[i]))
		for _, av := range seq[i] {
			oid := av.Type.String()
			if kw, ok := rfc2253Keywords[oid]; ok {
				if s, ok := av.Value.(string); ok {
					avs = append(avs, kw+"="+escapeDN(s))
					continue
				}
			}
			der, err := asn1.Marshal(av.Value)
			if err != nil {
				continue
			}
			avs = append(avs, oid+"=#"+hex.EncodeToString(der))
		}
		parts = append(parts, strings.Join(avs, "+"))
	}
	return strings.Join(parts, ",")
}

// escapeDN escapes a value as RFC 2253 section 2.4 asks.
func escapeDN(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case strings.ContainsRune(",+\"\\<>;", r),
			i == 0 && (r == ' ' || r == '#'),
			i == len(s)-1 && r == ' ':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// mappingRule is one rule of ssl.principal.mapping.rules: DEFAULT (the
// whole DN) or RULE:pattern/replacement/[LU].
type mappingRule struct {
	isDefault   bool
	pattern     *regexp.Regexp // anchored: Java's Matcher.matches()
	replacement string         // in Go's syntax
	toLower     bool
	toUpper     bool
}

// errNoRule means no rule matched a DN: Kafka fails the authentication.
var errNoRule = errors.New("no rule of ssl.principal.mapping.rules matches the client certificate")

// parseMappingRules parses Kafka's ssl.principal.mapping.rules: rules
// separated by commas (a comma inside a rule's pattern belongs to it),
// each DEFAULT or RULE:pattern/replacement/ with an optional L or U, "/"
// escaped as "\/" inside pattern and replacement.
func parseMappingRules(s string) ([]mappingRule, error) {
	var out []mappingRule
	rest := strings.TrimSpace(s)
	if rest == "" {
		rest = "DEFAULT"
	}
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, "DEFAULT"):
			out = append(out, mappingRule{isDefault: true})
			rest = rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			r, tail, err := parseRule(rest[len("RULE:"):])
			if err != nil {
				return nil, fmt.Errorf("ssl.principal.mapping.rules %q: %w", s, err)
			}
			out = append(out, r)
			rest = tail
		default:
			return nil, fmt.Errorf("ssl.principal.mapping.rules %q: at %q: want DEFAULT or RULE:pattern/replacement/[LU]", s, rest)
		}
		rest = strings.TrimSpace(rest)
		if rest != "" {
			if rest[0] != ',' {
				return nil, fmt.Errorf("ssl.principal.mapping.rules %q: at %q: rules are separated by commas", s, rest)
			}
			rest = strings.TrimSpace(rest[1:])
		}
	}
	return out, nil
}

// parseRule reads "pattern/replacement/[LU]" and returns what follows.
func parseRule(s string) (mappingRule, string, error) {
	pat, s, ok := cutUnescaped(s)
	if !ok {
		return mappingRule{}, "", errors.New("a RULE needs pattern/replacement/")
	}
	repl, s, ok := cutUnescaped(s)
	if !ok {
		return mappingRule{}, "", errors.New("a RULE needs pattern/replacement/")
	}
	re, err := regexp.Compile("^(?:" + pat + ")$")
	if err != nil {
		return mappingRule{}, "", fmt.Errorf("pattern %q: %w", pat, err)
	}
	r := mappingRule{pattern: re, replacement: javaReplacement(repl)}
	switch {
	case strings.HasPrefix(s, "L"):
		r.toLower, s = true, s[1:]
	case strings.HasPrefix(s, "U"):
		r.toUpper, s = true, s[1:]
	}
	return r, s, nil
}

// cutUnescaped splits at the first "/" not escaped as "\/", unescaping.
func cutUnescaped(s string) (before, after string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '/':
			b.WriteByte('/')
			i++
		case s[i] == '/':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}

var javaGroupRef = regexp.MustCompile(`\$(\d)`)

// javaReplacement turns Java's "$1" group references into Go's "${1}",
// so that "$1x" stays group 1 followed by x.
func javaReplacement(s string) string { return javaGroupRef.ReplaceAllString(s, "$${$1}") }

// mapPrincipal applies the rules to a DN, first match wins.
func mapPrincipal(rules []mappingRule, dn string) (string, error) {
	for _, r := range rules {
		if r.isDefault {
			return dn, nil
		}
		if !r.pattern.MatchString(dn) {
			continue
		}
		name := r.pattern.ReplaceAllString(dn, r.replacement)
		switch {
		case r.toLower:
			name = strings.ToLower(name)
		case r.toUpper:
			name = strings.ToUpper(name)
		}
		return name, nil
	}
	return "", errNoRule
}
