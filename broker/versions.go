package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handlerFunc answers one request. It runs on the connection's reader
// goroutine and must not block: work that waits calls respond later from
// another goroutine. respond must be called exactly once.
type handlerFunc func(b *Broker, cc *connCtx, req kmsg.Request, respond func(kmsg.Response))

type apiEntry struct {
	min, max int16
	fn       handlerFunc
}

// apis is the one registry of served keys: ApiVersions advertises exactly
// it, and dispatch and the front end's version check read it. Filled by
// init functions in the NN_name.go files, never changed afterwards.
var apis = map[int16]apiEntry{}

func regKey(key, min, max int16, fn handlerFunc) {
	if _, dup := apis[key]; dup {
		panic("broker: api key registered twice")
	}
	apis[key] = apiEntry{min, max, fn}
}

// versionTable implements protocol.Versions from apis.
type versionTable struct{}

func (versionTable) Supported(key int16) (int16, int16, bool) {
	e, ok := apis[key]
	return e.min, e.max, ok
}

func (versionTable) All() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for k, e := range apis {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: e.min, MaxVersion: e.max})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}
