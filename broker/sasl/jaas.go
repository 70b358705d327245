package sasl

import (
	"fmt"
	"strings"
	"unicode"
)

// LoginModule is one entry of a JAAS configuration:
// `<class> <flag> key="value" ...;`.
type LoginModule struct {
	Class   string
	Flag    string // required, requisite, sufficient or optional
	Options map[string]string
}

// PlainLoginModule is the class Kafka's PLAIN credentials are given with.
const PlainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"

// ScramLoginModule is the class of SCRAM's login identity.
const ScramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"

// ParseJAASConfig parses a sasl.jaas.config value: one or more login
// modules, each ended by ';' (Kafka's JaasConfig grammar).
func ParseJAASConfig(s string) ([]LoginModule, error) {
	t := &tokenizer{s: s}
	var mods []LoginModule
	for {
		tok, err := t.next()
		if err != nil {
			return nil, err
		}
		if tok.kind == tokEOF {
			break
		}
		m, err := t.module(tok)
		if err != nil {
			return nil, err
		}
		mods = append(mods, m)
	}
	if len(mods) == 0 {
		return nil, fmt.Errorf("jaas: no login module in %q", truncate(s))
	}
	return mods, nil
}

// ParseJAASFile parses a JAAS file (java.security.auth.login.config):
// named sections `Name { module; ... };`, with // and /* */ comments.
// Section names are kept as written; Kafka looks up
// "<listener>.KafkaServer" (lower-case listener name) and then
// "KafkaServer".
func ParseJAASFile(s string) (map[string][]LoginModule, error) {
	t := &tokenizer{s: s}
	out := map[string][]LoginModule{}
	for {
		tok, err := t.next()
		if err != nil {
			return nil, err
		}
		if tok.kind == tokEOF {
			return out, nil
		}
		if tok.kind != tokWord {
			return nil, t.errorf("want a section name, got %s", show(tok))
		}
		name := tok.text
		if _, dup := out[name]; dup {
			return nil, t.errorf("section %s given twice", name)
		}
		if tok, err = t.next(); err != nil {
			return nil, err
		} else if tok.kind != tokPunct || tok.text != "{" {
			return nil, t.errorf("section %s: want '{', got %s", name, show(tok))
		}
		var mods []LoginModule
		for {
			tok, err := t.next()
			if err != nil {
				return nil, err
			}
			if tok.kind == tokPunct && tok.text == "}" {
				break
			}
			m, err := t.module(tok)
			if err != nil {
				return nil, fmt.Errorf("section %s: %w", name, err)
			}
			mods = append(mods, m)
		}
		if tok, err = t.next(); err != nil {
			return nil, err
		} else if tok.kind != tokPunct || tok.text != ";" {
			return nil, t.errorf("section %s: want ';' after '}', got %s", name, show(tok))
		}
		if len(mods) == 0 {
			return nil, t.errorf("section %s has no login module", name)
		}
		out[name] = mods
	}
}

// module parses `<class> <flag> (key=value)* ;` whose first token is first.
func (t *tokenizer) module(first token) (LoginModule, error) {
	if first.kind != tokWord {
		return LoginModule{}, t.errorf("want a login module class, got %s", show(first))
	}
	m := LoginModule{Class: first.text, Options: map[string]string{}}
	flag, err := t.next()
	if err != nil {
		return m, err
	}
	switch f := strings.ToLower(flag.text); {
	case flag.kind == tokWord && (f == "required" || f == "requisite" || f == "sufficient" || f == "optional"):
		m.Flag = f
	default:
		return m, t.errorf("login module %s: want a control flag (required, requisite, sufficient, optional), got %s", m.Class, show(flag))
	}
	for {
		key, err := t.next()
		if err != nil {
			return m, err
		}
		if key.kind == tokPunct && key.text == ";" {
			return m, nil
		}
		if key.kind != tokWord {
			return m, t.errorf("login module %s: want an option name or ';', got %s", m.Class, show(key))
		}
		eq, err := t.next()
		if err != nil {
			return m, err
		}
		if eq.kind != tokPunct || eq.text != "=" {
			return m, t.errorf("login module %s: option %s: want '=', got %s", m.Class, key.text, show(eq))
		}
		val, err := t.next()
		if err != nil {
			return m, err
		}
		if val.kind != tokWord && val.kind != tokQuoted {
			return m, t.errorf("login module %s: option %s: want a value, got %s", m.Class, key.text, show(val))
		}
		if _, dup := m.Options[key.text]; dup {
			return m, t.errorf("login module %s: option %s given twice", m.Class, key.text)
		}
		m.Options[key.text] = val.text
	}
}

type tokKind uint8

const (
	tokEOF tokKind = iota
	tokWord
	tokQuoted
	tokPunct // one of { } ; =
)

type token struct {
	kind tokKind
	text string
}

// tokenizer splits JAAS text as Java's StreamTokenizer does for it: words
// of letters, digits and ._-$ (and the other non-special characters),
// double-quoted strings with backslash escapes, the punctuation {};=, and
// comments.
type tokenizer struct {
	s    string
	pos  int
	line int
}

func (t *tokenizer) errorf(format string, a ...any) error {
	return fmt.Errorf("jaas: line %d: %s", t.line+1, fmt.Sprintf(format, a...))
}

func (t *tokenizer) next() (token, error) {
	for t.pos < len(t.s) {
		c := t.s[t.pos]
		switch {
		case c == '\n':
			t.line++
			t.pos++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			t.pos++
		case strings.HasPrefix(t.s[t.pos:], "//") || c == '#':
			for t.pos < len(t.s) && t.s[t.pos] != '\n' {
				t.pos++
			}
		case strings.HasPrefix(t.s[t.pos:], "/*"):
			end := strings.Index(t.s[t.pos+2:], "*/")
			if end < 0 {
				return token{}, t.errorf("unterminated comment")
			}
			t.line += strings.Count(t.s[t.pos:t.pos+2+end], "\n")
			t.pos += end + 4
		case c == '{' || c == '}' || c == ';' || c == '=':
			t.pos++
			return token{tokPunct, string(c)}, nil
		case c == '"' || c == '\'':
			return t.quoted(c)
		default:
			start := t.pos
			for t.pos < len(t.s) && isWordByte(t.s[t.pos]) {
				t.pos++
			}
			if t.pos == start {
				return token{}, t.errorf("unexpected character %q", rune(c))
			}
			return token{tokWord, t.s[start:t.pos]}, nil
		}
	}
	return token{kind: tokEOF}, nil
}

func isWordByte(c byte) bool {
	switch c {
	case '{', '}', ';', '=', '"', '\'', ' ', '\t', '\r', '\n', '\f':
		return false
	}
	return c >= 0x80 || !unicode.IsControl(rune(c))
}

func (t *tokenizer) quoted(q byte) (token, error) {
	t.pos++ // opening quote
	var b strings.Builder
	for t.pos < len(t.s) {
		c := t.s[t.pos]
		switch c {
		case q:
			t.pos++
			return token{tokQuoted, b.String()}, nil
		case '\n':
			return token{}, t.errorf("newline in a quoted value")
		case '\\':
			if t.pos+1 >= len(t.s) {
				return token{}, t.errorf("unterminated quoted value")
			}
			t.pos++
			switch e := t.s[t.pos]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			default:
				b.WriteByte(e)
			}
			t.pos++
		default:
			b.WriteByte(c)
			t.pos++
		}
	}
	return token{}, t.errorf("unterminated quoted value")
}

// show names a token in an error without its text when quoted: a quoted
// value may be a password.
func show(t token) string {
	switch t.kind {
	case tokQuoted:
		return "a quoted value"
	case tokEOF:
		return "the end"
	}
	return t.text
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
