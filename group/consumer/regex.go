package consumer

import (
	"errors"
	"regexp"
	"regexp/syntax"
	"strings"
)

// Regular expressions (SubscribedTopicRegex, ConsumerGroupHeartbeat v1).
// Kafka compiles them with RE2/J and resolves them with matches(): the
// whole topic name must match. Go's regexp is RE2 too; a pattern is
// compiled as ^(?:pattern)$ for the same full match. Every topic of the
// Image is a candidate, internal topics included, as in Kafka, less the
// topics the heartbeating member may not DESCRIBE (Visibility).

// maxCompiled bounds the cache of compiled expressions.
const maxCompiled = 256

// compile returns the full-match form of re, or re's syntax error.
func (g *Group) compile(re string) (*regexp.Regexp, error) {
	if c, ok := g.compiled[re]; ok {
		return c, nil
	}
	if _, err := regexp.Compile(re); err != nil {
		return nil, err
	}
	c, err := regexp.Compile(`^(?:` + re + `)$`)
	if err != nil {
		return nil, err
	}
	if len(g.compiled) >= maxCompiled {
		clear(g.compiled)
	}
	g.compiled[strings.Clone(re)] = c // re may alias a request
	return c, nil
}

// resolve matches re against the image's topics that may describes (nil:
// all of them).
func (g *Group) resolve(re string, img *Image, now int64, may Visibility) resolvedRegex {
	r := resolvedRegex{topics: []string{}, timestamp: now}
	c, err := g.compile(re)
	if err != nil {
		// Validated when the first member subscribed; a record written by
		// another coordinator may hold one RE2/J accepts and Go does not.
		// As Kafka does with one it cannot parse: it matches nothing.
		return r
	}
	for _, t := range img.Topics() { // sorted by name
		if c.MatchString(t.Name) && (may == nil || may(t.Name)) {
			r.topics = append(r.topics, t.Name)
		}
	}
	return r
}

// regexErrorDescription is the part of a compile error RE2/J's
// PatternSyntaxException.getDescription gives ("missing closing )").
func regexErrorDescription(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return string(se.Code)
	}
	return err.Error()
}
