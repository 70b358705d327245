package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// property is one key/value read from a properties file.
type property struct {
	key, value string
	line       int // where the (possibly continued) line starts
}

// parseProperties reads Java properties text: key=value, key: value or
// "key value"; # and ! comment lines; a line ending in an odd number of
// backslashes continues on the next (whose leading whitespace is dropped);
// backslash escapes (\t \n \r \f \uXXXX, or any character for itself).
// Keys and values are trimmed.
func parseProperties(text string) ([]property, error) {
	text = strings.TrimPrefix(text, "\ufeff")
	lines := strings.Split(text, "\n")
	var out []property
	for i := 0; i < len(lines); i++ {
		start := i + 1
		logical := strings.TrimLeft(strings.TrimSuffix(lines[i], "\r"), " \t\f")
		if logical == "" || logical[0] == '#' || logical[0] == '!' {
			continue
		}
		for continues(logical) && i+1 < len(lines) {
			i++
			logical = logical[:len(logical)-1] + strings.TrimLeft(strings.TrimSuffix(lines[i], "\r"), " \t\f")
		}
		if continues(logical) { // continuation at end of file
			logical = logical[:len(logical)-1]
		}
		// The key ends at the first unescaped '=', ':' or whitespace.
		k := 0
		for k < len(logical) {
			c := logical[k]
			if c == '\\' {
				k += 2
				continue
			}
			if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
				break
			}
			k++
		}
		k = min(k, len(logical))
		rawKey, rest := logical[:k], strings.TrimLeft(logical[k:], " \t\f")
		if rest != "" && (rest[0] == '=' || rest[0] == ':') {
			rest = strings.TrimLeft(rest[1:], " \t\f")
		}
		key, err := unescape(rawKey)
		if err != nil {
			return nil, fmt.Errorf("%d: %w", start, err)
		}
		value, err := unescape(rest)
		if err != nil {
			return nil, fmt.Errorf("%d: %w", start, err)
		}
		out = append(out, property{key: strings.TrimSpace(key), value: strings.TrimSpace(value), line: start})
	}
	return out, nil
}

// continues reports whether a line ends in an odd number of backslashes.
func continues(s string) bool {
	n := 0
	for n < len(s) && s[len(s)-1-n] == '\\' {
		n++
	}
	return n%2 == 1
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			break
		}
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\uXXXX escape in %q", s)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\uXXXX escape in %q", s)
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r)
			i += size - 1
		}
	}
	return b.String(), nil
}
