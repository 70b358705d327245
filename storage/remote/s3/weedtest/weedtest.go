// Package weedtest runs a real S3-compatible store, SeaweedFS's
// `weed mini` (master, volume server, filer and S3 gateway in one
// process), for the tests of package s3 and of the tiering code above it.
//
// The binary is built by `make weed` (build-weed.sh, a pinned SeaweedFS
// version) to bin/weed; tests find it through FJORD_WEED_BIN. Without it
// they skip with a message saying how to build it; with
// FJORD_REQUIRE_WEED=1 they fail instead (`make test` sets both).
// FJORD_WEED_WAIT names a file that a background build (`make
// weed-bg`) writes its exit status to when it ends: Start waits for it
// (at most 40 minutes, and never past the test binary's -timeout: a
// cold build took 27 minutes on a loaded two-core machine, 4 on an idle
// one), so the build overlaps the other tests instead of delaying them
// all.
//
// Every port weed mini binds (master, volume, filer and S3, each HTTP and
// gRPC, and the admin server's) is chosen free on 127.0.0.1, the
// optional servers (WebDAV, Iceberg and Lance catalogues, admin UI) are
// off, and telemetry is off. The server runs with one S3 identity
// (AccessKey, SecretKey: weed mini makes an admin identity of
// AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY), so it refuses other
// credentials. It runs in its own process group, killed at the end of
// the test (and by the kernel if the test process dies first).
package weedtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Server is one running weed mini.
type Server struct {
	// Endpoint is the S3 gateway, http://127.0.0.1:port.
	Endpoint string
	// AccessKey and SecretKey are the one identity the server accepts.
	AccessKey, SecretKey string
	// Region is what clients should sign with (weed accepts any).
	Region string
	// Log is weed's combined output.
	Log string

	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

// Bin returns the weed binary to run: FJORD_WEED_BIN, after waiting for
// a background build (FJORD_WEED_WAIT). Without FJORD_WEED_BIN the test
// is skipped, or failed under FJORD_REQUIRE_WEED=1.
func Bin(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("FJORD_WEED_BIN")
	if bin == "" {
		msg := "FJORD_WEED_BIN is not set: run `make weed` and set FJORD_WEED_BIN=$PWD/bin/weed to test against SeaweedFS"
		if os.Getenv("FJORD_REQUIRE_WEED") == "1" {
			t.Fatal(msg + " (FJORD_REQUIRE_WEED=1)")
		}
		t.Skip(msg)
	}
	if status := os.Getenv("FJORD_WEED_WAIT"); status != "" {
		waitBuild(t, status)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("FJORD_WEED_BIN: %v", err)
	}
	return bin
}

// waitBuild waits for the background build's status file.
func waitBuild(t testing.TB, status string) {
	t.Helper()
	deadline := time.Now().Add(40 * time.Minute)
	// Fail with a message before go test's -timeout kills the binary
	// with a stack dump.
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := d.Deadline(); ok && end.Add(-time.Minute).Before(deadline) {
			deadline = end.Add(-time.Minute)
		}
	}
	logged := false
	for {
		b, err := os.ReadFile(status)
		if err == nil && strings.TrimSpace(string(b)) != "" {
			if s := strings.TrimSpace(string(b)); s != "0" {
				t.Fatalf("the background build of weed failed (exit status %s); see %s.log", s, strings.TrimSuffix(status, ".status"))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the background build of weed has not ended in time (%s is not written; %s.log shows how far it got): run `make weed` first, or give go test a longer -timeout", status, strings.TrimSuffix(status, ".status"))
		}
		if !logged {
			t.Logf("waiting for the background build of weed (%s)", status)
			logged = true
		}
		time.Sleep(time.Second)
	}
}

// freePorts returns n distinct free TCP ports on 127.0.0.1. They are
// closed before weed binds them; another process could take one in
// between, which weed mini then reports by moving to the next port (and
// Start fails waiting for S3 if that was the S3 port).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// Start runs weed mini in a temporary directory and waits until its S3
// gateway serves signed requests. It is stopped at the end of the test.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Bin(t)
	dir := t.TempDir()
	p := freePorts(t, 10)
	s := &Server{
		Endpoint:  "http://127.0.0.1:" + strconv.Itoa(p[6]),
		AccessKey: "fjordtestkey",
		SecretKey: "fjordtestsecret0123456789",
		Region:    "us-east-1",
		Log:       filepath.Join(dir, "weed.log"),
		done:      make(chan struct{}),
	}
	logf, err := os.Create(s.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	args := []string{"mini",
		"-dir=" + filepath.Join(dir, "data"),
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port=" + strconv.Itoa(p[0]), "-master.port.grpc=" + strconv.Itoa(p[1]),
		"-volume.port=" + strconv.Itoa(p[2]), "-volume.port.grpc=" + strconv.Itoa(p[3]),
		"-filer.port=" + strconv.Itoa(p[4]), "-filer.port.grpc=" + strconv.Itoa(p[5]),
		"-s3.port=" + strconv.Itoa(p[6]), "-s3.port.grpc=" + strconv.Itoa(p[7]),
		"-admin.port=" + strconv.Itoa(p[8]), "-admin.port.grpc=" + strconv.Itoa(p[9]), "-admin.port.legacy=0",
		"-s3.port.iceberg=0", "-s3.port.lance=0",
		"-webdav=false", "-admin.ui=false",
		"-master.telemetry=false",
		"-s3.autoCreateBucket=false",
		"-master.volumeSizeLimitMB=64",
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+s.AccessKey, "AWS_SECRET_ACCESS_KEY="+s.SecretKey, "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	s.cmd = cmd
	go func() { _ = cmd.Wait(); close(s.done) }()
	t.Cleanup(s.Stop)
	began := time.Now()
	if err := s.waitReady(3 * time.Minute); err != nil {
		t.Fatalf("weed mini: %v\n%s", err, s.tail())
	}
	t.Logf("weed mini serving S3 on %s after %v", s.Endpoint, time.Since(began).Round(time.Millisecond))
	return s
}

// Client is an S3 client for the server with its credentials.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       s.Region,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

// waitReady polls ListBuckets, a signed request the gateway answers only
// once it reaches the filer, with a backoff, until it succeeds, weed
// exits, or the bound passes.
func (s *Server) waitReady(bound time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	c := s.Client()
	backoff := 50 * time.Millisecond
	var last error
	for {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.ListBuckets(rctx, &s3.ListBucketsInput{})
		rcancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-s.done:
			return fmt.Errorf("exited before serving S3 (%v)", s.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("S3 not serving after %v: %v", bound, last)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// CreateBucket creates a bucket, retrying while the store settles (a
// fresh weed mini may refuse writes until its volume server registers).
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := s.Client()
	backoff := 50 * time.Millisecond
	for {
		_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name})
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("create bucket %s: %v\n%s", name, err, s.tail())
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// Stop kills weed's process group and waits for weed (at most 30 s);
// safe to call twice.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	pgid := s.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
		}
	}
	// Whatever weed started in its group goes with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// Stopped reports whether weed has exited.
func (s *Server) Stopped() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// tail is the end of weed's log, for a failure message.
func (s *Server) tail() string {
	b, _ := os.ReadFile(s.Log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
