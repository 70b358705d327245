package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/protocol"
	"github.com/fjordlog/fjord/protocol/fjordmsg"
)

//go:embed templates/*.html static/*
var files embed.FS

// Bounds on what a visitor can ask for.
const (
	DefaultTailRecords = 20
	MaxTailRecords     = 200
	DefaultValueBytes  = 2048
	MaxValueBytes      = 16 << 10
	// TailReadBytes is the most log a tail reads.
	TailReadBytes = 4 << 20
	// MaxClients is the most connections the clients page lists.
	MaxClients = 500
	// MaxTopics and MaxGroups are the most topics and groups listed.
	MaxTopics = 1000
	MaxGroups = 1000
	// MaxPartitionsListed is the most under-replicated (and offline)
	// partitions the cluster page names.
	MaxPartitionsListed = 200
	// maxPages and maxTails are how many pages, and record tails among
	// them, are rendered at once; a visitor beyond gets 503.
	maxPages = 8
	maxTails = 2
)

// Console serves the pages.
type Console struct {
	src              Source
	log              zerolog.Logger
	pages            map[string]*template.Template
	mux              *http.ServeMux
	pageSem, tailSem chan struct{}
	now              func() time.Time
}

// New returns the console for src.
func New(src Source, log zerolog.Logger) *Console {
	c := &Console{src: src, log: log, pages: map[string]*template.Template{},
		pageSem: make(chan struct{}, maxPages), tailSem: make(chan struct{}, maxTails), now: time.Now}
	for _, name := range []string{"cluster", "topics", "topic", "partition", "groups", "group", "clients", "error"} {
		c.pages[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html"))
	}
	static, _ := fs.Sub(files, "static")
	c.mux = http.NewServeMux()
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /{$}", c.page("cluster", c.cluster))
	c.mux.HandleFunc("GET /topics", c.page("topics", c.topics))
	c.mux.HandleFunc("GET /topic", c.page("topic", c.topic))
	c.mux.HandleFunc("GET /partition", c.page("partition", c.partition))
	c.mux.HandleFunc("GET /groups", c.page("groups", c.groups))
	c.mux.HandleFunc("GET /group", c.page("group", c.group))
	c.mux.HandleFunc("GET /clients", c.page("clients", c.clients))
	return c
}

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Nothing inline may run or style: a value that got past escaping
	// could still not execute.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	c.mux.ServeHTTP(w, r)
}

// pageData is what the layout renders around a page.
type pageData struct {
	Title     string
	Nav       string
	ClusterID string
	NodeID    int32
	Now       time.Time
	Data      any
}

// httpError is a page's answer other than 200.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return &httpError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// page wraps a page's builder: bounded concurrency, the layout, errors.
// The page is rendered into a buffer first so a template error cannot
// leave half a page.
func (c *Console) page(name string, build func(r *http.Request) (title string, data any, err error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case c.pageSem <- struct{}{}:
			defer func() { <-c.pageSem }()
		default:
			http.Error(w, "console busy: too many pages being rendered; retry", http.StatusServiceUnavailable)
			return
		}
		clusterID, node := c.src.Identity()
		title, data, err := build(r)
		tmpl, status := c.pages[name], http.StatusOK
		if err != nil {
			status = http.StatusInternalServerError
			if he, ok := err.(*httpError); ok {
				status = he.status
			}
			tmpl, title, data = c.pages["error"], http.StatusText(status), err.Error()
		}
		var buf bytes.Buffer
		pd := pageData{Title: title, Nav: name, ClusterID: clusterID, NodeID: node, Now: c.now().UTC(), Data: data}
		if err := tmpl.Execute(&buf, pd); err != nil {
			c.log.Error().Err(err).Str("page", name).Msg("console page failed to render")
			http.Error(w, "page failed to render", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		w.Write(buf.Bytes())
	}
}

func (c *Console) cluster(*http.Request) (string, any, error) {
	return "Cluster", c.src.Cluster(), nil
}

func (c *Console) topics(r *http.Request) (string, any, error) {
	internal := r.URL.Query().Get("internal") == "1"
	rows, total, hidden := c.src.Topics(MaxTopics, internal)
	return "Topics", struct {
		Rows          []TopicSummary
		Total, Hidden int
		Internal      bool
	}{rows, total, hidden, internal}, nil
}

func (c *Console) topic(r *http.Request) (string, any, error) {
	name := r.URL.Query().Get("name")
	t, ok := c.src.Topic(name)
	if !ok {
		return "", nil, notFound("no topic %q", name)
	}
	return "Topic " + t.Name, t, nil
}

// intParam reads a query integer within [lo, hi], def when absent.
func intParam(r *http.Request, key string, def, lo, hi int) (int, error) {
	s := r.URL.Query().Get(key)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("%s=%q: want a number from %d to %d", key, s, lo, hi)
	}
	return n, nil
}

// tailView is the partition page.
type tailView struct {
	Tail
	N, ValueBytes int
	MaxN, MaxVB   int
}

func (c *Console) partition(r *http.Request) (string, any, error) {
	name := r.URL.Query().Get("topic")
	p, err := intParam(r, "p", 0, 0, 1<<30)
	if err != nil {
		return "", nil, err
	}
	n, err := intParam(r, "n", DefaultTailRecords, 1, MaxTailRecords)
	if err != nil {
		return "", nil, err
	}
	vb, err := intParam(r, "bytes", DefaultValueBytes, 16, MaxValueBytes)
	if err != nil {
		return "", nil, err
	}
	select {
	case c.tailSem <- struct{}{}:
		defer func() { <-c.tailSem }()
	default:
		return "", nil, &httpError{http.StatusServiceUnavailable, "console busy: other record tails are being read; retry"}
	}
	t, err := c.src.Tail(name, int32(p), TailLimits{Records: n, ValueBytes: vb, ReadBytes: TailReadBytes})
	if err != nil {
		return "", nil, err
	}
	slices.Reverse(t.Records) // newest first
	return fmt.Sprintf("%s-%d", t.Topic, t.Partition), tailView{Tail: t, N: n, ValueBytes: vb, MaxN: MaxTailRecords, MaxVB: MaxValueBytes}, nil
}

func (c *Console) groups(*http.Request) (string, any, error) {
	gs, total := c.src.Groups(MaxGroups)
	return "Consumer groups", struct {
		Groups []GroupSummary
		Total  int
	}{gs, total}, nil
}

// groupView is the group page: the timeline newest first, with each
// entry's duration and its share of the longest, for a bar.
type groupView struct {
	Group
	Rebalances []rebalanceRow
	Now        int64
}

type rebalanceRow struct {
	group.Rebalance
	JoinMs, TotalMs int64 // durations; TotalMs to now while in progress
	Open            bool
	MaxMs           int64 // the longest in the list, the bars' scale
}

func (c *Console) group(r *http.Request) (string, any, error) {
	id := r.URL.Query().Get("id")
	g, ok := c.src.Group(id)
	if !ok {
		return "", nil, notFound("no group %q coordinated by this node (each node's console shows the groups it coordinates)", id)
	}
	now := c.now().UnixMilli()
	v := groupView{Group: g, Now: now}
	var longest int64 = 1
	for i := len(g.Timeline) - 1; i >= 0; i-- {
		e := g.Timeline[i]
		row := rebalanceRow{Rebalance: e, Open: e.End < 0}
		end := e.End
		if row.Open {
			end = now
		}
		row.TotalMs = max(end-e.Start, 0)
		if e.JoinEnd >= 0 {
			row.JoinMs = max(e.JoinEnd-e.Start, 0)
		} else {
			row.JoinMs = row.TotalMs
		}
		longest = max(longest, row.TotalMs)
		v.Rebalances = append(v.Rebalances, row)
	}
	for i := range v.Rebalances {
		v.Rebalances[i].MaxMs = longest
	}
	return "Group " + g.ID, v, nil
}

// clientsView is the clients page.
type clientsView struct {
	Clients   []protocol.ClientInfo
	Total     int
	Shown     int
	MaxErrors int
}

func (c *Console) clients(*http.Request) (string, any, error) {
	cs, total := c.src.Clients(MaxClients)
	slices.SortFunc(cs, func(a, b protocol.ClientInfo) int {
		return strings.Compare(a.SoftwareName+"\x00"+a.SoftwareVersion+"\x00"+a.ClientID+"\x00"+a.Remote,
			b.SoftwareName+"\x00"+b.SoftwareVersion+"\x00"+b.ClientID+"\x00"+b.Remote)
	})
	return "Clients", clientsView{Clients: cs, Total: total, Shown: len(cs), MaxErrors: protocol.MaxClientErrors}, nil
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"ids": func(ids []int32) string {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = strconv.Itoa(int(id))
		}
		return strings.Join(s, ", ")
	},
	"has": func(ids []int32, id int32) bool { return slices.Contains(ids, id) },
	"ms": func(ms int64) string {
		if ms < 0 {
			return "—"
		}
		return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000")
	},
	"time": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") },
	"ago":  ago,
	"dur":  func(ms int64) string { return formatDur(time.Duration(ms) * time.Millisecond) },
	"size": formatBytes,
	"show": Show,
	"api":  fjordmsg.AnyNameForKey,
	"errname": func(code int16) string {
		if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
			return e.Message
		}
		return "error " + strconv.Itoa(int(code))
	},
	"sortedTopics": func(m map[string][]int32) []string {
		ks := make([]string, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	},
	"sub1": func(n int) int { return n - 1 },
}

func ago(now, t time.Time) string {
	d := now.Sub(t)
	if d < time.Minute {
		return strconv.Itoa(int(d.Seconds())) + " s ago"
	}
	return formatDur(d) + " ago"
}

func formatDur(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
