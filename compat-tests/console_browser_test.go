package compattests

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// Headless Chromium for the console test (console_test.go): loading a
// page, its DOM's tables and links, screenshots.

// chromiumPath finds Debian's chromium: skip when absent, unless
// FJORD_REQUIRE_CHROMIUM is set.
func chromiumPath(t *testing.T) string {
	t.Helper()
	return toolPath(t, "chromium", "FJORD_REQUIRE_CHROMIUM")
}

// browser runs headless Chromium, one process per page.
type browser struct {
	t       *testing.T
	bin     string
	profile string
	shots   string // screenshot directory, "" for none
}

func (b *browser) run(args ...string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args = append([]string{"--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir=" + b.profile}, args...)
	cmd := exec.CommandContext(ctx, b.bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// load returns the page's DOM after Chromium has loaded it, and saves its
// screenshot as name.png when screenshots are asked for (and name is not
// "").
func (b *browser) load(u, name string) *html.Node {
	b.t.Helper()
	dom := b.run("--dump-dom", u)
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		b.t.Fatalf("%s: parsing the DOM: %v", u, err)
	}
	if title := text(find(doc, "h1")); title == "" {
		b.t.Fatalf("%s: no page title in the DOM:\n%s", u, dom)
	}
	if b.shots != "" && name != "" {
		path := filepath.Join(b.shots, name+".png")
		b.run("--hide-scrollbars", "--window-size=1280,900", "--screenshot="+path, u)
		if err := shrinkPNG(path); err != nil {
			b.t.Fatalf("screenshot %s: %v", path, err)
		}
	}
	return doc
}

// shrinkPNG rewrites a screenshot with a palette of its 256 most used
// colors (each other color mapped to the nearest): a page is mostly flat
// colors, and the file shrinks to a fraction.
func shrinkPNG(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		return err
	}
	counts := map[color.RGBA]int{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			counts[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	cs := make([]color.RGBA, 0, len(counts))
	for c := range counts {
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b color.RGBA) int { return counts[b] - counts[a] })
	pal := make(color.Palette, 0, 256)
	for _, c := range cs[:min(len(cs), 256)] {
		pal = append(pal, c)
	}
	out := image.NewPaletted(bounds, pal)
	index := map[color.RGBA]uint8{}
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			i, ok := index[c]
			if !ok {
				i = uint8(pal.Index(c))
				index[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, out); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// find returns the first element named tag (with id, when given).
func find(n *html.Node, tag string, id ...string) *html.Node {
	if n.Type == html.ElementNode && n.Data == tag && (len(id) == 0 || attr(n, "id") == id[0]) {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := find(c, tag, id...); f != nil {
			return f
		}
	}
	return nil
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

var spaces = regexp.MustCompile(`\s+`)

// text is n's text content, spaces collapsed.
func text(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteString(" ")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.TrimSpace(spaces.ReplaceAllString(b.String(), " "))
}

// rows returns the text of each cell of each body row of table id.
func rows(t *testing.T, doc *html.Node, id string) [][]string {
	t.Helper()
	tbl := find(doc, "table", id)
	if tbl == nil {
		t.Fatalf("no table %q on the page", id)
	}
	var out [][]string
	body := find(tbl, "tbody")
	for tr := body.FirstChild; tr != nil; tr = tr.NextSibling {
		if tr.Type != html.ElementNode || tr.Data != "tr" {
			continue
		}
		var cells []string
		for td := tr.FirstChild; td != nil; td = td.NextSibling {
			if td.Type == html.ElementNode && td.Data == "td" {
				cells = append(cells, text(td))
			}
		}
		out = append(out, cells)
	}
	return out
}

// row is the first row of table id whose first cell is first.
func row(t *testing.T, doc *html.Node, id, first string) []string {
	t.Helper()
	for _, r := range rows(t, doc, id) {
		if len(r) > 0 && r[0] == first {
			return r
		}
	}
	t.Fatalf("table %q has no row %q: %q", id, first, rows(t, doc, id))
	return nil
}

// link is the absolute URL of the first link on the page whose text is
// linkText, failing the test if there is none.
func link(t *testing.T, base string, doc *html.Node, linkText string) string {
	t.Helper()
	var found string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if found != "" {
			return
		}
		if n.Type == html.ElementNode && n.Data == "a" && text(n) == linkText {
			found = attr(n, "href")
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if found == "" {
		t.Fatalf("no link %q on the page", linkText)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := url.Parse(found)
	if err != nil {
		t.Fatalf("link %q: %v", found, err)
	}
	return u.ResolveReference(ref).String()
}

// get is a page's HTML as served, for waiting on a state before Chromium
// loads it.
func get(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return string(body)
}
