package compattests

// Docker and docker-compose plumbing for compose_test.go: the images, the
// copied and minimally edited compose files, compose projects and the
// client containers, and cleaning up after all of them.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// composeProjectPrefix starts the name of every compose project (and so
// the compose project label of every container, network and volume) these
// tests create; leftovers carrying it may be removed, nothing else is.
const composeProjectPrefix = "fjordcompose"

// clientLabel marks the client containers (docker run, not compose) with
// the project they belong to.
const clientLabel = "fjord.composetest.project"

// composeTool is how docker-compose is invoked: the v1 binary, or the
// `docker compose` plugin if that is all there is.
type composeTool []string

// requireDocker returns the compose command, or skips the test when docker,
// its daemon or docker-compose is missing (fails instead when
// FJORD_REQUIRE_DOCKER is set).
func requireDocker(t *testing.T) composeTool {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("FJORD_REQUIRE_DOCKER") != "" {
			t.Fatalf("FJORD_REQUIRE_DOCKER is set but %s", msg)
		}
		t.Skipf("%s (set FJORD_REQUIRE_DOCKER=1 to make this a failure)", msg)
	}
	if _, err := exec.LookPath("docker"); err != nil {
		missing("docker is not on PATH")
	}
	if out, err := run(20*time.Second, nil, "docker", "info", "--format", "{{.ServerVersion}}"); err != nil {
		missing("the docker daemon does not answer: %v: %s", err, lastLines(out, 5))
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return composeTool{p}
	}
	if _, err := run(20*time.Second, nil, "docker", "compose", "version"); err == nil {
		return composeTool{"docker", "compose"}
	}
	missing("neither docker-compose nor the docker compose plugin is installed")
	return nil
}

// run runs a command with a time bound and returns its combined output.
func run(timeout time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s %s: timed out after %v (%v)", name, strings.Join(args, " "), timeout, err)
	}
	return string(out), err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ---- images ----

// composeImages are the two images the compose tests use, built on first
// use and removed when TestCompose ends.
type composeImages struct {
	once      sync.Once
	err       error
	dir       string // build contexts
	fjord     string // the fjord image: docker/Dockerfile around fjordBin
	client    string // FROM scratch around cmd/composeclient
	clientBin string // the same static client binary, to run on the host
}

func (im *composeImages) get(t *testing.T) *composeImages {
	t.Helper()
	im.once.Do(func() { im.err = im.build() })
	if im.err != nil {
		t.Fatalf("building the images: %v", im.err)
	}
	return im
}

// repoRoot is the Fjord repository: the parent of the compat-tests module
// (go test runs in the package directory).
func repoRoot() (string, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, "docker", "Dockerfile")); err != nil {
		return "", fmt.Errorf("repository root %s has no docker/Dockerfile: %w", root, err)
	}
	return root, nil
}

// checkStatic fails unless path is an ELF executable with no interpreter
// and no shared libraries: the image is FROM scratch.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp, _ := io.ReadAll(p.Open())
			return fmt.Errorf("%s is dynamically linked (interpreter %s), but the fjord image is FROM scratch: build it static "+
				"(make build, or CGO_ENABLED=0 go build -trimpath -o bin/fjord ./cmd/fjord) and pass it as FJORD_BIN",
				path, strings.TrimRight(string(interp), "\x00"))
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Errorf("%s needs shared libraries %v, but the fjord image is FROM scratch: build it with CGO_ENABLED=0 and pass it as FJORD_BIN", path, libs)
	}
	return nil
}

func copyFile(dst, src string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

const clientDockerfile = `# compose_test.go: the compose tests' Kafka client, run on a compose
# project's network.
FROM scratch
COPY composeclient /composeclient
ENTRYPOINT ["/composeclient"]
`

func (im *composeImages) build() error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if err := checkStatic(fjordBin); err != nil {
		return err
	}
	im.dir, err = os.MkdirTemp("", "fjord-compose-images-")
	if err != nil {
		return err
	}
	id := fmt.Sprintf("%d-%s", os.Getpid(), randomHex(3))

	// The fjord image, from the repository's own Dockerfile (COPY bin/fjord).
	fctx := filepath.Join(im.dir, "fjord")
	if err := os.MkdirAll(filepath.Join(fctx, "bin"), 0o755); err != nil {
		return err
	}
	if err := copyFile(filepath.Join(fctx, "bin", "fjord"), fjordBin, 0o755); err != nil {
		return err
	}
	tag := "fjord-composetest:fjord-" + id
	if out, err := run(5*time.Minute, nil, "docker", "build", "-q", "-f", filepath.Join(root, "docker", "Dockerfile"), "-t", tag, fctx); err != nil {
		return fmt.Errorf("docker build (fjord): %v\n%s", err, lastLines(out, 30))
	}
	im.fjord = tag

	// The client image: a static build of ./cmd/composeclient, FROM scratch.
	cctx := filepath.Join(im.dir, "client")
	if err := os.MkdirAll(cctx, 0o755); err != nil {
		return err
	}
	im.clientBin = filepath.Join(cctx, "composeclient")
	if out, err := run(10*time.Minute, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", im.clientBin, "./cmd/composeclient"); err != nil {
		return fmt.Errorf("building the client: %v\n%s", err, lastLines(out, 30))
	}
	if err := checkStatic(im.clientBin); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cctx, "Dockerfile"), []byte(clientDockerfile), 0o644); err != nil {
		return err
	}
	tag = "fjord-composetest:client-" + id
	if out, err := run(5*time.Minute, nil, "docker", "build", "-q", "-t", tag, cctx); err != nil {
		return fmt.Errorf("docker build (client): %v\n%s", err, lastLines(out, 30))
	}
	im.client = tag
	return nil
}

// remove deletes the images and build contexts, if they were built.
func (im *composeImages) remove(t *testing.T) {
	for _, tag := range []string{im.fjord, im.client} {
		if tag == "" {
			continue
		}
		if out, err := run(time.Minute, nil, "docker", "rmi", "-f", tag); err != nil {
			t.Logf("removing image %s: %v: %s", tag, err, out)
		}
	}
	if im.dir != "" {
		os.RemoveAll(im.dir)
	}
}

// ---- ports ----

// hostPortFree reports whether port can be bound on 127.0.0.1 and on the
// wildcard address (where Docker publishes) right now.
func hostPortFree(port int) bool {
	for _, host := range []string{"127.0.0.1", "0.0.0.0"} {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false
		}
		ln.Close()
	}
	return true
}

// freeHostPort is a port that was free on 127.0.0.1 and the wildcard
// address a moment ago, not in avoid.
func freeHostPort(t *testing.T, avoid map[int]bool) int {
	t.Helper()
	for range 100 {
		p, _ := strconv.Atoi(freePort(t))
		if !avoid[p] && hostPortFree(p) {
			avoid[p] = true
			return p
		}
	}
	t.Fatalf("no free host port found")
	return 0
}

// ---- the compose file copy ----

// portEntry is one short-syntax `ports:` item of a service.
type portEntry struct {
	line          int    // index in the file's lines
	indent        string // text before "- "
	ip            string // "127.0.0.1:" or ""
	host          string // host port, "" if Docker picks one
	container     string // container port (and /proto)
	service, text string
}

// editedCompose is a fixture copied into a temp dir with only what the
// test must change (see editCompose).
type editedCompose struct {
	path      string
	env       []string // extra environment for docker-compose (IMAGE=...)
	keptPorts bool     // the published host ports are the file's own
	ports     []portEntry
	changes   []string // what was changed, for the log and the copy's header
	names     []string // the file's container_name values
	services  []string // the file's services
}

var (
	yamlKeyRe    = regexp.MustCompile(`^(\s*)([A-Za-z0-9_.-]+):\s*(.*)$`)
	yamlItemRe   = regexp.MustCompile(`^(\s*)-\s*(.*?)\s*$`)
	portsShortRe = regexp.MustCompile(`^(?:((?:\d{1,3}\.){3}\d{1,3}):)?(?:(\d*):)?(\d+(?:/(?:tcp|udp))?)$`)
)

func indentOf(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }

func isBlankOrComment(s string) bool {
	s = strings.TrimSpace(s)
	return s == "" || strings.HasPrefix(s, "#")
}

// editCompose copies testdata/compose/<name>/docker-compose.yml into dir
// and changes only:
//
//   - the image of every service: `image: ${IMAGE}` (the Apache files) is
//     left as it is and IMAGE=<fjord image> goes into docker-compose's
//     environment; any other `image:` line is replaced by the fjord image,
//     with the old value in a trailing comment;
//   - a service's `command:` (none of the fixtures has one), commented out;
//   - when rewritePorts is set, the host side of every published
//     `ports:` entry that names a host port, to a free port (the container
//     side stays).
//
// Every changed line carries a "# compose_test.go:" comment and the copy
// starts with a header listing the changes, so a reader can see the file
// is otherwise the fixture byte for byte.
func editCompose(t *testing.T, name, dir, fjordImage string, rewritePorts bool) *editedCompose {
	t.Helper()
	src := filepath.Join("testdata", "compose", name, "docker-compose.yml")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	ec := &editedCompose{path: filepath.Join(dir, "docker-compose.yml"), keptPorts: true}
	lines := strings.Split(string(data), "\n")

	// A small indentation-driven walk: the top-level `services:` key, its
	// services, and their own keys. The fixtures are block-style YAML.
	inServices := false
	svcIndent, keyIndent := -1, -1
	service := ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if isBlankOrComment(l) || strings.TrimSpace(l) == "---" {
			continue
		}
		ind := indentOf(l)
		if ind == 0 {
			m := yamlKeyRe.FindStringSubmatch(l)
			inServices = m != nil && m[2] == "services"
			svcIndent, service = -1, ""
			continue
		}
		if !inServices {
			continue
		}
		if svcIndent < 0 {
			svcIndent = ind
		}
		if ind == svcIndent {
			m := yamlKeyRe.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("%s:%d: cannot read service line %q", src, i+1, l)
			}
			service, keyIndent = m[2], -1
			ec.services = append(ec.services, service)
			continue
		}
		if keyIndent < 0 {
			keyIndent = ind
		}
		if ind != keyIndent {
			continue
		}
		m := yamlKeyRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		key, value := m[2], m[3]
		// The lines belonging to this key: deeper ones, and "- " items at
		// the key's own indentation (compact sequences).
		end := i + 1
		for end < len(lines) {
			n := lines[end]
			if !isBlankOrComment(n) && (indentOf(n) < ind || (indentOf(n) == ind && !strings.HasPrefix(strings.TrimSpace(n), "-"))) {
				break
			}
			end++
		}
		for end > i+1 && isBlankOrComment(lines[end-1]) {
			end--
		}
		switch key {
		case "container_name":
			ec.names = append(ec.names, strings.Trim(strings.TrimSpace(stripComment(value)), `'"`))
		case "image":
			v := strings.TrimSpace(stripComment(value))
			if strings.Trim(v, `'"`) == "${IMAGE}" {
				if ec.env == nil {
					ec.env = []string{"IMAGE=" + fjordImage}
					ec.changes = append(ec.changes, fmt.Sprintf("IMAGE=%s in docker-compose's environment, for the services' image: ${IMAGE} (those lines are not changed)", fjordImage))
				}
				continue
			}
			lines[i] = fmt.Sprintf("%simage: %s  # compose_test.go: was %s", m[1], fjordImage, v)
			ec.changes = append(ec.changes, fmt.Sprintf("service %s: image %s -> %s", service, v, fjordImage))
		case "command":
			for j := i; j < end; j++ {
				lines[j] = strings.Repeat(" ", ind) + "# compose_test.go: removed: " + strings.TrimSpace(lines[j])
			}
			ec.changes = append(ec.changes, fmt.Sprintf("service %s: command removed", service))
		case "ports":
			if strings.TrimSpace(stripComment(value)) != "" {
				t.Fatalf("%s:%d: flow-style ports %q: not supported by editCompose", src, i+1, value)
			}
			for j := i + 1; j < end; j++ {
				if isBlankOrComment(lines[j]) {
					continue
				}
				im := yamlItemRe.FindStringSubmatch(stripComment(lines[j]))
				if im == nil {
					t.Fatalf("%s:%d: cannot read ports item %q", src, j+1, lines[j])
				}
				text := strings.Trim(im[2], `'"`)
				pm := portsShortRe.FindStringSubmatch(text)
				if pm == nil {
					t.Fatalf("%s:%d: ports item %q: only the short syntax [ip:][host:]container is supported", src, j+1, im[2])
				}
				e := portEntry{line: j, indent: im[1], host: pm[2], container: pm[3], service: service, text: im[2]}
				if pm[1] != "" {
					e.ip = pm[1] + ":"
				}
				ec.ports = append(ec.ports, e)
			}
		}
	}

	if rewritePorts {
		avoid := map[int]bool{}
		for _, e := range ec.ports {
			if e.host == "" {
				continue
			}
			p := freeHostPort(t, avoid)
			lines[e.line] = fmt.Sprintf(`%s- "%s%d:%s"  # compose_test.go: was %s`, e.indent, e.ip, p, e.container, e.text)
			ec.changes = append(ec.changes, fmt.Sprintf("service %s: published port %s -> \"%s%d:%s\"", e.service, e.text, e.ip, p, e.container))
			ec.keptPorts = false
		}
	}

	// The header's lines all start with the mark too, so the copy is the
	// fixture after them.
	header := []string{
		fmt.Sprintf("# compose_test.go: a copy of compat-tests/%s,", filepath.ToSlash(src)),
		"# compose_test.go: changed only in the lines marked like this one. The changes:",
	}
	if len(ec.changes) == 0 {
		header = append(header, "# compose_test.go:   (none)")
	}
	for _, c := range ec.changes {
		header = append(header, "# compose_test.go:   - "+c)
	}
	text := strings.Join(header, "\n") + "\n" + strings.Join(lines, "\n")
	if err := os.WriteFile(ec.path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return ec
}

// stripComment drops a trailing " # ..." from a YAML scalar (the fixtures
// have no '#' inside values).
func stripComment(s string) string {
	if i := strings.Index(s, " #"); i >= 0 {
		return s[:i]
	}
	return s
}

// fixedHostPorts are the host ports the file publishes by number.
func (ec *editedCompose) fixedHostPorts() []int {
	var ps []int
	for _, e := range ec.ports {
		if e.host != "" {
			p, _ := strconv.Atoi(e.host)
			ps = append(ps, p)
		}
	}
	return ps
}

// ---- compose projects ----

// composeProject is one `docker-compose -p` project of a copied file.
type composeProject struct {
	// clientMounts are docker run -v values for the clients (a TLS
	// file's client certificate).
	clientMounts []string
	t            *testing.T
	tool         composeTool
	name         string
	file         *editedCompose
	clients      sync.Map // client container names started on its network
	started      bool     // docker-compose up was run
}

func (p *composeProject) network() string { return p.name + "_default" }

func (p *composeProject) compose(timeout time.Duration, args ...string) (string, error) {
	all := append(append([]string{}, p.tool[1:]...), "-p", p.name, "-f", p.file.path)
	all = append(all, args...)
	return run(timeout, p.file.env, p.tool[0], all...)
}

// logs is the last n lines of `docker-compose logs` and the containers'
// states.
func (p *composeProject) logs(n int) string {
	out, err := p.compose(time.Minute, "logs", "--no-color")
	if err != nil {
		out += fmt.Sprintf("\n(docker-compose logs: %v)", err)
	}
	ps, _ := p.compose(time.Minute, "ps")
	return fmt.Sprintf("last %d lines of docker-compose logs:\n%s\ndocker-compose ps:\n%s", n, lastLines(out, n), ps)
}

// down removes the project's containers, networks and volumes (and any
// client container still on its network), then checks by label that
// nothing is left, removing stragglers.
func (p *composeProject) down() {
	p.clients.Range(func(k, _ any) bool {
		run(time.Minute, nil, "docker", "rm", "-f", "-v", k.(string))
		return true
	})
	t0 := time.Now()
	if out, err := p.compose(3*time.Minute, "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
		p.t.Logf("docker-compose down: %v\n%s", err, lastLines(out, 20))
	} else {
		p.t.Logf("docker-compose down -v took %v", time.Since(t0).Round(100*time.Millisecond))
	}
	if left := removeProjectResources(p.name); left != "" {
		p.t.Logf("removed what docker-compose down left of project %s: %s", p.name, left)
	}
}

// removeProjectResources removes every container, network and volume
// labelled with compose project name (and client containers labelled
// with it) and says what it found.
func removeProjectResources(name string) string {
	var found []string
	list := func(args ...string) []string {
		out, err := run(time.Minute, nil, "docker", args...)
		if err != nil {
			return nil
		}
		return strings.Fields(out)
	}
	label := "label=com.docker.compose.project=" + name
	ids := append(list("ps", "-aq", "--filter", label), list("ps", "-aq", "--filter", "label="+clientLabel+"="+name)...)
	if len(ids) > 0 {
		found = append(found, fmt.Sprintf("%d containers", len(ids)))
		run(2*time.Minute, nil, "docker", append([]string{"rm", "-f", "-v"}, ids...)...)
	}
	if nets := list("network", "ls", "-q", "--filter", label); len(nets) > 0 {
		found = append(found, fmt.Sprintf("%d networks", len(nets)))
		run(time.Minute, nil, "docker", append([]string{"network", "rm"}, nets...)...)
	}
	if vols := list("volume", "ls", "-q", "--filter", label); len(vols) > 0 {
		found = append(found, fmt.Sprintf("%d volumes", len(vols)))
		run(time.Minute, nil, "docker", append([]string{"volume", "rm", "-f"}, vols...)...)
	}
	return strings.Join(found, ", ")
}

// sweepDeadProjects removes the resources of projects these tests started
// in a process that no longer runs (a run killed before its cleanup). The
// project name is the prefix, the pid, then the fixture's letters.
func sweepDeadProjects(t *testing.T) {
	projects := map[string]bool{}
	for _, args := range [][]string{
		{"ps", "-a", "--format", `{{.Label "com.docker.compose.project"}}`},
		{"network", "ls", "--format", `{{.Label "com.docker.compose.project"}}`},
		{"volume", "ls", "--format", `{{.Label "com.docker.compose.project"}}`},
		{"ps", "-a", "--format", `{{.Label "` + clientLabel + `"}}`},
	} {
		out, err := run(time.Minute, nil, "docker", args...)
		if err != nil {
			continue
		}
		for _, p := range strings.Fields(out) {
			if strings.HasPrefix(p, composeProjectPrefix) {
				projects[p] = true
			}
		}
	}
	pidRe := regexp.MustCompile("^" + composeProjectPrefix + `(\d+)`)
	for p := range projects {
		m := pidRe.FindStringSubmatch(p)
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if err := syscall.Kill(pid, 0); pid == os.Getpid() || !errors.Is(err, syscall.ESRCH) {
			continue // its process still runs (or cannot be told)
		}
		if found := removeProjectResources(p); found != "" {
			t.Logf("removed leftovers of an earlier aborted run, project %s: %s", p, found)
		}
	}
}

// clearNameConflicts handles a fixed container_name already in use: left
// by an earlier run of these tests (its compose project label starts with
// composeProjectPrefix), that project's resources are removed; anything
// else fails the test rather than touch someone else's container.
func (p *composeProject) clearNameConflicts() {
	for _, n := range p.file.names {
		out, err := run(time.Minute, nil, "docker", "inspect", "--type", "container", "--format", `{{index .Config.Labels "com.docker.compose.project"}}`, n)
		if err != nil {
			continue // no such container
		}
		owner := strings.TrimSpace(out)
		if !strings.HasPrefix(owner, composeProjectPrefix) {
			p.t.Fatalf("container name %q (fixed by the compose file) is taken by a container not started by these tests "+
				"(compose project %q); remove it (docker rm -f %s) to run this test", n, owner, n)
		}
		found := removeProjectResources(owner)
		p.t.Logf("container name %q was held by project %s of an earlier run: removed %s", n, owner, found)
	}
}

// containers maps each service of the project to its container id.
func (p *composeProject) containers() map[string]string {
	p.t.Helper()
	out, err := run(time.Minute, nil, "docker", "ps", "-a", "--filter", "label=com.docker.compose.project="+p.name,
		"--format", `{{.ID}} {{.Label "com.docker.compose.service"}}`)
	if err != nil {
		p.t.Fatalf("docker ps: %v: %s", err, out)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if id, svc, ok := strings.Cut(strings.TrimSpace(l), " "); ok {
			m[svc] = id
		}
	}
	return m
}

// watchExits polls the project's containers every 500 ms and calls
// cancel with an error naming the first one that has stopped, unless
// ignore(service) says it was stopped on purpose. It returns a function
// that stops the watch.
func (p *composeProject) watchExits(ids map[string]string, ignore func(service string) bool, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		args := []string{"inspect", "--type", "container", "--format", `{{index .Config.Labels "com.docker.compose.service"}} {{.State.Status}} {{.State.ExitCode}}`}
		for _, id := range ids {
			args = append(args, id)
		}
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			out, err := run(30*time.Second, nil, "docker", args...)
			if err != nil {
				continue
			}
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Fields(l)
				if len(f) != 3 || f[1] == "running" || f[1] == "created" || f[1] == "restarting" {
					continue
				}
				if ignore != nil && ignore(f[0]) {
					continue
				}
				cancel(fmt.Errorf("service %s stopped (%s, exit code %s)", f[0], f[1], f[2]))
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// clientRun is a client container running (or run) on the project's
// network.
type clientRun struct {
	name   string
	cmd    *exec.Cmd
	stdout bytes.Buffer
	mu     sync.Mutex
	stderr bytes.Buffer
	lines  chan string // stderr lines, for markers; closed at EOF
	done   chan struct{}
	err    error
}

func (c *clientRun) stderrText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// startClient starts `docker run --rm` of the client image on the
// project's network with args.
func (p *composeProject) startClient(image, role string, args ...string) *clientRun {
	p.t.Helper()
	c := &clientRun{name: fmt.Sprintf("%s-%s-%s", p.name, role, randomHex(2)), lines: make(chan string, 1000), done: make(chan struct{})}
	p.clients.Store(c.name, true)
	dargs := []string{"run", "--rm", "--name", c.name, "--label", clientLabel + "=" + p.name, "--network", p.network()}
	for _, m := range p.clientMounts {
		dargs = append(dargs, "-v", m)
	}
	dargs = append(append(dargs, image), args...)
	c.cmd = exec.Command("docker", dargs...)
	c.cmd.Stdout = &c.stdout
	pr, err := c.cmd.StderrPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		p.t.Fatalf("docker run: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			c.mu.Lock()
			c.stderr.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			select {
			case c.lines <- sc.Text():
			default:
			}
		}
		close(c.lines)
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c
}

// wait waits for the client to exit, until ctx ends; then the container is
// removed and an error returned.
func (c *clientRun) wait(ctx context.Context) error {
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		run(time.Minute, nil, "docker", "rm", "-f", c.name)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			c.cmd.Process.Kill()
		}
		return fmt.Errorf("client %s: %w", c.name, context.Cause(ctx))
	}
}
