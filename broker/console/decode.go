package console

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"unicode/utf8"
)

// Shown is a key, value or header value as a page shows it. Text is
// plain text for html/template to escape; nothing here is trusted.
type Shown struct {
	Kind    string // "null", "empty", "json", "text" or "hex"
	Text    string
	Len     int  // the whole value's length
	Clipped bool // Text shows only the first bytes
}

// maxPrettyDepth is the deepest JSON that is indented: indentation grows
// with depth squared, so deeper documents are shown as they are.
const maxPrettyDepth = 24

// Show decides how to display b: JSON indented when the whole value is a
// JSON object or array, UTF-8 text when it is text (a clipped value's last
// rune may be cut), else a hex dump.
func Show(b Bytes) Shown {
	s := Shown{Len: b.Len, Clipped: b.Len > len(b.Data)}
	switch {
	case b.Null:
		s.Kind = "null"
		return s
	case b.Len == 0:
		s.Kind = "empty"
		return s
	}
	d := b.Data
	if !s.Clipped && isJSONDocument(d) {
		var out bytes.Buffer
		if err := json.Indent(&out, d, "", "  "); err == nil {
			s.Kind, s.Text = "json", out.String()
			return s
		}
	}
	if t, ok := asText(d, s.Clipped); ok {
		s.Kind, s.Text = "text", t
		return s
	}
	s.Kind, s.Text = "hex", hex.Dump(d)
	return s
}

// isJSONDocument reports whether d is a valid JSON object or array no
// deeper than maxPrettyDepth.
func isJSONDocument(d []byte) bool {
	t := bytes.TrimSpace(d)
	if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
		return false
	}
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range t {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest <= maxPrettyDepth && json.Valid(t)
}

// asText returns d as text if it is UTF-8 without control characters
// other than tab, newline and carriage return. A clipped value may end in
// the middle of a rune: up to utf8.UTFMax-1 trailing bytes are dropped.
func asText(d []byte, clipped bool) (string, bool) {
	if clipped {
		for i := 0; i < utf8.UTFMax-1 && len(d) > 0 && !utf8.Valid(d); i++ {
			d = d[:len(d)-1]
		}
	}
	if !utf8.Valid(d) {
		return "", false
	}
	for _, r := range string(d) {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f {
			return "", false
		}
	}
	return string(d), true
}
